"""Load a Hugging Face seq2seq checkpoint from a local folder, or from a hub id through the Hugging Face cache
(``generation.model_source.model_folder``: the one rule for ``--model`` values)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..decode_options import DEFAULT_CUDA_DTYPE, DTYPES, dtype_device_error
from ..model_source import (
    ModelFolderError,
    ModelKindError,
    adapter_base_folder,
    folder_is_decoder_only,
    ignore_sacremoses_warning,
    is_adapter_folder,
    is_decoder_only,
    model_folder,
)
from ..prompts import PromptTemplate, PromptTemplateError, default_for, no_chat_template, recorded_template, resolve
from .adapters import merged_adapter_model, tokenizer_folder
from .vocab import VocabInfo, build_vocab_info


@dataclass
class LoadedModel:
    model: object
    tokenizer: object
    device: torch.device
    vocab: VocabInfo
    path: str
    # a decoder-only model's prompt template (None: an encoder-decoder model, which reads the source itself)
    prompt: PromptTemplate | None = None

    @property
    def causal(self) -> bool:
        """A decoder-only model: it continues a prompt (``generation/prompts.py``) instead of encoding the source."""
        return self.prompt is not None

    @property
    def eos_id(self) -> int:
        return self.vocab.eos_id

    @property
    def dtype(self) -> str:
        """The model's floating-point type by name ("float32", "float16", "bfloat16")."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")


def causal_eos_ids(model) -> tuple[int, ...]:
    """A decoder-only model's EOS tokens, as ``generate`` reads them (a chat model's generation config lists
    its end-of-turn tokens beside EOS: Llama 3's ``<|eot_id|>``, Qwen's ``<|im_end|>``)."""
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    if eos is None:
        raise ModelFolderError("the model names no EOS token (generation_config.eos_token_id)")
    return tuple(int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]))


def newline_ids(vocab: VocabInfo) -> tuple[int, ...]:
    """Ids whose text holds a line break: they end an output under a template that stops at one."""
    return tuple(i for i, s in enumerate(vocab.surfaces) if "\n" in s)


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


def from_objects(
    model,
    tokenizer,
    device=None,
    path: str = "<memory>",
    dtype: str | None = None,
    prompt_template: str | PromptTemplate | dict | None = None,
) -> LoadedModel:
    """``model`` on ``device`` (default: CUDA where there is one) in ``dtype`` (see :func:`model_dtype`).
    A decoder-only model gets ``prompt_template`` (``prompts.resolve``; None: ``prompts.default_for``), its
    tokenizer pads on the left (prompts of different lengths end where the continuation starts)."""
    try:
        causal = is_decoder_only(model.config, [type(model).__name__])
    except ModelKindError as exc:
        raise ModelKindError(f"{path}: {exc}") from None
    if not causal and prompt_template is not None:
        raise PromptTemplateError("a prompt template is for decoder-only models; this one is an encoder-decoder")
    prompt = (resolve(prompt_template) or default_for(tokenizer)) if causal else None
    if prompt is not None and prompt.chat and not getattr(tokenizer, "chat_template", None):
        raise no_chat_template(prompt.name)
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
    if not causal:
        vocab = build_vocab_info(tokenizer, size, _eos_id(model))
    else:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:  # (what generate pads with too: its pad token falls back to EOS)
            tokenizer.pad_token = tokenizer.eos_token
        eos = causal_eos_ids(model)
        vocab = build_vocab_info(tokenizer, size, eos[0], eos[1:])
        if prompt.stop_at_newline:
            vocab = build_vocab_info(tokenizer, size, eos[0], eos[1:] + newline_ids(vocab))
    return LoadedModel(model=model, tokenizer=tokenizer, device=device, vocab=vocab, path=path, prompt=prompt)


def load_model(
    path, device=None, dtype: str | None = None, prompt_template: str | PromptTemplate | dict | None = None
) -> LoadedModel:
    """``path``: a local checkpoint folder or a hub id (``org/name[@revision]``, see generation/model_source.py).
    The files are then read from that folder only (``local_files_only``: nothing else is fetched). ``device``
    and ``dtype``: as :func:`from_objects` takes them (a dtype the device refuses fails before loading). An
    encoder-decoder checkpoint loads as a seq2seq model, any other as a causal LM (decoder-only) with
    ``prompt_template`` (see :func:`from_objects`; None: the one the folder's ``paraforge_training.json``
    records, ``prompts.recorded_template``, else the model's default)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model_dtype(device.type, dtype)
    p = model_folder(path)
    if not p.is_dir():
        raise ModelFolderError(f"model folder {str(path)!r} is not a folder")
    adapter = is_adapter_folder(p)  # train_rewriter --lora-rank: merged into its base (decoding/adapters.py)
    weights = adapter_base_folder(p, path) if adapter else p
    seq2seq = not folder_is_decoder_only(weights, str(path))  # (the one rule; an adapter: its base's kind)
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    ignore_sacremoses_warning()
    kind = "seq2seq model" if seq2seq else "causal language model (decoder-only)"
    try:
        auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
        model = merged_adapter_model(p, weights) if adapter else auto.from_pretrained(str(p), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_folder(p, weights)), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - one clear message for any unloadable folder
        raise ModelFolderError(f"cannot load a {kind} from {str(path)!r}: {type(exc).__name__}: {exc}") from None
    if not seq2seq and prompt_template is None:
        prompt_template = recorded_template(p)  # a fine-tuned rewriter: the prompt it was trained on
    return from_objects(model, tokenizer, device, str(p), dtype, prompt_template)
