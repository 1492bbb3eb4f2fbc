"""When a sentence's search ends (``decode(..., stop=)``): Hugging Face's rule over all K finished slots
("beam"), the same heuristic over the n-best returned ("nbest"), and "auto" (nbest for sentences with
positive constraints, beam for the others)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import torch

from generation.decoding import decode, load_model, normalise_constraints, violations

DEMO = Path(__file__).resolve().parents[2] / "generation" / "demo"


@pytest.fixture(scope="module")
def demo():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_model(DEMO / "model", device="cpu")
    torch.set_num_threads(before)


def _demo_sentences(n: int) -> list[str]:
    """Short sentences of the shipped demo corpus (the demo model's own domain)."""
    lines = (DEMO / "corpus.txt").read_text(encoding="utf-8").splitlines()
    return [s for s in lines if 5 <= len(s.split()) <= 12][:n]


def _own_words(sources: list[str], n: int) -> list[dict]:
    """n words of each sentence itself as positive constraints (as a paraphrase keeps them; the bench's)."""
    out = []
    for i, s in enumerate(sources):
        own = list(dict.fromkeys(re.findall(r"\w+", s)))
        out.append({"positive": [[w] for w in random.Random(i).sample(own, min(n, len(own)))]})
    return out


def _run(loaded, sources, cons, **kw):
    """Each sentence's (unsatisfiable, [(tokens, score), ...]), and the decoder's step counts."""
    stats: dict = {}
    res = decode(loaded, sources, cons, stats=stats, **kw)
    return [(r.unsatisfiable, [(o["tokens"], o["score"]) for o in r.outputs]) for r in res], stats


def test_auto_ends_constrained_sentences_once_their_best_is_found(demo):
    """With 4 required words of its own, a sentence under Hugging Face's rule searches on until five
    hypotheses meet every constraint, most of that for hypotheses nobody asked for; "auto" (the default)
    stops once the one best can no longer change: far fewer steps, every output still satisfies its
    constraints, and the best paraphrase is the same for almost every sentence."""
    sources = _demo_sentences(24)
    cons = _own_words(sources, 4)
    kw = dict(beam=5, nbest=1, max_length=128, batch_size=12)
    hf_rule, hf_stats = _run(demo, sources, cons, stop="beam", **kw)
    auto_stats: dict = {}
    auto = decode(demo, sources, cons, stats=auto_stats, **kw)
    assert auto_stats["sentence_steps"] <= 0.75 * hf_stats["sentence_steps"], (auto_stats, hf_stats)
    for r, c in zip(auto, cons):
        assert not r.unsatisfiable and len(r.outputs) == 1 and r.safety_net_dropped == 0
        assert violations(r.outputs[0]["text"], normalise_constraints(c)) == [], (r.outputs[0]["text"], c)
    same = sum(r.outputs[0]["tokens"] == b[1][0][0] for r, b in zip(auto, hf_rule))
    assert same >= 22, same


def test_auto_applies_each_sentences_own_rule_in_a_mixed_batch(demo):
    """In one batch, unconstrained sentences end under Hugging Face's rule (their outputs stay
    ``generate``'s) and sentences with required words under the n-best rule, as if decoded apart."""
    sources = _demo_sentences(8)
    cons = [c if i % 2 else None for i, c in enumerate(_own_words(sources, 3))]
    kw = dict(beam=4, nbest=2, max_length=64, batch_size=8)
    mixed, _ = _run(demo, sources, cons, **kw)
    for i, (unsat, outs) in enumerate(mixed):
        alone, _ = _run(demo, [sources[i]], [cons[i]], stop="nbest" if cons[i] else "beam", **kw)
        assert not unsat and [t for t, _ in outs] == [t for t, _ in alone[0][1]], i
        assert [s for _, s in outs] == pytest.approx([s for _, s in alone[0][1]], abs=1e-4)


def test_unknown_stop_rule_is_refused(tiny_marian):
    with pytest.raises(ValueError, match="stop must be one of auto, beam, nbest, not 'first'"):
        decode(tiny_marian, ["a b"], None, stop="first")
