"""A llama.cpp GGUF file as ``--model``: converted once into a folder cached by its SHA-256, which decodes
token for token as the GGUF loaded by transformers directly; its metadata and licence files kept."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from generation.decoding import decode, load_model, normalise_constraints, violations
from generation.gguf_source import RECORD, file_sha256, gguf_record
from generation.model_source import ModelFolderError, model_folder
from generation.words import words_of

from .tiny_gguf import write_tiny_gguf


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "gguf-cache"
    monkeypatch.setenv("PARAFORGE_GGUF_CACHE", str(folder))
    return folder


@pytest.fixture
def tiny(tmp_path):
    folder = tmp_path / "llamacpp"
    folder.mkdir()
    (folder / "LICENSE").write_text("Apache License 2.0 (test)\n")
    return write_tiny_gguf(folder / "tiny-f32.gguf")


def test_gguf_file_converts_once_into_a_folder_keyed_by_its_sha256(tiny, cache, tmp_path):
    folder = model_folder(tiny)
    assert folder == cache / file_sha256(tiny)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    record = gguf_record(folder)
    assert record["architecture"] == "llama" and record["name"] == "tiny-llama-test"
    assert record["license"] == "apache-2.0" and record["licence_files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_text() == "Apache License 2.0 (test)\n"
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llama"
    made = (folder / "model.safetensors").stat().st_mtime_ns
    # the folder holding it, and the same bytes under another name: the same converted folder, not converted again
    assert model_folder(tiny.parent) == folder
    copy = tmp_path / "elsewhere.gguf"
    shutil.copyfile(tiny, copy)
    assert model_folder(copy) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == made
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no temporary folder left behind
    # other bytes: a folder of their own
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=1)
    assert model_folder(other) != folder


def test_converted_folder_decodes_as_the_gguf_loaded_directly(tiny, cache):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    direct = AutoModelForCausalLM.from_pretrained(str(tiny.parent), gguf_file=tiny.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(tiny.parent), gguf_file=tiny.name)
    loaded = load_model(str(tiny), device="cpu", prompt_template="paraphrase-plain")
    assert loaded.path == str(cache / file_sha256(tiny))
    ids = tok(["the cat and the dog"], return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, loaded.model(ids).logits)
    greedy = dict(max_new_tokens=12, do_sample=False, pad_token_id=tok.eos_token_id)
    assert torch.equal(direct.generate(ids, **greedy), loaded.model.generate(ids, **greedy))


def test_gguf_model_decodes_under_constraints(tiny, cache):
    loaded = load_model(str(tiny), device="cpu", prompt_template="paraphrase-plain")
    c = {"positive": [["cat"]], "negative": [["the"]]}
    [r] = decode(loaded, ["the dog sat on the mat"], [c], beam=4, nbest=2, max_length=20)
    assert not r.unsatisfiable and r.outputs
    for o in r.outputs:
        assert violations(o["text"], normalise_constraints(c)) == []
        assert "cat" in words_of(o["text"])


def test_unloadable_gguf_is_one_line_and_leaves_no_folder(tmp_path, cache):
    bad = write_tiny_gguf(tmp_path / "bad.gguf", tokenizer="no-such-tokenizer")
    with pytest.raises(ModelFolderError, match=r"cannot load GGUF file .*bad\.gguf") as err:
        model_folder(bad)
    assert "\n" not in str(err.value)
    assert not cache.exists() or list(cache.iterdir()) == []
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all")
    with pytest.raises(ModelFolderError, match="not a readable GGUF file"):
        model_folder(junk)


def test_web_requests_never_convert_and_two_gguf_files_are_ambiguous(tiny, cache, tmp_path):
    with pytest.raises(ModelFolderError, match="not converted yet"):
        model_folder(tiny, cache_only=True)
    folder = model_folder(tiny)
    assert model_folder(tiny, cache_only=True) == folder
    write_tiny_gguf(tiny.parent / "second.gguf", seed=2)
    with pytest.raises(ModelFolderError, match="holds 2 GGUF files"):
        model_folder(tiny.parent)
    assert (folder / RECORD).is_file()


def test_web_form_takes_a_converted_gguf_under_the_model_roots_only(tiny, cache, settings):
    from generation.web.forms import ConfinedPathError, confined_model

    settings.PARAFORGE_MODEL_ROOTS = [str(tiny.parent)]
    with pytest.raises(ConfinedPathError, match="not converted yet"):
        confined_model(tiny.name)
    model_folder(tiny)  # converted on the server, once
    assert confined_model(tiny.name) == str(tiny)
    assert confined_model(".") == str(tiny.parent)


def test_train_rewriter_takes_a_gguf_base_model(tiny, cache):
    from generation.rewriter.base_model import find_base_model

    base = find_base_model(str(tiny))
    assert base.given == str(tiny) and base.folder == cache / file_sha256(tiny)
    assert base.causal and base.model_type == "llama"
