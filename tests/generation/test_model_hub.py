"""``--model ORG/NAME``: a hub id resolved through the Hugging Face cache (generation/model_source.py), offline.

The cache is a folder each test builds in the layout ``huggingface_hub`` writes
(``models--ORG--NAME/refs/main`` holding a commit hash, ``snapshots/<hash>/`` of symlinks into ``blobs/``),
filled with the shipped demo model's files; ``HF_HUB_CACHE``/``HF_HOME`` point at it and ``HF_HUB_OFFLINE=1``
keeps everything off the network.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from generation.decoding import normalise_constraints, violations
from generation.model_source import ModelFolderError, hub_cache_dir, hub_id, model_folder

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL = ROOT / "generation" / "demo" / "model"
REPO_ID = "Helsinki-NLP/opus-mt-cs-en"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
LINES = ["How often do earthquakes occur?", "The cat sat on the mat."]
CONSTRAINTS = {"positive": [["today"]], "negative": [["often"]]}

pytestmark = pytest.mark.skipif(not (DEMO_MODEL / "config.json").is_file(), reason="demo model not built")


def build_hub_cache(hub: Path, repo_id: str = REPO_ID, commit: str = COMMIT) -> Path:
    """``hub/models--ORG--NAME`` as ``snapshot_download`` leaves it; returns the snapshot folder."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)  # no newline, as huggingface_hub writes it
    snapshot, blobs = repo / "snapshots" / commit, repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for f in sorted(DEMO_MODEL.iterdir()):
        if f.is_file():
            blob = blobs / hashlib.sha256(f.read_bytes()).hexdigest()
            if not blob.exists():  # one blob for files with the same bytes (source.spm = target.spm)
                blob.symlink_to(f)
            (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    home = tmp_path / "hf-home"
    for var in ("HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home / "hub"


def _paraphrase(tmp_path, model: str, name: str) -> list[dict]:
    inp, out = tmp_path / "in.txt", tmp_path / f"{name}.jsonl"
    inp.write_text("\n".join(LINES) + "\n")
    cons = tmp_path / "c.jsonl"
    cons.write_text(json.dumps(CONSTRAINTS) + "\n{}\n")
    call_command(
        "paraphrase",
        "--model",
        model,
        "--input",
        str(inp),
        "--output",
        str(out),
        "--constraints",
        str(cons),
        "--beam",
        "4",
        "--nbest",
        "2",
        "--max-length",
        "32",
        "--device",
        "cpu",
    )
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_paraphrase_loads_a_hub_id_from_the_cache_offline(tmp_path, hf_cache):
    build_hub_cache(hf_cache)
    rows = _paraphrase(tmp_path, REPO_ID, "hub")
    assert [r["source"] for r in rows] == LINES
    for r in rows:
        assert r["unsatisfiable"] is False and len(r["outputs"]) == 2
        assert all(any(w.isalpha() for w in o["text"].split()) and o["satisfied"] for o in r["outputs"])
    for o in rows[0]["outputs"]:  # "today" in, "often" out, as whole words
        assert violations(o["text"], normalise_constraints(CONSTRAINTS)) == []
    # the same weights and tokenizer as the local folder: the same outputs
    assert rows == _paraphrase(tmp_path, str(DEMO_MODEL), "local")


def test_model_folder_rule(tmp_path, hf_cache, monkeypatch):
    snapshot = build_hub_cache(hf_cache)
    assert hub_cache_dir() == hf_cache
    assert model_folder(REPO_ID) == snapshot
    assert model_folder(f"{REPO_ID}@{COMMIT}") == snapshot  # a pinned revision (a commit) of the same snapshot
    # a path that exists is a folder, exactly as before, even when it is shaped like a hub id
    monkeypatch.chdir(tmp_path)
    local = tmp_path / "Helsinki-NLP" / "opus-mt-cs-en"
    local.mkdir(parents=True)
    assert model_folder(REPO_ID) == Path(REPO_ID)
    assert model_folder(str(DEMO_MODEL)) == DEMO_MODEL
    assert model_folder("demo/model", base_dir=ROOT / "generation") == ROOT / "generation" / "demo" / "model"
    # not a hub id: a missing folder, as before
    for value in (
        str(tmp_path / "missing"),
        "./missing/model",
        "a/b/c",
        "org--x/name",
        "org/.name",
        "-org/name",
        "org/name@../../x",
        "org/name/",
    ):
        assert hub_id(value) is None
        with pytest.raises(ModelFolderError, match="does not exist"):
            model_folder(value)
    assert hub_id("Helsinki-NLP/opus-mt-cs-en@v1.0") == (REPO_ID, "v1.0")


def test_an_id_not_in_the_cache_while_offline_is_a_clear_error(tmp_path, hf_cache):
    build_hub_cache(hf_cache)
    inp = tmp_path / "in.txt"
    inp.write_text("x\n")
    with pytest.raises(CommandError) as caught:
        call_command(
            "paraphrase",
            "--model",
            "Helsinki-NLP/opus-mt-en-de",
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "out.jsonl"),
        )
    message = str(caught.value)
    assert "'Helsinki-NLP/opus-mt-en-de' is neither a local folder nor in the Hugging Face cache" in message
    assert str(hf_cache) in message and "offline" in message
    assert "HF_HUB_OFFLINE" in message and "HF_HUB_CACHE" in message and "HF_HOME" in message
    assert "\n" not in message and "Traceback" not in message
    with pytest.raises(ModelFolderError, match="neither a local folder nor in the Hugging Face cache"):
        model_folder(f"{REPO_ID}@{'f' * 40}")  # a commit that is not cached
    assert not (tmp_path / "out.jsonl").exists()


def test_the_generation_job_takes_a_hub_id(hf_cache, settings):
    from generation.generation_job.params import GenerationSettingsError, check_model_folder
    from generation.generation_job.pipeline import loaded_model
    from generation.model_source import model_fingerprint, model_folder

    snapshot = build_hub_cache(hf_cache)
    assert model_folder(REPO_ID) == snapshot
    check_model_folder(REPO_ID)
    assert model_fingerprint(REPO_ID) == model_fingerprint(str(DEMO_MODEL))
    assert loaded_model(REPO_ID, "cpu").path == str(snapshot)
    with pytest.raises(GenerationSettingsError, match="neither a local folder nor in the Hugging Face cache"):
        check_model_folder("Helsinki-NLP/opus-mt-en-de")
