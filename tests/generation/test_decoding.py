"""Unconstrained decoding equals Hugging Face's beam search (outputs and scores); loading; n-best; re-ranking."""

from __future__ import annotations

import pytest
import torch

from generation.decoding import ModelFolderError, decode, load_model, word_levenshtein
from generation.decoding.rerank import rerank_dissimilar

SOURCES = ["How often do earthquakes occur?", "the cat sat on the mat .", "a a b", "big red house"]


def _hf(loaded, sources, **kw):
    enc = loaded.tokenizer(sources, return_tensors="pt", padding=True)
    with torch.no_grad():
        return loaded.model.generate(**enc, output_scores=True, return_dict_in_generate=True, **kw)


def _assert_equal_to_hf(loaded, sources, K, N, max_length, lp, early):
    out = _hf(
        loaded,
        sources,
        num_beams=K,
        num_return_sequences=N,
        max_length=max_length,
        length_penalty=lp,
        early_stopping=early,
    )
    ours = decode(
        loaded,
        sources,
        None,
        beam=K,
        nbest=N,
        max_length=max_length,
        length_penalty=lp,
        early_stopping=early,
        batch_size=len(sources),
    )
    pad = loaded.model.generation_config.pad_token_id
    eos = loaded.vocab.eos_id
    for i, r in enumerate(ours):
        assert len(r.outputs) == N
        for j, o in enumerate(r.outputs):
            hf_ids = out.sequences[i * N + j].tolist()[1:]
            # strip the padding after EOS
            if eos in hf_ids:
                hf_ids = hf_ids[: hf_ids.index(eos) + 1]
            hf_ids = [t for t in hf_ids if t != pad or pad == eos]
            ours_ids = loaded.tokenizer.convert_tokens_to_ids(o["tokens"])
            assert ours_ids == [t for t in hf_ids if t != eos], (i, j)
            # HF's sequences_scores = sum log-prob / generated_length ** lp; ours "score" = the sum
            gen_len = len(hf_ids)
            assert o["score"] / gen_len**lp == pytest.approx(float(out.sequences_scores[i * N + j]), abs=1e-4)


@pytest.mark.parametrize(
    "K,N,max_length,lp,early",
    [(5, 2, 20, 1.0, False), (4, 4, 12, 0.5, True), (3, 1, 16, 2.0, "never"), (2, 1, 10, 1.0, False)],
)
def test_equals_hf_beam_search_marian(tiny_marian, K, N, max_length, lp, early):
    _assert_equal_to_hf(tiny_marian, SOURCES, K, N, max_length, lp, early)


def _eos_loving(tiny_marian, init_std=0.5, eos_bias=2.5):
    """A model that likes EOS: hypotheses of different lengths finish at different steps."""
    from transformers import MarianConfig, MarianMTModel

    from generation.decoding import from_objects

    from .conftest import tiny_config_kwargs

    tok = tiny_marian.tokenizer
    torch.manual_seed(11)
    model = MarianMTModel(
        MarianConfig(**{**tiny_config_kwargs(tiny_marian.vocab.size, tok.pad_token_id), "init_std": init_std})
    )
    model.final_logits_bias[0, tiny_marian.vocab.eos_id] = eos_bias
    return from_objects(model, tok, "cpu")


def test_equals_hf_with_early_eos(tiny_marian):
    _assert_equal_to_hf(_eos_loving(tiny_marian), SOURCES, 5, 3, 24, 1.0, False)


def test_equals_hf_bart_and_constraints_hold(tiny_bart_dir):
    m = load_model(tiny_bart_dir, device="cpu")
    _assert_equal_to_hf(m, SOURCES[:3], 3, 2, 14, 1.0, False)
    c = {"positive": [["cat"]], "negative": [["the"], ["a", "a"]], "bos_avoid": [["How"]]}
    res = decode(m, SOURCES[:3], [c] * 3, beam=4, nbest=2, max_length=20)
    from generation.decoding import normalise_constraints, violations

    for r in res:
        assert r.safety_net_dropped == 0
        for o in r.outputs:
            assert violations(o["text"], normalise_constraints(c)) == []


