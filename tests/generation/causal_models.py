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


# for the diverse mode's tests (test_diverse_causal.py): a model that writes a few words and ends its rows
WORDS = ("the", "cat", "sat", "on", "mat", "dog")
# the hidden width's share a unit feature takes after the final RMS norm (its value there: about sqrt(width))
FEATURE_SCALE = 32**0.5


def ending_causal(kind: str, tok, words=WORDS, word_logit: float = 5.0, eos_logit: float = 4.8, seed: int = 0):
    """A tiny random ``kind`` model (llama, qwen2) whose logits favour ``words`` (each one token with its
    leading space) by about ``word_logit`` and EOS by ``eos_logit`` over every other token: hidden dimension 0
    is 1 in every token's embedding (the layers' random updates are small beside it) and only those tokens'
    output rows read it. Each step then samples among those words (the context still moves the other logits
    a little), and a row ends after about ten tokens."""
    import torch

    model = tiny_causal(kind, tok, seed)
    ids = [tok(" " + w)["input_ids"] for w in words]
    assert all(len(i) == 1 for i in ids), "each word one token of the tiny tokenizer"
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 1.0
        head = model.lm_head.weight
        head[:, 0] = 0.0
        head[[i[0] for i in ids], 0] = word_logit / FEATURE_SCALE
        head[tok.eos_token_id, 0] = eos_logit / FEATURE_SCALE
    return model


def save_ending_llama(folder: Path) -> Path:
    """:func:`ending_causal`'s Llama as a checkpoint folder (a base model: no chat template)."""
    tok = tiny_tokenizer(chat=False)
    ending_causal("llama", tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def constant_causal(scores: dict[str, float], rest: float = -10.0):
    """A tiny Llama (and its tokenizer) whose logits are the same at every step, whatever came before: ``scores``
    by token (``"eos"`` for the end token), ``rest`` for every other one. What the search then finds follows
    from the scores alone."""
    import torch

    tok = tiny_tokenizer()
    model = tiny_causal("llama", tok)
    head = torch.nn.Linear(model.config.hidden_size, len(tok), bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(rest)
        for token, score in scores.items():
            head.bias[tok.eos_token_id if token == "eos" else tok.convert_tokens_to_ids(token)] = score
    model.lm_head = head
    return model, tok
