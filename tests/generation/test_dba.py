"""DBA positive constraints + word-level negatives on random-weight models: constraints hold whatever the weights."""

from __future__ import annotations

import random

import pytest
import torch

from generation.decoding import decode, from_objects, normalise_constraints, violations

from .conftest import WORDS, tiny_config_kwargs

ATTRACT = ["▁often", "▁of", "ften", "o", "f", "t", "e", "n", "▁a", "▁b", "a", "b", ".", ",", "▁today", "▁to", "day"]


def biased_model(loaded, seed, strength=3.0):
    """A fresh random model on the same tokenizer whose output favours the pieces of the test words."""
    from transformers import MarianConfig, MarianMTModel

    tok = loaded.tokenizer
    torch.manual_seed(seed)
    cfg = MarianConfig(**{**tiny_config_kwargs(loaded.vocab.size, tok.pad_token_id), "init_std": 0.3})
    model = MarianMTModel(cfg)
    ids = [i for i in tok.convert_tokens_to_ids(ATTRACT) if i != tok.unk_token_id]
    bias = torch.zeros(1, loaded.vocab.size)
    bias[0, ids] = strength * torch.rand(len(ids), generator=torch.Generator().manual_seed(seed)) + 1.0
    model.final_logits_bias.copy_(bias)
    return from_objects(model, tok, "cpu")


def random_constraints(rnd):
    pool = ["often", "a", "b", "today", "of", "ten", "the", "cat"]

    def pick():
        return [rnd.choice(pool) for _ in range(rnd.choice([1, 1, 2]))]

    c = {
        "positive": [pick() for _ in range(rnd.randint(0, 2))],
        "negative": [pick() for _ in range(rnd.randint(0, 3))],
        "bos_avoid": [pick()] if rnd.random() < 0.3 else [],
        "name": "ignored",
    }
    return c


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_models_satisfy_constraints(tiny_marian, seed):
    m = biased_model(tiny_marian, seed)
    rnd = random.Random(seed)
    sources = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 8))) for _ in range(10)]
    cons = [random_constraints(rnd) for _ in sources]
    res = decode(m, sources, cons, beam=rnd.choice([3, 5]), nbest=2, max_length=24, batch_size=4)
    n_out = 0
    for r, c in zip(res, cons):
        assert r.safety_net_dropped == 0, r
        if r.unsatisfiable:
            assert r.reason and not r.outputs
            continue
        for o in r.outputs:
            n_out += 1
            assert violations(o["text"], normalise_constraints(c)) == [], (o["text"], c)
            assert o["satisfied"] is True
    assert n_out >= 5


def test_negatives_bite(tiny_marian):
    """Without the ban the biased model writes the banned words; with it never (mechanism, not the net)."""
    m = biased_model(tiny_marian, 7, strength=6.0)
    sources = ["how often", "the cat", "a b", "today", "earth wind fire"]
    free = decode(m, sources, None, beam=4, nbest=4, max_length=20)
    words = {w for r in free for o in r.outputs for w in __import__("re").findall(r"\w+", o["text"])}
    banned = sorted(words)[:6]
    c = {"negative": [[w] for w in banned], "positive": [], "bos_avoid": []}
    res = decode(m, sources, [c] * len(sources), beam=4, nbest=4, max_length=20)
    for r in res:
        assert r.safety_net_dropped == 0 and not r.unsatisfiable
        for o in r.outputs:
            assert violations(o["text"], normalise_constraints(c)) == []


def test_positive_phrase_and_eos_only_when_met(tiny_marian):
    m = biased_model(tiny_marian, 3)
    c = {"positive": [["the", "cat"], ["today"]], "negative": [["often"]], "bos_avoid": [["a"]]}
    res = decode(m, ["earth wind fire", "a a b"], [c, c], beam=5, nbest=3, max_length=30)
    for r in res:
        assert not r.unsatisfiable and r.safety_net_dropped == 0
        for o in r.outputs:
            assert violations(o["text"], normalise_constraints(c)) == []


