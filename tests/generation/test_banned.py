"""The word-level ban mechanism against a brute-force checker over random token sequences."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest
import torch

from generation import english
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


class _RunOns:
    """The run-on rule as the search applies it, stated on strings: from a banned single word on, the open word
    may only follow a word of the English list that begins with it (the banned word as written, then the list's
    letters), and end only where that word is English."""

    def __init__(self, phrases):
        self.stems = [p[0] for p, a in phrases if len(p) == 1 and not a]
        words: dict[str, bool] = {}
        for b in self.stems:
            for e in english.english_words():
                if e.startswith(b.lower()) and len(e) > len(b):
                    words[b + e[len(b) :]] = words.get(b + e[len(b) :], False) or english.is_english(e)
        self.ends = {w for w, ok in words.items() if ok}
        self.on = set(self.stems) | {
            w[:k] for w in words for b in self.stems if w.startswith(b) for k in range(len(b), len(w) + 1)
        }

    def forbids(self, open_word: str, surface: str, ends: bool) -> bool:
        """The token (``ends``: it is the end of the output) continues a run-on and leaves the English words."""
        if open_word not in self.on:
            return False
        lead = re.match(r"\w*", surface).group()
        word = open_word + lead
        if ends or len(lead) < len(surface):  # the word ends here
            return word not in self.ends
        return word not in self.on

    def untracked(self, open_word: str, info, token: int) -> bool:
        """A word the token runs on from a banned word in a way the search does not follow (its lead starts
        before the banned word ends and runs past it, or its tail or an inner word runs it on): the final
        check's."""
        lead = re.match(r"\w*", info.surfaces[token]).group()
        crosses = [open_word + lead] if lead else []
        return any(
            w.startswith(b) and len(w) > len(b)
            for b in self.stems
            for w in [*(c for c in crosses if len(open_word) < len(b)), info.tail[token], *info.inner[token]]
        )


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
    run_ons = _RunOns(phrases)
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
            open_word = re.search(r"\w*$", text).group()
            for t in alpha:
                if t == eos:
                    expect = any(_has(re.findall(r"\w+", text), p, a) for p, a in phrases)
                elif info.inner[t]:
                    continue  # conservatively banned when they hold a banned word; not exact by design
                else:
                    expect = any(_has(_completed_words(text + info.surfaces[t]), p, a) for p, a in phrases)
                expect |= run_ons.forbids(open_word, info.surfaces[t], t == eos)
                assert bool(mask[t]) == expect, (text, info.surfaces[t], phrases)
            allowed = [t for t in alpha if t != eos and not mask[t] and not run_ons.untracked(open_word, info, t)]
            t = rnd.choice(allowed)
            node, g = st.advance(torch.tensor([0]), torch.tensor([t]), torch.tensor([0]))
            st.select(None, node, g)
            text += info.surfaces[t]
        assert not any(_has(_completed_words(text), p, a) for p, a in phrases)
        assert not [w for w in _completed_words(text) for b in run_ons.stems if english.runs_on(w, b)], text


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
