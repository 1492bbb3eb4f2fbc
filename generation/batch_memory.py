"""The memory one sentence takes while beam search decodes it: the decoder's GPU batch rule
(``decoding.batching``) and the generation jobs' memory budget (``generation_job.budget``) read it here.

No torch and no Django: a command's help and argument errors import the jobs' parameters, and with them this
(``tests/test_command_imports.py``)."""

from __future__ import annotations

from typing import Any

CPU_BATCH = 32  # the decoder's batch on the CPU when none is given (the CPU benches in bench/results/ measure it)
LOGIT_COPIES = 8  # float32 [beam, vocabulary] arrays of one step: logits, log-softmax, processors, the sums


def sentence_bytes(*, layers: int, width: int, vocab: int, beam: int, max_length: int, value_bytes: int) -> int:
    """Upper estimate of one sentence's device memory while it decodes (the module's docstring)."""
    cache = 2 * layers * width * value_bytes * beam * 3 * max_length
    step = LOGIT_COPIES * beam * vocab * 4
    return cache + step


def config_sizes(cfg: Any) -> tuple[int, int]:
    """(decoder layers, key/value width) of a model's config (a ``PretrainedConfig`` or config.json's values as
    attributes): seq2seq (Marian, BART, T5, ...) or decoder-only, where grouped-query attention keeps
    ``num_key_value_heads`` x head size per token and layer (a quarter of the hidden size in Llama 3 8B: counting
    the hidden size would take a batch 4x too small)."""
    names = ("decoder_layers", "num_decoder_layers", "num_layers", "num_hidden_layers")
    layers = next((getattr(cfg, k) for k in names if getattr(cfg, k, None)), 1)
    heads, d_kv = getattr(cfg, "num_heads", None), getattr(cfg, "d_kv", None)
    kv_heads = getattr(cfg, "num_key_value_heads", None)
    if heads and d_kv:
        width = heads * d_kv
    elif kv_heads:
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        width = kv_heads * head_dim
    else:
        width = getattr(cfg, "d_model", None) or getattr(cfg, "hidden_size", None) or 1
    return int(layers), int(width)
