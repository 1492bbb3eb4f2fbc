"""Tiny decoder-only models for the tests (random weights, a byte-level BPE tokenizer trained here; no
network): Llama-, Qwen2- and GPT-2-shaped."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from .conftest import corpus

# paraphrase pairs the rewriter tests train on (train_rewriter --pairs)
PAIRS = [
    ("the cat sat on the mat", "a cat was on a mat"),
    ("we walk in the sun", "they walked in the sun"),
    ("how often do earthquakes occur", "how often is it that earthquakes occur"),
    ("the big dog ran home", "a big dog runs home"),
]


def write_pairs(path: Path, pairs=PAIRS, copies: int = 2) -> Path:
    """A ``--pairs`` TSV of ``pairs`` repeated ``copies`` times."""
    path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs * copies), encoding="utf-8")
    return path


def train_rewriter_cli(*args) -> dict:
    """``manage.py train_rewriter ARGS``; its last stdout line, the JSON summary."""
    stdout = StringIO()
    call_command("train_rewriter", *args, stdout=stdout, stderr=StringIO())
    return json.loads(stdout.getvalue().strip().splitlines()[-1])


# a ChatML-style template (Qwen's layout): what paraphrase-chat wraps the instruction in
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer(chat: bool = True):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        corpus(),
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"],
        show_progress=False,
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_causal(kind: str, tok, seed: int = 0, std: float = 0.02):
    """A tiny random model of the family: Llama (grouped-query attention, 4 heads over 2 key/value heads,
    rotary), Qwen2 (GQA 4/1, rotary, biased q/k/v), GPT-2 (learned positions, tied output layer)."""
    import torch
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(seed)
    common = dict(
        vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
        initializer_range=std,
    )  # fmt: skip
    if kind == "llama":
        cfg = LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, **common,
        )  # fmt: skip
        return LlamaForCausalLM(cfg).eval()
    if kind == "qwen2":
        cfg = Qwen2Config(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
            max_position_embeddings=256, **common,
        )  # fmt: skip
        return Qwen2ForCausalLM(cfg).eval()
    if kind == "gpt2":
        return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=256, **common)).eval()
    raise ValueError(kind)


def save_chat_model(folder: Path, kind: str = "qwen2") -> Path:
    """A chat model's checkpoint folder: its generation config ends a turn at ``<|im_end|>`` or EOS."""
    tok = tiny_tokenizer()
    model = tiny_causal(kind, tok)
    model.generation_config.eos_token_id = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
