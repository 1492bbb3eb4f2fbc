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

import hashlib
import json
import os
import re
import threading
import warnings
from collections.abc import Mapping, Sequence
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
# where a model named by a relative path lies when the working directory does not hold it: the project root,
# where workers, the web server and manage.py run (settings.BASE_DIR)
PROJECT_DIR = Path(__file__).resolve().parents[1]
MODEL_HELP = (
    "a local Hugging Face seq2seq or decoder-only (causal LM) checkpoint folder, a llama.cpp GGUF file (or a "
    "folder holding one; converted once into PARAFORGE_GGUF_CACHE), or a hub model id "
    "(ORG/NAME[@REVISION], e.g. Helsinki-NLP/opus-mt-cs-en) found in or fetched into the Hugging Face cache "
    "(HF_HUB_CACHE / HF_HOME; HF_HUB_OFFLINE=1: the cache only)"
)


class ModelFolderError(RuntimeError):
    """The model folder is missing or holds no loadable checkpoint, or a hub id cannot be resolved."""


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
    value: str | os.PathLike, base_dir: str | os.PathLike | None = PROJECT_DIR, *, cache_only: bool = False
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


def adapter_base_folder(folder: Path, given: str | os.PathLike | None = None) -> Path:
    """The folder of the base an adapter folder was trained on (:func:`adapter_base`, found as every ``--model``
    is); ModelFolderError naming the adapter (``given``: as the person wrote it) when it cannot be found."""
    try:
        return model_folder(adapter_base(folder))
    except (AdapterFolderError, ModelFolderError) as exc:
        raise ModelFolderError(f"adapter folder {os.fspath(given or folder)!r}: its base model: {exc}") from None


# --- what kind of model a checkpoint is, and which weights it holds

# config.json "architectures" of a decoder-only model (LlamaForCausalLM, GPT2LMHeadModel, Gemma3ForCausalLM)
CAUSAL_ARCHITECTURES = ("ForCausalLM", "LMHeadModel")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")


class ModelKindError(ModelFolderError):
    """A checkpoint that is neither an encoder-decoder nor a decoder-only language model (an encoder, a
    classifier): nothing Paraforge can decode or fine-tune."""


def is_decoder_only(config: Mapping | object, architectures: Sequence[str] | None = None) -> bool:
    """The one rule for "is this model decoder-only?": an encoder-decoder config (``is_encoder_decoder``) is
    not; one whose architectures (``architectures``, else the config's own: ``config.json``'s list, or the
    class of a model built in memory) end in a causal LM's suffix is; anything else is neither
    (:class:`ModelKindError`), rather than guessed, because a BERT-like encoder read as a causal LM loads and
    then decodes nonsense. ``config``: a config.json's dict or a transformers config."""
    read = config.get if isinstance(config, Mapping) else lambda key: getattr(config, key, None)
    if read("is_encoder_decoder"):
        return False
    names = list(architectures or read("architectures") or [])
    if any(str(name).endswith(CAUSAL_ARCHITECTURES) for name in names):
        return True
    raise ModelKindError("neither an encoder-decoder (seq2seq) nor a decoder-only (causal LM) model")


def checkpoint_is_decoder_only(value: str | os.PathLike) -> bool:
    """Whether the checkpoint ``value`` names (:func:`model_folder`; an adapter folder: its base's kind, as it
    is decoded merged into it) is decoder-only, read from its config (transformers' ``AutoConfig``, as the
    loaders read it) without loading its weights.
    ModelFolderError (one line, naming ``value``) for one the decoder cannot load."""
    return folder_is_decoder_only(model_folder(value), os.fspath(value))


def folder_is_decoder_only(folder: Path, name: str) -> bool:
    """:func:`checkpoint_is_decoder_only` of a folder already found (``name``: as the person gave it, for the
    errors), so that a loader that has resolved it does not resolve it again."""
    if not folder.is_dir():
        raise ModelFolderError(f"model folder {name!r} is not a folder")
    if is_adapter_folder(folder):
        base = adapter_base_folder(folder, name)
        return folder_is_decoder_only(base, str(base))
    if not (folder / "config.json").is_file():
        raise ModelFolderError(f"model folder {name!r} has no config.json (not a Hugging Face checkpoint)")
    from transformers import AutoConfig  # (the loaders' own reading: a key config.json leaves out has its default)

    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelFolderError(f"model folder {name!r}: unreadable config.json ({_one_line(exc)})") from None
    try:
        return is_decoder_only(config)
    except ModelKindError as exc:
        raise ModelKindError(f"model folder {name!r} is {exc}") from None


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(value: str | os.PathLike) -> str:
    """SHA-256 of the checkpoint's weights file (of its weights files' hashes when there are several); of an
    adapter folder (``train_rewriter --lora-rank``), its adapter's and its base's together: either changes the
    model. Jobs store it when planned and compare it before each chunk (the weights must not change under a
    job). A file's hash is kept per process while its size and modification time stay the same."""
    name = os.fspath(value)
    folder = model_folder(value)
    if is_adapter_folder(folder):
        base = model_fingerprint(adapter_base_folder(folder, name))
        return hashlib.sha256(f"{_weights_fingerprint(name, folder)}:{base}".encode()).hexdigest()
    return _weights_fingerprint(name, folder)


def _weights_fingerprint(name: str, folder: Path) -> str:
    files = (
        sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))
        if folder.is_dir()
        else []
    )
    if not files:
        raise ModelFolderError(
            f"model folder {name!r} holds no weights file ({', '.join('*' + s for s in WEIGHT_SUFFIXES[:2])})"
        )
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    found = _FINGERPRINTS.get(key)
    if found is None:
        digests = []
        for f in files:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            digests.append((f.name, h.hexdigest()))
        found = (
            digests[0][1]
            if len(digests) == 1
            else hashlib.sha256("".join(f"{n}:{d}\n" for n, d in digests).encode()).hexdigest()
        )
        _FINGERPRINTS[key] = found
    return found
