"""A resource decoded by a model converted from a GGUF file: the file, its stated licence and its terms' files
travel from the resource's settings to the release card (issue 47)."""

from __future__ import annotations

import pytest

from generation.generation_job.kind import resource_settings
from generation.model_source import model_folder
from tests.generation.tiny_gguf import write_tiny_gguf

from .test_release_parquet import export, scored  # noqa: F401 - the release tests' resource (a fixture)

pytestmark = pytest.mark.django_db


def test_the_gguf_models_licence_is_on_the_resource_and_the_release_card(scored, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PARAFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "gemma"
    folder.mkdir()
    (folder / "NOTICE").write_text("Gemma is provided under and subject to the Gemma Terms of Use\n")
    gguf = write_tiny_gguf(folder / "tiny.gguf", license="gemma")
    model_folder(gguf)  # converted once
    params = {"corpus": 1, "model": str(gguf), "model_sha256": "0" * 64, "systems": [1], "beam": 2, "nbest": 1}
    params.update(max_length=16, length_penalty=1.0, idf_table=None, seed=0)
    origin = resource_settings(params)["model_origin"]
    assert origin["license"] == "gemma" and origin["file"] == "tiny.gguf" and origin["licence_files"] == ["NOTICE"]

    resource = scored.resource
    resource.settings = {**resource.settings, "model_origin": origin}
    resource.save(update_fields=["settings"])
    export("res", "--out", str(tmp_path / "c"), "--version", "2026.1")
    card = (tmp_path / "c" / "README.md").read_text()
    assert "converted from GGUF `tiny.gguf`" in card
    assert "model licence: **gemma** (with its terms: `NOTICE`)" in card
