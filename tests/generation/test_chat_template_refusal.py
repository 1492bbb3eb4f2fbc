"""``--prompt-template paraphrase-chat`` on a base model (no chat template, as Gemma 3 270M's GGUF): a one-line
error read from the tokenizer's files before the model loads, never a traceback after it; a job's settings
(the API's and the admin's) refuse it as a settings error (a 400)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from generation.generation_job.params import GenerationSettingsError, prompt_template_json
from generation.model_source import model_folder
from generation.prompts import PromptTemplateError, builtin, for_folder

from .tiny_gguf import write_tiny_gguf


@pytest.fixture
def base_model(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAFORGE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    return write_tiny_gguf(tmp_path / "tiny-f32.gguf")


def test_paraphrase_chat_on_a_base_model_is_one_line(base_model, tmp_path):
    inputs = tmp_path / "in.txt"
    inputs.write_text("The cat sat on the mat.\n")
    with pytest.raises(CommandError) as err:
        call_command(
            "paraphrase",
            "--model",
            str(base_model),
            "--input",
            str(inputs),
            "--output",
            str(tmp_path / "out.txt"),
            "--prompt-template",
            "paraphrase-chat",
            stdout=io.StringIO(),
        )
    message = str(err.value)
    assert "\n" not in message and "no chat template" in message and "paraphrase-plain" in message
    assert not (tmp_path / "out.txt").exists()


def test_job_settings_refuse_a_chat_template_for_a_base_model(base_model):
    folder = model_folder(base_model)
    with pytest.raises(PromptTemplateError, match="no chat template"):
        for_folder(folder, "paraphrase-chat")
    assert for_folder(folder, None).name == "paraphrase-plain"  # its default is still fine
    with pytest.raises(GenerationSettingsError, match="no chat template"):
        prompt_template_json(str(folder), True, "paraphrase-chat")
    assert prompt_template_json(str(folder), True, builtin("paraphrase-plain").to_json())["name"] == "paraphrase-plain"
