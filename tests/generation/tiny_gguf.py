"""A tiny llama.cpp GGUF file written by the ``gguf`` package (random float32 weights, a byte-level BPE
vocabulary of the 256 byte symbols and a few merges): what a researcher brings from llama.cpp, in 150 kB."""

from __future__ import annotations

from pathlib import Path

MERGES = ["Ġ t", "h e", "Ġt he", "Ġ a", "i n", "Ġ c", "a t", "Ġc at", "Ġ d", "o g", "Ġd og"]


def write_tiny_gguf(path: Path, seed: int = 0, license: str = "apache-2.0", tokenizer: str = "gpt2") -> Path:
    """A Llama-architecture GGUF (2 layers, hidden size 32, grouped-query attention 4/2) at ``path``."""
    import gguf
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    tokens = list(bytes_to_unicode().values()) + [m.replace(" ", "") for m in MERGES] + ["<|endoftext|>"]
    vocab, hidden, ffn, layers, heads, kv = len(tokens), 32, 64, 2, 4, 2
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama-test")
    w.add_license(license)
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model(tokenizer)
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 1) + [3])  # the last one a control token
    w.add_token_merges(MERGES)
    w.add_eos_token_id(vocab - 1)
    w.add_bos_token_id(vocab - 1)

    def weight(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))

    weight("token_embd.weight", vocab, hidden)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        weight(f"blk.{i}.attn_q.weight", hidden, hidden)
        weight(f"blk.{i}.attn_k.weight", kv * head_dim, hidden)
        weight(f"blk.{i}.attn_v.weight", kv * head_dim, hidden)
        weight(f"blk.{i}.attn_output.weight", hidden, hidden)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        weight(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        weight(f"blk.{i}.ffn_up.weight", ffn, hidden)
        weight(f"blk.{i}.ffn_down.weight", hidden, ffn)
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    weight("output.weight", vocab, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