def test_positive_whole_word_not_inside_longer_word(tiny_marian):
    """A required ``to`` is only met as the word ``to``, never by the first piece of ``today``."""
    m = biased_model(tiny_marian, 4, strength=5.0)
    c = {"positive": [["to"]], "negative": [], "bos_avoid": []}
    res = decode(m, ["today today", "to day"], [c, c], beam=4, nbest=4, max_length=20)
    for r in res:
        assert r.safety_net_dropped == 0
        for o in r.outputs:
            assert "to" in __import__("re").findall(r"\w+", o["text"])


def test_unsatisfiable_reported(tiny_marian):
    m = tiny_marian
    res = decode(
        m,
        ["a b", "a b", "a b"],
        [
            {"positive": [["often"]], "negative": [["often"]]},  # required and banned
            {"positive": [["a", "b", "a", "b", "a", "b", "today", "often"]]},  # cannot fit in max_length
            {"positive": [["zzzqqq"]]},  # the vocab cannot spell it as a word
        ],
        beam=3,
        nbest=1,
        max_length=6,
    )
    assert [r.unsatisfiable for r in res] == [True, True, True]
    assert all(r.reason and r.outputs == [] for r in res)


@pytest.mark.parametrize("V", [8000, 300, 70, 64, 5])
def test_row_blocks_are_argmax_and_topk(V):
    """The CPU's block-maxima argmax / group top-k return exactly what torch's return: ties (first maximum),
    -inf rows, a short last block; a top-k whose answer depends on topk's order among ties is refused."""
    from generation.decoding.row_blocks import RowBlocks

    g = torch.Generator().manual_seed(V)
    blk = RowBlocks(V, torch.device("cpu"))
    x = torch.randn(24, V, generator=g).round(decimals=1)  # many ties
    x[3] = float("-inf")
    x[4, : V // 2] = float("-inf")
    x[5, -1] = 9.0  # the maximum in the last block
    x[6, 0] = x[6, -1] = 9.0  # first of two maxima
    assert torch.equal(blk.argmax(x), x.argmax(1))
    assert torch.equal(blk.argmax(x[7:9]), x[7:9].argmax(1))
    K = 3
    y = torch.randn(8 * K, V, generator=g)  # no ties
    add = torch.randn(8, K, generator=g) * 10
    ref = torch.topk((y + add.view(-1, 1)).view(8, -1), 2 * K, dim=1)
    got = blk.group_topk(y, blk.maxima(y), add, 2 * K)
    if got is None:  # only too few blocks may refuse untied values
        assert K * blk.nbt < 2 * K + 1
    else:
        assert torch.equal(got[0], ref.values) and torch.equal(got[1], ref.indices)
    y[:K] = 0.0  # a whole group of ties
    assert blk.group_topk(y, blk.maxima(y), add, 2 * K) is None


@pytest.mark.parametrize("beam", [1, 3, 5])
def test_cpu_block_path_equals_generic_path(tiny_marian, monkeypatch, beam):
    """The CPU's block-maxima candidates (``RowBlocks``) choose and score exactly what the generic [H, V]
    passes (a GPU's path) do: same n-best tokens and scores, bit for bit."""
    from generation.decoding import dba

    rnd = random.Random(beam)
    sources = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 9))) for _ in range(6)]
    cons = [
        None,
        {"positive": [["the"], ["cat"]]},
        {"negative": [["a"], ["of"]]},
        {"positive": [["today"]], "negative": [["often"]], "bos_avoid": [["a"]]},
        {"positive": [["a", "b"]]},
        {"bos_avoid": [["the"]]},
    ]

    def run():
        res = decode(tiny_marian, sources, cons, beam=beam, nbest=beam, max_length=16, batch_size=4)
        return [(r.unsatisfiable, [(o["tokens"], o["score"]) for o in r.outputs]) for r in res]

    monkeypatch.setattr(dba.RowBlocks, "TOPK_MIN", 0)  # (the tiny model's scores are below it)
    fast = run()
    monkeypatch.setattr(dba, "RowBlocks", lambda V, dev: None)
    assert run() == fast
