"""A resource decoded by a decoder-only model: its prompt template is on the release card (issue 40)."""

from __future__ import annotations

import pytest

from .test_release_parquet import export, scored  # noqa: F401 - the release tests' resource (a fixture)

pytestmark = pytest.mark.django_db

TEMPLATE = {
    "name": "file:ask.txt",
    "text": "Say it | otherwise: {source}\nAnswer:",
    "chat": False,
    "stop_at_newline": True,
}


def test_card_shows_the_prompt_template(scored, tmp_path):  # noqa: F811
    resource = scored.resource
    resource.settings = {**resource.settings, "prompt_template": TEMPLATE}
    resource.save(update_fields=["settings"])
    export("res", "--out", str(tmp_path / "c"), "--version", "2026.1")
    card = (tmp_path / "c" / "README.md").read_text()
    # the provenance table names it, its text on one line (a Markdown cell)
    assert "| prompt template | `file:ask.txt` | `Say it \\| otherwise: {source} Answer:` |" in card
    assert '"prompt_template": {' in card  # and the generation settings hold it whole


def test_card_of_an_encoder_decoder_resource_has_no_prompt_row(scored, tmp_path):  # noqa: F811
    export("res", "--out", str(tmp_path / "c"), "--version", "2026.1")
    assert "prompt template" not in (tmp_path / "c" / "README.md").read_text()
