"""Where a ``--model`` value's files are: a local folder, or a Hugging Face hub id resolved through the cache.

:func:`model_folder` is the one rule, used by every place that takes a seq2seq model (``manage.py paraphrase``
and ``generate``, the generation job's ``model`` param, ``generation.decoding.load_model``, bench/decoding.py):

* a path that exists (as given, or relative to ``base_dir``: the project root, where workers run) is a local
  folder, exactly as before; a ``.gguf`` file, or a folder holding one and no ``config.json``, is converted
  once into a cached folder keyed by its SHA-256, which is returned instead (``generation/gguf_source.py``);
* a bare name that is not a path here is a model ``scripts/setup --model NAME`` installed, when
  ``generation.model_install.models_root()`` holds it (``gemma3-270m``, as the admin and the API name it too);
* otherwise a value shaped like a hub id, ``org/name`` (``Helsinki-NLP/opus-mt-cs-en``), optionally
  ``org/name@revision`` (a branch, tag or commit), is looked up in the Hugging Face cache and, unless offline,
  fetched into it by ``huggingface_hub.snapshot_download``; the result is the snapshot folder, which the
  loaders then read as a local folder (``local_files_only=True``);
* anything else is a folder that does not exist.

The cache and offline settings are the ones users know from ``transformers``, read when a model is resolved:
``HF_HUB_CACHE`` (else ``HF_HOME``/hub, else ``~/.cache/huggingface/hub``), ``HF_HUB_OFFLINE=1`` or
``TRANSFORMERS_OFFLINE=1`` (cache only), ``HF_TOKEN`` for gated or private models, ``HF_ENDPOINT`` for a mirror.
Only what a PyTorch seq2seq checkpoint needs is downloaded (no TensorFlow, Flax, Rust or ONNX weights).
Every failure is a :class:`ModelFolderError` with a one-line message. A hub id resolved once is kept for the
life of the process, so a worker's chunks do not ask the hub again (the job's weights hash guards the rest).
"""

from __future__ import annotations

import json
import os
import re
import threading
import warnings
from pathlib import Path

from .gguf_source import GGUFError, converted_folder, gguf_file
from .model_install import models_root
from .prompts import TRAINING_JSON

# ``org/name`` as the hub spells repository ids (letters, digits, ``-``, ``_``, ``.``; no ``--`` or ``..``),
# with an optional ``@revision``
_HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<revision>[\w./-]+))?")
# files of other frameworks and formats the PyTorch loaders never read
HUB_IGNORE_PATTERNS = [
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "*.onnx_data",
    "*.tflite",
    "*.mlmodel",
    "*.gguf",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    "tf_model*",
    "original/*",  # (Meta's Llama repositories: the same weights again in their own format)
    "flax_model*",
    "rust_model*",
]
HUB_ENV_HELP = (
    "HF_HUB_CACHE or HF_HOME pick the cache; HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE=1) keeps to "
    "it; HF_TOKEN for gated or private models"
)
_TRUE = {"1", "ON", "YES", "TRUE"}
MODEL_HELP = (
    "a local Hugging Face seq2seq or decoder-only (causal LM) checkpoint folder, a llama.cpp GGUF file (or a "
    "folder holding one; converted once into PARAFORGE_GGUF_CACHE), or a hub model id "
    "(ORG/NAME[@REVISION], e.g. Helsinki-NLP/opus-mt-cs-en) found in or fetched into the Hugging Face cache "
    "(HF_HUB_CACHE / HF_HOME; HF_HUB_OFFLINE=1: the cache only)"
)


class ModelFolderError(RuntimeError):
    """The model folder is missing or holds no loadable seq2seq checkpoint, or a hub id cannot be resolved."""


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache as ``huggingface_hub`` finds it, read from the environment now (not at
    import): ``HF_HUB_CACHE``, the legacy ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``/hub, ``XDG_CACHE_HOME``."""
    env = os.environ
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(os.path.expandvars(os.path.expanduser(env[var])))
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    return (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").upper() in _TRUE


def hub_id(value: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` when ``value`` is shaped like a hub model id, else None."""
    m = _HUB_ID.fullmatch(value)
    if m is None:
        return None
    repo, revision = m["repo"], m["revision"]
    if any(bad in repo for bad in ("--", "..")) or repo.endswith((".", "-")) or repo.split("/")[1][0] in ".-":
        return None
    if revision is not None and (".." in revision or revision.startswith("/") or revision.endswith("/")):
        return None  # (a revision names a file under the cache's refs/: nothing that leaves it)
    return repo, revision


_RESOLVED: dict[tuple[str, str | None, str, bool], Path] = {}
_RESOLVE_LOCK = threading.Lock()


