"""Decoder-only models in ``paraphrase``, ``generate`` and the generation job (issue 40): taken exactly as an
encoder-decoder model is, with ``--prompt-template``; the template is stored with the job and the resource."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from generation.decoding import normalise_constraints, violations
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key
from generation.generation_job.params import GenerationSettingsError
from generation.models import Resource
from generation.prompts import CHAT_INSTRUCTION
from infra.shards import read_jsonl_gz
from jobs.execution import job_run_inline, job_start
from jobs.models import Job, JobStatus

from .causal_models import save_chat_model
from .test_generation_job import checked_params, corpus  # noqa: F401 - the job tests' corpus (a fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("one_torch_thread")]


def _params(corpus, model_dir, **extra):  # noqa: F811
    return {"corpus": corpus.pk, "model": str(model_dir), "systems": [28], "beam": 3, "max_length": 16,
            "batch_size": 8, "device": "cpu", "seed": 1, **extra}  # fmt: skip


def _records(job):
    return [r for c in job.chunks.order_by("index") for r in read_jsonl_gz(candidate_shard_key(job.pk, c.index))]


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory):
    return save_chat_model(tmp_path_factory.mktemp("tiny_qwen2") / "m")


def test_job_decodes_with_a_decoder_only_model_and_stores_its_template(corpus, chat_dir):  # noqa: F811
    job = job_start(kind=KIND, params=_params(corpus, chat_dir, systems=[17, 28]), enqueue=False)
    # no template named: the model's chat template (its folder has one), stored whole with the job
    assert job.params["prompt_template"] == {
        "name": "paraphrase-chat",
        "text": CHAT_INSTRUCTION,
        "chat": True,
        "stop_at_newline": False,
    }
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    records = _records(job)
    assert records and any(r["candidates"] for r in records)
    for record in records:
        for cand in record["candidates"]:
            for system in cand["systems"]:
                assert violations(cand["text"], normalise_constraints(cand["constraints"][system])) == []
    assert Resource.objects.get(job=job).settings["prompt_template"]["name"] == "paraphrase-chat"


def test_generate_cli_takes_a_template_file_and_stores_its_text(corpus, chat_dir, tmp_path, capsys):  # noqa: F811
    (tmp_path / "ask.txt").write_text("Rewrite: {source}\nRewritten:")
    call_command(
        "generate", "tiny-gen", "--model", str(chat_dir), "--systems", "28", "--prompt-template",
        str(tmp_path / "ask.txt"),
    )  # fmt: skip
    job = Job.objects.get(pk=json.loads(capsys.readouterr().out)["job"])
    assert job.params["prompt_template"]["name"] == "file:ask.txt"
    assert job.params["prompt_template"]["text"] == "Rewrite: {source}\nRewritten:"  # the worker needs no file


@pytest.mark.parametrize(
    "model, template, message",
    [
        ("marian", "paraphrase-plain", "prompt_template is for decoder-only models"),
        ("chat", "paraphrase-poem", "neither a built-in"),
        ("chat", "{tmp}/none.txt", "neither a built-in"),
    ],
)
def test_generate_cli_template_errors_create_nothing(
    corpus,  # noqa: F811
    chat_dir,
    tiny_marian_dir,
    tmp_path,
    model,
    template,
    message,
):
    folder = chat_dir if model == "chat" else tiny_marian_dir
    args = ["tiny-gen", "--model", str(folder), "--systems", "28", "--prompt-template", template.format(tmp=tmp_path)]
    with pytest.raises(CommandError, match=message):
        call_command("generate", *args)
    assert not Job.objects.exists() and not Resource.objects.exists()


def write_bert_folder(tmp_path):
    """A checkpoint folder of an encoder (BERT): loadable by transformers, decodable by nothing."""
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"architectures": ["BertModel"], "model_type": "bert"}')
    (tmp_path / "bert" / "model.safetensors").write_bytes(b"x")
    return tmp_path / "bert"


def test_a_folder_that_is_neither_kind_is_refused(corpus, tmp_path):  # noqa: F811
    with pytest.raises(GenerationSettingsError, match="neither an encoder-decoder .* nor a decoder-only"):
        checked_params(corpus, model=str(write_bert_folder(tmp_path)), systems=[28])


def test_every_command_reads_the_model_kind_by_one_rule(tmp_path):
    """A generation job, ``paraphrase`` and ``train_rewriter --base-model`` refuse an encoder alike: before the
    rule was one, the decoder and the rewriter read any config without ``is_encoder_decoder`` as a causal LM
    (and failed in transformers' loading with a traceback-sized message), only the job refused it."""
    bert = write_bert_folder(tmp_path)
    (tmp_path / "in.txt").write_text("the cat sat on the mat\n")
    (tmp_path / "pairs.tsv").write_text("the cat sat\ta cat sat\n")
    runs = {
        "paraphrase": ["--model", str(bert), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o")],
        "train_rewriter": [
            "--pairs",
            str(tmp_path / "pairs.tsv"),
            "--out",
            str(tmp_path / "run"),
            "--base-model",
            str(bert),
        ],
    }
    for command, args in runs.items():
        with pytest.raises(CommandError, match="neither an encoder-decoder .* nor a decoder-only") as raised:
            call_command(command, *args)
        assert str(bert) in str(raised.value) and "\n" not in str(raised.value), command
    assert not (tmp_path / "o").exists() and not (tmp_path / "run").exists()


def test_paraphrase_cli_with_a_decoder_only_model(chat_dir, tmp_path):
    (tmp_path / "in.txt").write_text("the cat sat on the mat\nhow often do earthquakes occur\n")
    (tmp_path / "c.jsonl").write_text('{"positive": [["dog"]], "negative": [["cat"]]}\n{"negative": [["often"]]}\n')
    out = tmp_path / "out.jsonl"
    call_command(
        "paraphrase", "--model", str(chat_dir), "--input", str(tmp_path / "in.txt"), "--output", str(out),
        "--constraints", str(tmp_path / "c.jsonl"), "--prompt-template", "paraphrase-plain", "--beam", "3",
        "--max-length", "16", "--device", "cpu",
    )  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["source"] for r in rows] == ["the cat sat on the mat", "how often do earthquakes occur"]
    cons = [{"positive": [["dog"]], "negative": [["cat"]]}, {"negative": [["often"]]}]
    for r, c in zip(rows, cons):  # the banned words are in the prompt: only the continuation avoids them
        assert not r["unsatisfiable"] and r["outputs"]
        assert violations(r["outputs"][0]["text"], normalise_constraints(c)) == []


def test_paraphrase_cli_template_errors(chat_dir, tiny_marian_dir, tmp_path):
    (tmp_path / "in.txt").write_text("the cat\n")
    base = ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.jsonl"), "--device", "cpu"]
    with pytest.raises(CommandError, match="--prompt-template: .*decoder-only"):
        call_command("paraphrase", "--model", str(tiny_marian_dir), "--prompt-template", "paraphrase-plain", *base)
    with pytest.raises(CommandError, match="--prompt-template: .*no \\{source\\}"):
        (tmp_path / "t.txt").write_text("no placeholder")
        call_command("paraphrase", "--model", str(chat_dir), "--prompt-template", str(tmp_path / "t.txt"), *base)
    assert not (tmp_path / "o.jsonl").exists()