def test_equals_hf_t5_and_constraints_hold(tiny_t5_dir):
    """T5's pad is also its decoder start and a token the model may emit, so HF's sequences are compared
    position by position over our tokens, the rest only padding or EOS."""
    from generation.decoding import normalise_constraints, violations

    m = load_model(tiny_t5_dir, device="cpu")
    K, N, max_length = 3, 2, 14
    out = _hf(m, SOURCES, num_beams=K, num_return_sequences=N, max_length=max_length)
    ours = decode(m, SOURCES, None, beam=K, nbest=N, max_length=max_length, batch_size=len(SOURCES))
    specials = {m.vocab.eos_id, m.tokenizer.pad_token_id}
    for i, r in enumerate(ours):
        for j, o in enumerate(r.outputs):
            ids = m.tokenizer.convert_tokens_to_ids(o["tokens"])
            hf_ids = out.sequences[i * N + j].tolist()[1:]
            assert hf_ids[: len(ids)] == ids, (i, j)
            assert set(hf_ids[len(ids) :]) <= specials
            gen_len = len(ids) + (len(ids) < max_length - 1)  # + EOS unless it stopped at max_length
            assert o["score"] / gen_len == pytest.approx(float(out.sequences_scores[i * N + j]), abs=1e-4)
    c = {"positive": [["cat"]], "negative": [["the"], ["a", "a"]], "bos_avoid": [["How"]]}  # "How" = "▁Ho" "w"
    for r in decode(m, SOURCES, [c] * len(SOURCES), beam=4, nbest=2, max_length=20):
        assert not r.unsatisfiable and r.safety_net_dropped == 0
        for o in r.outputs:
            assert violations(o["text"], normalise_constraints(c)) == []  # "cat" present, as a whole word