def model_folder(
    value: str | os.PathLike, base_dir: str | os.PathLike | None = None, *, cache_only: bool = False
) -> Path:
    """The local folder for a ``--model`` value (see the module's docstring). A path that exists is returned
    as it is (the caller says what it lacks when it is not a checkpoint folder); a hub id comes back as its
    snapshot folder in the cache. ``cache_only``: never fetch, as if offline (a web form: a request must not
    make the server download a model). Raises ModelFolderError: a folder that does not exist, a hub id that
    is not cached while offline, unknown or unreachable."""
    text = os.fspath(value)
    path = Path(text)
    if not path.exists() and base_dir is not None and not path.is_absolute() and (Path(base_dir) / path).exists():
        path = Path(base_dir) / path
    if not path.exists() and text == path.name and (models_root() / text).is_dir():
        path = models_root() / text  # a model that scripts/setup --model installed, by its name (gemma3-270m)
    if path.exists():
        return _gguf_converted(path, cache_only=cache_only)
    found = hub_id(text)
    if found is None:
        raise ModelFolderError(f"model folder {text!r} does not exist")
    return _hub_snapshot(*found, cache_only=cache_only)


def _gguf_converted(path: Path, *, cache_only: bool) -> Path:
    """``path`` itself, or, when it is a GGUF file or a folder holding one, its converted folder
    (``generation.gguf_source``: converted once, cached by the file's SHA-256; ``cache_only``: never converted
    here, as a web request must not start a minute of work)."""
    try:
        found = gguf_file(path)
        return path if found is None else converted_folder(found, convert=not cache_only)
    except GGUFError as exc:
        raise ModelFolderError(str(exc)) from None


def _hub_snapshot(repo_id: str, revision: str | None, *, cache_only: bool = False) -> Path:
    cache, offline = hub_cache_dir(), hub_offline() or cache_only
    key = (repo_id, revision, str(cache), offline)
    with _RESOLVE_LOCK:
        if key in _RESOLVED and _RESOLVED[key].is_dir():
            return _RESOLVED[key]
    name = repo_id + (f"@{revision}" if revision else "")
    where = f"Hugging Face cache {str(cache)!r}"
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            HFValidationError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise ModelFolderError(
            f"model folder {name!r} does not exist (and huggingface_hub, which would resolve "
            "it as a hub id, is not installed)"
        ) from None
    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=cache, local_files_only=offline, ignore_patterns=HUB_IGNORE_PATTERNS
        )
    except HFValidationError as exc:
        raise ModelFolderError(
            f"model folder {name!r} does not exist, nor is it a valid hub id ({_one_line(exc)})"
        ) from None
    except LocalEntryNotFoundError as exc:
        if cache_only:
            reason = "it is not fetched from here"
        elif offline:
            reason = "offline mode (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1) forbids fetching it"
        else:
            cause = exc.__cause__ or exc
            reason = f"the hub could not be reached ({type(cause).__name__}: {_one_line(cause)})"
        raise ModelFolderError(
            f"model {name!r} is neither a local folder nor in the {where}, and {reason}: "
            f"fetch it into that cache once where the network allows (`hf download "
            f"{repo_id}`) or give a local folder ({HUB_ENV_HELP})"
        ) from None
    except GatedRepoError:
        raise ModelFolderError(
            f"hub model {name!r} is gated: accept its terms on the hub and set HF_TOKEN (cache: {str(cache)!r})"
        ) from None
    except RepositoryNotFoundError:
        raise ModelFolderError(
            f"model {name!r} is neither a local folder nor a model on the hub (or it is private: set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise ModelFolderError(f"hub model {repo_id!r} has no revision {revision!r}") from None
    except (HfHubHTTPError, OSError) as exc:
        raise ModelFolderError(
            f"cannot fetch hub model {name!r} into the {where}: {type(exc).__name__}: {_one_line(exc)}"
        ) from None
    folder = Path(folder)
    with _RESOLVE_LOCK:
        _RESOLVED[key] = folder
    return folder


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def ignore_sacremoses_warning() -> None:
    """Silence MarianTokenizer's "Recommended: pip install sacremoses" (the demo model's and opus-mt's tokenizer):
    it warns when it cannot set up Moses punctuation normalisation, but transformers 5 never applies that
    normaliser to the text it encodes (``MarianTokenizer.normalize`` has no caller), so the package would
    change nothing and the warning is noise. Called wherever a tokenizer is loaded."""
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses", category=UserWarning)


# --- adapter folders (train_rewriter --lora-rank; decoded merged into their base: decoding/adapters.py)

ADAPTER_CONFIG = "adapter_config.json"


class AdapterFolderError(ValueError):
    """An adapter folder whose base cannot be named or loaded."""


def is_adapter_folder(folder: Path) -> bool:
    """A peft adapter export (its ``adapter_config.json``) rather than a whole checkpoint."""
    return (Path(folder) / ADAPTER_CONFIG).is_file() and not (Path(folder) / "config.json").is_file()


def adapter_base(folder: Path) -> str:
    """The base the adapter was trained on, as the training run recorded it (``paraforge_training.json``'s
    ``base_model``), else peft's own record of it."""
    folder = Path(folder)
    for name, key in ((TRAINING_JSON, "base_model"), (ADAPTER_CONFIG, "base_model_name_or_path")):
        try:
            value = json.loads((folder / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if value:
            return str(value)
    raise AdapterFolderError(f"adapter folder {str(folder)!r} does not name its base model")
