"""GPU memory a decoder-only model needs to decode, per batch size: computed from the model's config, not
measured (issue 40; docs/how-to/bring-your-own-model.md prints its table).

    .venv/bin/python bench/causal_memory.py [--config config.json ...] [--beam 5] [--prompt 96] [--new 64]
        [--batches 1,8,32,128] [--dtype-bytes 2]

Without ``--config``: Llama 3.2 1B, Llama 3.2 3B and Llama 3.1 8B, from the values of their published
``config.json`` (written out below: nothing is downloaded). Per model:

* weights: the parameter count from the config (embeddings, the output layer unless tied, per layer the
  q/k/v/o projections with grouped-query attention's narrower k and v, the gated MLP, the norms) times the
  dtype's bytes (2: float16/bfloat16);
* key/value cache per token and hypothesis: 2 (keys and values) x layers x key/value heads x head size x
  bytes;
* a batch of B sentences decoded with K beams over a prompt of P tokens and N new ones keeps B x K x (P + N)
  tokens' keys and values, twice while the beams reorder (``Cache.reorder_cache`` copies each layer), plus
  ``batch_memory.LOGIT_COPIES`` float32 [B x K, vocabulary] arrays of a step (logits, log-softmax, the
  candidates' sums, ...) and the prompt pass's activations (B x P x hidden x 4 bytes x 8, a generous bound;
  its logits are one position's: ``logits_to_keep=1``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generation.batch_memory import LOGIT_COPIES

# the fields of the published config.json files that the sizes depend on
CONFIGS = {
    "Llama 3.2 1B": dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
    ),
    "Llama 3.2 3B": dict(
        hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, vocab_size=128256, tie_word_embeddings=True,
    ),
    "Llama 3.1 8B": dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=128256, tie_word_embeddings=False,
    ),
}  # fmt: skip
GIB = 2**30


def parameters(c: dict) -> int:
    h, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads = c["num_attention_heads"]
    kvh = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or h // heads
    attn = h * heads * hd + 2 * h * kvh * hd + heads * hd * h
    mlp = 3 * h * c["intermediate_size"]
    per_layer = attn + mlp + 2 * h
    return V * h * (1 if c.get("tie_word_embeddings") else 2) + L * per_layer + h


def kv_bytes_per_token(c: dict, value_bytes: int) -> int:
    heads = c["num_attention_heads"]
    kvh = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or c["hidden_size"] // heads
    return 2 * c["num_hidden_layers"] * kvh * hd * value_bytes


def batch_bytes(c: dict, batch: int, beam: int, prompt: int, new: int, value_bytes: int) -> int:
    """Everything but the weights for one batch (the module's docstring)."""
    kv = 2 * batch * beam * (prompt + new) * kv_bytes_per_token(c, value_bytes)
    logits = LOGIT_COPIES * batch * beam * c["vocab_size"] * 4
    prefill = batch * prompt * c["hidden_size"] * 4 * 8
    return kv + logits + prefill


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", help="a model's config.json (default: the three Llamas)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=96, help="prompt tokens (template + reference)")
    ap.add_argument("--new", type=int, default=64, help="new tokens (max_length - 1)")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--dtype-bytes", type=int, default=2)
    a = ap.parse_args(argv)
    configs = {Path(p).parent.name or p: json.loads(Path(p).read_text()) for p in a.config} if a.config else CONFIGS
    batches = [int(x) for x in a.batches.split(",")]
    print(
        f"computed from each config (not measured): beam {a.beam}, prompt {a.prompt} + {a.new} new tokens, "
        f"{a.dtype_bytes}-byte values"
    )
    head = " | ".join(f"batch {b}" for b in batches)
    print(f"| model | parameters | weights | KV cache per token | {head} |")
    print("|---" * (4 + len(batches)) + "|")
    for name, c in configs.items():
        n = parameters(c)
        w = n * a.dtype_bytes
        cells = " | ".join(
            f"{(w + batch_bytes(c, b, a.beam, a.prompt, a.new, a.dtype_bytes)) / GIB:.1f} GiB" for b in batches
        )
        kv = kv_bytes_per_token(c, a.dtype_bytes)
        print(f"| {name} | {n / 1e9:.2f} B | {w / GIB:.1f} GiB | {kv / 1024:.0f} KiB | {cells} |")


if __name__ == "__main__":
    main()