def test_load_model_errors(tmp_path):
    with pytest.raises(ModelFolderError, match="does not exist"):
        load_model(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFolderError, match="config.json"):
        load_model(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text('{"model_type": "nonsense"}')
    with pytest.raises(ModelFolderError):
        load_model(tmp_path / "bad")


def test_nbest_and_rerank(tiny_marian):
    [r] = decode(tiny_marian, ["the cat sat"], [None], beam=4, nbest=3, max_length=12)
    assert len(r.outputs) == 3
    assert len({tuple(o["tokens"]) for o in r.outputs}) == 3
    [rr] = decode(
        tiny_marian,
        ["the cat sat"],
        [None],
        beam=4,
        nbest=3,
        max_length=12,
        rerank_dissimilar=True,
        references=["the cat sat"],
    )
    d = [o["distance"] for o in rr.outputs]
    assert d == sorted(d, reverse=True)
    assert {o["text"] for o in rr.outputs} == {o["text"] for o in r.outputs}


def test_word_levenshtein_and_ties():
    assert word_levenshtein("a b c".split(), "a c".split()) == 1
    outs = [{"text": "x y", "score": -3.0}, {"text": "x z", "score": -1.0}, {"text": "a b c", "score": -9.0}]
    ranked = rerank_dissimilar(outs, "x y")
    assert [o["text"] for o in ranked] == ["a b c", "x z", "x y"]
    ranked = rerank_dissimilar([{"text": "p", "score": -5.0}, {"text": "q", "score": -2.0}], "x")
    assert [o["text"] for o in ranked] == ["q", "p"]  # equal distance: the better model score first


def test_stats_count_the_decoder_steps_of_every_batch(tiny_marian):
    """What bench/decoding.py divides by to give time per step: with EOS suppressed each batch runs
    max_length - 1 steps."""
    bias = tiny_marian.model.final_logits_bias
    saved = bias.clone()
    try:
        with torch.no_grad():
            bias[0, tiny_marian.vocab.eos_id] = -1.0e4
        stats = {}
        results = decode(tiny_marian, SOURCES, None, beam=3, max_length=9, batch_size=2, stats=stats)
        assert stats["steps"] == 2 * (9 - 1)
        assert {len(r.outputs[0]["tokens"]) for r in results} <= {7, 8}  # (8 steps; the last may be a forced EOS)
    finally:
        with torch.no_grad():
            bias.copy_(saved)


class _Replay:
    """Stands in for a captured CUDA graph on the CPU: each replay runs the captured step again."""

    def __init__(self, fn):
        self.fn = fn
        self.replays = 0

    def replay(self):
        self.replays += 1
        self.fn()


def test_graph_replayed_steps_equal_eager_steps(tiny_marian, monkeypatch):
    """The CUDA-graph path (bookkeeping run from static buffers, the length read from the device) decodes
    exactly as the eager path, with and without constraints; only the capture itself needs a GPU."""
    import generation.decoding as decoding
    from generation.decoding import cuda_graphs, dba

    graphs, searches = [], []
    monkeypatch.setattr(cuda_graphs, "supported", lambda dev: True)
    monkeypatch.setattr(cuda_graphs, "capture", lambda fn: graphs.append(_Replay(fn)) or graphs[-1])
    monkeypatch.setattr(
        decoding, "beam_search", lambda *a, **kw: searches.append(dba.beam_search(*a, **kw)) or searches[-1]
    )
    cons = [
        None,
        {"positive": [["cat"]], "negative": [["mat"]]},
        {"negative": [["a", "b"]], "bos_avoid": [["a"]]},
        {"positive": [["red"], ["big"]]},
    ]
    m = _eos_loving(tiny_marian, 0.2, 3.0)  # hypotheses finish at many steps, not only at the last (eager) one
    # (nbest 2 of beam 4: under the default stopping rule the sentences with positive constraints end by
    # their 2-best, the others by all 4 slots, a per-sentence slot the graph reads from the device)
    for lp, early, nbest in ((1.0, False, 4), (0.5, True, 4), (2.0, "never", 4), (1.0, False, 2), (0.5, True, 2)):
        kw = dict(beam=4, nbest=nbest, max_length=14, length_penalty=lp, early_stopping=early, batch_size=2)
        searches.clear()
        eager = decode(m, SOURCES, cons, cuda_graph=False, shrink=False, **kw)  # (a graph keeps whole batches)
        eager_rows, searches[:] = list(searches), []
        assert any(1 < len(ids) < 13 for batch in eager_rows for hyps in batch for ids, *_ in hyps)
        graphs.clear()
        replayed = decode(m, SOURCES, cons, cuda_graph=True, **kw)
        assert len(graphs) == 2 and all(g.replays >= 1 for g in graphs)  # one graph per batch, replayed
        for e, r in zip(eager, replayed):
            assert [(o["text"], o["score"]) for o in e.outputs] == [(o["text"], o["score"]) for o in r.outputs]
            assert e.unsatisfiable == r.unsatisfiable
        # token ids and raw scores exactly; length-normalised scores up to float32 rounding (the graph
        # multiplies by 1 / len ** lp, as a GPU does; the CPU divides)
        for e_batch, r_batch in zip(eager_rows, searches):
            for e_hyps, r_hyps in zip(e_batch, r_batch):
                assert [(ids, raw) for ids, raw, _ in e_hyps] == [(ids, raw) for ids, raw, _ in r_hyps]
                assert [n for *_, n in r_hyps] == pytest.approx([n for *_, n in e_hyps], rel=1e-6)


def test_graph_needs_a_gpu(tiny_marian):
    with pytest.raises(ValueError, match="CUDA"):
        decode(tiny_marian, SOURCES[:1], None, beam=2, max_length=8, cuda_graph=True)


def test_bad_words_in_place_equal_hf_and_cache_reorder_keeps_cross_attention(tiny_marian, monkeypatch):
    """The generation config's single-token bad words are applied in place (``hf_compat.FastProcessors``) and
    give Hugging Face's outputs and scores; with a multi-token bad word the processor itself runs. Only the
    self-attention half of the key/value cache is reordered."""
    import copy

    from generation.decoding import hf_compat

    m = tiny_marian
    saved = m.model.generation_config
    plain = _hf(m, SOURCES, num_beams=4, max_length=12).sequences
    frequent = int(torch.mode(plain[:, 1:].flatten()).values)  # a token the outputs use: the ban must bite
    used = []
    real_fast = hf_compat.FastProcessors
    import generation.decoding.dba as dba

    monkeypatch.setattr(dba, "FastProcessors", lambda procs: used.append(real_fast(procs)) or used[-1])
    try:
        for bad in ([[m.tokenizer.pad_token_id], [frequent]], [[m.tokenizer.pad_token_id], [frequent, 5]]):
            m.model.generation_config = copy.deepcopy(saved)
            m.model.generation_config.bad_words_ids = bad
            used.clear()
            _assert_equal_to_hf(m, SOURCES, 4, 2, 12, 1.0, False)
            in_place = [s for p in used for s in p.steps if isinstance(s, hf_compat._BanTokens)]
            assert bool(in_place) == all(len(w) == 1 for w in bad)
            if in_place:
                out = decode(m, SOURCES, None, beam=4, max_length=12)
                assert all(
                    frequent not in m.tokenizer.convert_tokens_to_ids(o["tokens"]) for r in out for o in r.outputs
                )
                assert frequent in plain[:, 1:]
    finally:
        m.model.generation_config = saved
    from transformers import DynamicCache, EncoderDecoderCache

    calls = []
    for cls in (EncoderDecoderCache, DynamicCache):
        real = cls.reorder_cache
        monkeypatch.setattr(
            cls,
            "reorder_cache",
            lambda self, rows, real=real, name=cls.__name__: calls.append(name) or real(self, rows),
        )
    decode(m, SOURCES, None, beam=4, nbest=2, max_length=12, fast_step=False)  # (Hugging Face's decoder and cache)
    assert calls and set(calls) == {"DynamicCache"}  # the self-attention half alone, once a step


def _tokens_scores(results):
    return [(r.unsatisfiable, [(o["tokens"], o["score"]) for o in r.outputs]) for r in results]


@pytest.mark.parametrize("lp,early,shrinks", [(1.0, False, True), (0.5, True, True), (2.0, "never", False)])
def test_shrinking_batch_decodes_as_the_full_batch(tiny_marian, lp, early, shrinks):
    """Sentences dropped from the batch as they finish (issue 20) come back as the full batch decodes them:
    the same tokens, the same scores but for the last bits of a product over fewer rows; with and without
    constraints. The batch does shrink: fewer sentence-steps than steps x sentences (with "never" these
    sentences are never done before the last step)."""
    m = _eos_loving(tiny_marian, 0.2, 3.0)
    sources = SOURCES + ["a b a b a b", "often today", "the the cat", "x"]
    cons = [
        None,
        {"positive": [["often"]]},
        {"negative": [["a"]], "bos_avoid": [["big"]]},
        None,
        {"positive": [["cat"], ["today"]], "negative": [["b"]]},
        None,
        {"positive": [["a"]]},
        None,
    ]
    for c in (None, cons):
        runs, stats = {}, {}
        for shrink in (False, True):
            stats[shrink] = {}
            runs[shrink] = decode(
                m,
                sources,
                c,
                beam=4,
                nbest=3,
                max_length=20,
                length_penalty=lp,
                early_stopping=early,
                batch_size=len(sources),
                stats=stats[shrink],
                shrink=shrink,
            )
        full, shrunk = _tokens_scores(runs[False]), _tokens_scores(runs[True])
        assert [(u, [t for t, _ in o]) for u, o in full] == [(u, [t for t, _ in o]) for u, o in shrunk]
        for (_, a), (_, b) in zip(full, shrunk):
            assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5)
        assert stats[False]["sentence_steps"] == stats[False]["steps"] * len(sources)
        assert stats[True]["steps"] == stats[False]["steps"]
        if shrinks:
            assert stats[True]["sentence_steps"] < stats[False]["sentence_steps"]


