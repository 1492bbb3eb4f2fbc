"""A llama.cpp GGUF file as a ``--model``: converted once, through transformers' own GGUF loading, into a plain
Hugging Face folder that every loader then reads as any other local checkpoint.

:func:`generation.model_source.model_folder` (the one rule for ``--model`` values) hands this module a path that
is a ``.gguf`` file, or a folder holding exactly one ``.gguf`` file and no ``config.json``. Why a converted
folder rather than loading the GGUF each time: transformers dequantizes a GGUF into float32 weights on every
load (Gemma 3 270M Q4_K_M: 44 s on two cores), and the decoder, the rewriter's training and the job's weights
fingerprint all expect a folder of safetensors.

* The cache is keyed by the file's SHA-256: ``<cache>/<sha256>/`` (``PARAFORGE_GGUF_CACHE``, else
  ``<PARAFORGE_VAR_DIR or var/>/gguf``). The same bytes under another name or path reuse it; an edited file
  gets a folder of its own.
* A conversion is written into a temporary folder beside its target and renamed into place only when
  complete, so two processes converting at once cannot leave a half folder (the second rename loses and its
  copy is removed; both then read the same complete folder).
* The folder keeps what the file says of itself (:data:`RECORD`: architecture, name, licence, its SHA-256 and
  size) and the licence files found beside it (``LICENSE*``, ``NOTICE*``, ``*TERMS*``): the resource's and
  release's cards name them (:func:`gguf_record`).

Saving needs one step transformers does not take: a GGUF-loaded model carries its quantizer and refuses
``save_pretrained``; its weights are already dequantized float32 tensors, so dropping the quantizer saves
exactly what was loaded (a test checks that the folder decodes token for token as the GGUF loaded directly).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

GGUF_SUFFIX = ".gguf"
RECORD = "paraforge_gguf.json"
CACHE_ENV = "PARAFORGE_GGUF_CACHE"
# files beside a GGUF that state its terms, copied into the converted folder (Gemma's Terms of Use and Notice)
LICENCE_PATTERNS = ("LICENSE*", "LICENCE*", "NOTICE*", "*TERMS*", "USE_POLICY*")
_PROJECT = Path(__file__).resolve().parents[1]


class GGUFError(RuntimeError):
    """A GGUF file that cannot be read or converted: one line."""


def gguf_file(path: Path) -> Path | None:
    """The GGUF file ``path`` names: itself when it is a ``.gguf`` file, the one ``.gguf`` file of a folder that
    is not itself a Hugging Face checkpoint (no ``config.json``), else None. GGUFError for a folder with
    several (which one is meant is not for us to guess)."""
    if path.is_file():
        return path if path.name.lower().endswith(GGUF_SUFFIX) else None
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(f for f in path.iterdir() if f.is_file() and f.name.lower().endswith(GGUF_SUFFIX))
    if len(found) > 1:
        raise GGUFError(
            f"model folder {str(path)!r} holds {len(found)} GGUF files ({', '.join(f.name for f in found[:4])}): "
            "give the one meant as the model"
        )
    return found[0] if found else None


def gguf_cache_dir() -> Path:
    """Where converted GGUF files are kept, read from the environment now (see the module's docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.path.expanduser(os.environ[CACHE_ENV]))
    return Path(os.environ.get("PARAFORGE_VAR_DIR") or _PROJECT / "var") / "gguf"


_DIGESTS: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    """The file's SHA-256 (kept for the process while its size and modification time stay the same)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    with _LOCK:
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def read_metadata(path: Path) -> dict:
    """What the file says of itself: ``architecture``, ``name``, ``license`` (and ``license_name``,
    ``license_link``, ``author``, ``size_label`` where given), read with the ``gguf`` package."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one message
        raise GGUFError(f"{str(path)!r} is not a readable GGUF file ({type(exc).__name__}: {exc})") from None
    out = {}
    for key, name in (
        ("general.architecture", "architecture"),
        ("general.name", "name"),
        ("general.license", "license"),
        ("general.license.name", "license_name"),
        ("general.license.link", "license_link"),
        ("general.author", "author"),
        ("general.size_label", "size_label"),
    ):
        field = reader.fields.get(key)
        if field is not None:
            out[name] = str(field.contents())
    if "architecture" not in out:
        raise GGUFError(f"{str(path)!r} names no architecture (general.architecture): not a model GGUF file")
    return out


def converted_folder(path: Path, *, convert: bool = True) -> Path:
    """The converted folder of the GGUF file ``path`` (converting it first when the cache lacks it).
    ``convert=False``: GGUFError instead of converting (a web request must not start a minute of work)."""
    digest = file_sha256(path)
    cache = gguf_cache_dir()
    target = cache / digest
    if (target / RECORD).is_file():
        return target
    if not convert:
        raise GGUFError(
            f"GGUF file {str(path)!r} is not converted yet: convert it once on the server "
            f"(`python -m generation.gguf_source {path}`, or any manage.py command given it as its model)"
        )
    metadata = read_metadata(path)
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=cache))
    try:
        _convert_into(path, work)
        for pattern in LICENCE_PATTERNS:
            for found in sorted(path.parent.glob(pattern)):
                if found.is_file() and found != path:
                    shutil.copyfile(found, work / found.name)
        record = {
            **metadata,
            "file": path.name,
            "sha256": digest,
            "size": path.stat().st_size,
            "licence_files": sorted(
                f.name for p in LICENCE_PATTERNS for f in work.glob(p) if f.is_file() and f.name != RECORD
            ),
        }
        (work / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        try:
            os.rename(work, target)
        except OSError:
            if not (target / RECORD).is_file():  # (not another process's complete copy: a real failure)
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _convert_into(path: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = dict(gguf_file=path.name, local_files_only=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **where)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **where)
    except Exception as exc:  # noqa: BLE001 - one clear message for any file transformers cannot load
        message = " ".join(str(exc).split())
        raise GGUFError(f"cannot load GGUF file {str(path)!r}: {type(exc).__name__}: {message}") from None
    # the weights are dequantized float32 already; the quantizer only forbids saving them
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def gguf_record(folder: str | os.PathLike) -> dict | None:
    """The GGUF a converted folder came from (:data:`RECORD`), None for any other folder."""
    try:
        return json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def model_origin(folder: str | os.PathLike) -> dict | None:
    """What a resource and a release card record of a model converted from a GGUF file: the file's name,
    SHA-256, architecture, stated name and licence, and the licence files kept with it. None for any other."""
    record = gguf_record(folder)
    if record is None:
        return None
    keys = ("file", "sha256", "architecture", "name", "license", "license_name", "license_link", "licence_files")
    return {"format": "gguf", **{k: record[k] for k in keys if record.get(k)}}


def main(argv: list[str] | None = None) -> int:
    """``python -m generation.gguf_source FILE``: convert (or find) FILE's folder and print its path."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Convert a GGUF file into Paraforge's cache; print the folder.")
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        found = gguf_file(args.file)
        if found is None:
            raise GGUFError(f"{str(args.file)!r} is not a GGUF file nor a folder holding one")
        print(converted_folder(found))
    except GGUFError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
