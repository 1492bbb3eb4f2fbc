"""Load a Hugging Face seq2seq checkpoint from a local folder, or from a hub id through the Hugging Face cache
(``generation.model_source.model_folder``: the one rule for ``--model`` values)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..decode_options import DEFAULT_CUDA_DTYPE, DTYPES, dtype_device_error
from ..model_source import ModelFolderError, model_folder
from .vocab import VocabInfo, build_vocab_info


@dataclass
class LoadedModel:
    model: object
    tokenizer: object
    device: torch.device
    vocab: VocabInfo
    path: str

    @property
    def eos_id(self) -> int:
        return self.vocab.eos_id

    @property
    def dtype(self) -> str:
        """The model's floating-point type by name ("float32", "float16", "bfloat16")."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")


def _eos_id(model) -> int:
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    if isinstance(eos, (list, tuple)):
        if len(eos) != 1:
            raise ModelFolderError(f"models with several EOS tokens are not supported ({eos})")
        eos = eos[0]
    return int(eos)


_HEAP_KEPT = False


def keep_freed_memory_in_heap() -> bool:
    """On Linux with glibc, have ``malloc`` keep freed blocks of any size for reuse (``M_MMAP_THRESHOLD`` and
    ``M_TRIM_THRESHOLD`` at 1 GiB). Why: a beam search allocates and frees the same large tensors every step
    ([hypotheses, vocabulary] logits: 37 MiB with 160 hypotheses and 58k tokens; the growing key/value cache).
    By default glibc maps each block over 32 MiB (less once its threshold adapts) freshly and unmaps it when it
    is freed, so every step pays page faults on all of it again; on this project's VMs that was most of a
    CPU decoding step's time (README, *Decoding speed*). The cost: memory freed after a peak stays with the
    process. Once per process; False where there is no glibc ``mallopt``."""
    global _HEAP_KEPT
    if _HEAP_KEPT:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        _HEAP_KEPT = bool(libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        _HEAP_KEPT = False
    return _HEAP_KEPT


def model_dtype(device_type: str, dtype: str | None) -> torch.dtype:
    """The torch dtype a model is put in on ``device_type``: on a GPU ``dtype``, float16 when it is None
    (``DEFAULT_CUDA_DTYPE``: what the decoder has always run there); on the CPU float32 (a checkpoint saved in
    float16 included), and half precision asked for there is a ``DecodeOptionsError``
    (``decode_options.dtype_device_error``, the one rule)."""
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    problem = dtype_device_error(dtype, device_type)
    if problem:
        raise problem
    return getattr(torch, dtype or (DEFAULT_CUDA_DTYPE if device_type == "cuda" else "float32"))


def from_objects(model, tokenizer, device=None, path: str = "<memory>", dtype: str | None = None) -> LoadedModel:
    """``model`` on ``device`` (default: CUDA where there is one) in ``dtype`` (see :func:`model_dtype`)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    to_dtype = model_dtype(device.type, dtype)
    if device.type == "cpu":
        keep_freed_memory_in_heap()
    model = model.to(device=device, dtype=to_dtype)
    model.eval()
    size = (
        model.get_output_embeddings().weight.shape[0]
        if model.get_output_embeddings() is not None
        else model.config.vocab_size
    )
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=device,
        vocab=build_vocab_info(tokenizer, size, _eos_id(model)),
        path=path,
    )


def load_model(path, device=None, dtype: str | None = None) -> LoadedModel:
    """``path``: a local checkpoint folder or a hub id (``org/name[@revision]``, see generation/model_source.py).
    The files are then read from that folder only (``local_files_only``: nothing else is fetched). ``device``
    and ``dtype``: as :func:`from_objects` takes them (a dtype the device refuses fails before loading)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model_dtype(device.type, dtype)
    p = model_folder(path)
    if not p.is_dir():
        raise ModelFolderError(f"model folder {str(path)!r} is not a folder")
    if not (p / "config.json").is_file():
        raise ModelFolderError(f"model folder {str(path)!r} has no config.json (not a Hugging Face checkpoint)")
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(str(p), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - one clear message for any unloadable folder
        raise ModelFolderError(f"cannot load a seq2seq model from {str(path)!r}: {type(exc).__name__}: {exc}") from None
    if not getattr(model.config, "is_encoder_decoder", False):
        raise ModelFolderError(f"{str(path)!r} is not an encoder-decoder model")
    return from_objects(model, tokenizer, device, str(p), dtype)