@pytest.mark.slow
def test_batches_by_length_keep_input_order(tiny_marian, monkeypatch):
    """With several batches, sources go into batches by length (longest first, as CTranslate2 batches
    them); results still come back in input order, each as its sentence alone decodes it."""
    import generation.decoding as decoding

    sources = [
        "a",
        "the cat sat on the mat and the dog sat on the log .",
        "big red house",
        "a b",
        "How often do earthquakes occur?",
        "x y z w v",
    ]
    seen = []
    real = decoding.beam_search

    def spy(loaded, input_ids, attention_mask, **kw):
        seen.append(attention_mask.sum(1).tolist())
        return real(loaded, input_ids, attention_mask, **kw)

    monkeypatch.setattr(decoding, "beam_search", spy)
    together = decode(tiny_marian, sources, None, beam=3, nbest=2, max_length=16, batch_size=2)
    lengths = [n for batch in seen for n in batch]
    assert lengths == sorted(lengths, reverse=True) and len(seen) == 3
    alone = [decode(tiny_marian, [s], None, beam=3, nbest=2, max_length=16)[0] for s in sources]
    assert [r.source for r in together] == sources
    assert [[o["tokens"] for o in r.outputs] for r in together] == [[o["tokens"] for o in r.outputs] for r in alone]
