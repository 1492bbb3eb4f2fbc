"""The word-level ban mechanism against a brute-force checker over random token sequences."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest
import torch

from generation.decoding import vocab
from generation.decoding.banned import NegativeState, build_negative_tables


def _completed_words(text: str) -> list[str]:
    ws = re.findall(r"\w+", text)
    if ws and re.search(r"\w$", text):
        ws = ws[:-1]
    return ws


def _has(words, phrase, anchored):
    if anchored:
        return words[: len(phrase)] == phrase
    n = len(phrase)
    return any(words[i : i + n] == phrase for i in range(len(words) - n + 1))


def _alphabet(info):
    chars = set("aboften.,▁ ")
    ids = [i for i, s in enumerate(info.surfaces) if s and set(s) <= chars]
    return ids + random.Random(1).sample(range(info.size), 20)


@pytest.mark.parametrize(
    "phrases",
    [
        [(["a", "a", "b"], False)],
        [(["often"], False), (["a"], True)],
        [(["a", "b"], False), (["b", "a", "a"], False), (["of", "ten"], True)],
        [(["b"], False), (["a", "a"], True)],
    ],
)
@pytest.mark.parametrize("sync_free", [False, True], ids=["cpu-writes", "gpu-writes"])
def test_mask_equals_brute_force(tiny_marian, phrases, sync_free):
    info = tiny_marian.vocab
    eos = info.eos_id
    tables = build_negative_tables(info, [phrases], "cpu")
    alpha = _alphabet(info) + [eos]
    rnd = random.Random(0)
    for _ in range(60):
        H = 1
        st = NegativeState(tables, torch.zeros(H, dtype=torch.long), info.boundary, eos)
        st.set_token_info(info, "cpu")
        text = ""
        for _step in range(12):
            mask = st.ban_mask(sync_free=sync_free)[0]
            scores = torch.zeros(1, info.size)
            st.apply_bans(scores, float("-inf"), sync_free=sync_free)  # as the decoder applies them
            assert torch.equal(torch.isinf(scores[0]), mask)
            for t in alpha:
                if t == eos:
                    expect = any(_has(re.findall(r"\w+", text), p, a) for p, a in phrases)
                elif info.inner[t]:
                    continue  # conservatively banned when they hold a banned word; not exact by design
                else:
                    expect = any(_has(_completed_words(text + info.surfaces[t]), p, a) for p, a in phrases)
                assert bool(mask[t]) == expect, (text, info.surfaces[t], phrases)
            allowed = [t for t in alpha if t != eos and not mask[t]]
            t = rnd.choice(allowed)
            node, g = st.advance(torch.tensor([0]), torch.tensor([t]), torch.tensor([0]))
            st.select(None, node, g)
            text += info.surfaces[t]
        assert not any(_has(_completed_words(text), p, a) for p, a in phrases)


def test_overlapping_phrase_blocked(tiny_marian):
    """``a a b`` is blocked inside ``a a a b`` (KMP over words)."""
    info = tiny_marian.vocab
    tables = build_negative_tables(info, [[(["a", "a", "b"], False)]], "cpu")
    st = NegativeState(tables, torch.zeros(1, dtype=torch.long), info.boundary, info.eos_id)
    st.set_token_info(info, "cpu")
    ids = tiny_marian.tokenizer.convert_tokens_to_ids(["▁a", "▁a", "▁a", "▁b"])
    for t in ids[:3]:
        node, g = st.advance(torch.tensor([0]), torch.tensor([t]), torch.tensor([0]))
        st.select(None, node, g)
    node, g = st.advance(torch.tensor([0]), torch.tensor([ids[3]]), torch.tensor([0]))
    st.select(None, node, g)
    mask = st.ban_mask()[0]
    dot = tiny_marian.tokenizer.convert_tokens_to_ids(".")
    assert mask[info.eos_id] and mask[dot] and mask[ids[0]]
    assert not mask[tiny_marian.tokenizer.convert_tokens_to_ids("b")]  # "bb" is another word


def test_tables_same_cold_and_remembered(tiny_marian, monkeypatch):
    """A batch's tables are the same whether its words' pieces were looked up afresh, remembered from the batch
    before, or remembered by a vocabulary whose bounded memory filled up and started afresh; that memory never
    holds more words than its bound."""
    batch = [
        [(["often"], False), (["tothe"], False), (["a", "b"], False), (["of", "ten"], True), (["é"], False)],
        [(["the"], False), (["a"], False), (["ab"], False)],
        [],
    ]
    cold = build_negative_tables(dataclasses.replace(tiny_marian.vocab), batch, "cpu")
    info = dataclasses.replace(tiny_marian.vocab)
    build_negative_tables(info, batch[1:], "cpu")
    remembered = build_negative_tables(info, batch, "cpu")
    monkeypatch.setattr(vocab, "PIECES_REMEMBERED", 3)
    small = dataclasses.replace(tiny_marian.vocab)
    bounded = [build_negative_tables(small, batch, "cpu") for _ in range(2)]
    assert 0 < len(small._pieces_by_word) <= 3  # (the cache itself: its bound is what is tested)
    for tables in (remembered, *bounded):
        for name, value in vars(cold).items():
            other = getattr(tables, name)
            assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other, name
