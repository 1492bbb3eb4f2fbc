"""The fast step (a lean decoder step: generation/decoding/fast_step.py, issue 20) computes what Hugging Face's
decoder computes: logits within 1e-5 step by step (with beams reordered and sentences dropped as the beam search
does), and the same decoded tokens with and without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from generation.decoding import decode, fast_step, load_model
from generation.decoding.hf_compat import repeat_rows, select_rows

DEMO = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"
SOURCES = ["How often do earthquakes occur?", "the cat sat on the mat .", "a a b", "big red house and a small dog"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: these are tiny products, and on a busy host a second thread's every wait costs
    a scheduler slice (the results are the same)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def demo():
    if not (DEMO / "config.json").is_file():
        pytest.skip("no demo model")
    return load_model(DEMO, device="cpu")


@pytest.fixture(scope="module")
def tiny_bart(tiny_bart_dir):
    return load_model(tiny_bart_dir, device="cpu")


def _compare_steps(loaded, K=4, steps=14, shrink_at=(6, 10), seed=0, rtol=0.0):
    """Drive Hugging Face's decoder (its cache reordered and row-selected as ``beam_search`` does) and the
    lean state side by side with random tokens, random beam moves within each sentence and sentences
    dropped at ``shrink_at``; returns the largest absolute logit difference over all steps, less ``rtol``
    times the logit's magnitude."""
    model = loaded.model
    g = torch.Generator().manual_seed(seed)
    lengths = [7, 3, 5, 6]  # random sources, padded (the cross-attention bias must bite)
    B, S = len(lengths), max(lengths)
    pad = model.config.pad_token_id
    ids = torch.full((B, S), pad, dtype=torch.long)
    mask = torch.zeros(B, S, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, : n - 1] = torch.randint(0, loaded.vocab.size, (n - 1,), generator=g)
        ids[b, n - 1] = loaded.vocab.eos_id
        mask[b, :n] = 1
    enc_in = {"input_ids": ids, "attention_mask": mask}
    worst = 0.0
    with torch.no_grad():
        enc = model.get_encoder()(**enc_in, return_dict=True)
        start = torch.full((B,), model.config.decoder_start_token_id, dtype=torch.long)
        fast = fast_step.for_model(model)
        assert fast is not None
        state = fast.start(enc.last_hidden_state, enc_in["attention_mask"], steps + 2)
        out = model(
            encoder_outputs=enc,
            attention_mask=enc_in["attention_mask"],
            decoder_input_ids=start[:, None],
            use_cache=True,
            return_dict=True,
        )
        worst = max(worst, _err(state.step(start, 0), out.logits[:, -1], rtol))
        cache = out.past_key_values
        repeat_rows(cache, K)
        state.repeat(K)
        enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(K, 0)
        mask = enc_in["attention_mask"].repeat_interleave(K, 0)
        for pos in range(1, steps):
            H = B * K
            tok = torch.randint(0, loaded.vocab.size, (H,), generator=g)
            out = model(
                encoder_outputs=enc,
                attention_mask=mask,
                decoder_input_ids=tok[:, None],
                past_key_values=cache,
                use_cache=True,
                return_dict=True,
            )
            cache = out.past_key_values
            ours = state.step(tok, pos)
            assert ours.shape == out.logits[:, -1].shape
            worst = max(worst, _err(ours, out.logits[:, -1], rtol))
            src = (torch.randint(0, K, (B, K), generator=g) + torch.arange(B)[:, None] * K).view(-1)
            if pos in shrink_at and B > 1:
                keep = torch.tensor([b for b in range(B) if b != pos % B])
                rows = (keep[:, None] * K + torch.arange(K)).view(-1)
                self_rows = src[rows]
                select_rows(cache, self_rows, rows)
                enc.last_hidden_state = enc.last_hidden_state.index_select(0, rows)
                mask = mask.index_select(0, rows)
                state.select(self_rows, rows[::K] // K)
                B = len(keep)
            else:
                cache.self_attention_cache.reorder_cache(src)
                state.reorder(src)
    return worst


@pytest.fixture(params=["onednn", "mkl"])
def projections(request, monkeypatch):
    """The lean step's products with oneDNN's packed weights (the default on CPU) and with F.linear."""
    monkeypatch.setenv("PARAFORGE_FAST_STEP_ONEDNN", "1" if request.param == "onednn" else "0")
    return request.param


def _err(ours, hf, rtol):
    return ((ours - hf).abs() - rtol * hf.abs()).max().item()


def test_fast_step_logits_equal_hf_marian(tiny_marian, projections):
    assert _compare_steps(tiny_marian) <= 1e-5


def test_fast_step_logits_equal_hf_bart(tiny_bart, projections):
    assert _compare_steps(tiny_bart, K=3) <= 1e-5


@pytest.mark.parametrize("seed", [0, 3])
def test_fast_step_logits_equal_hf_demo_model_past_the_first_capacity(demo, projections, seed):
    """The demo model (scaled embeddings, swish, tied lm_head, final_logits_bias; logits of magnitude ~10),
    past 16 positions (the static cache doubles from 4 to 32). With F.linear within 1e-5; with oneDNN's products
    (another summation order) within 1e-5 + 1e-6 x |logit| (a few float32 ulps: 1.1e-5 was seen)."""
    worst = _compare_steps(
        demo, K=5, steps=24, shrink_at=(3, 17), seed=seed, rtol=1e-6 if projections == "onednn" else 0.0
    )
    assert worst <= 1e-5


def _tokens(results):
    return [(r.unsatisfiable, [o["tokens"] for o in r.outputs]) for r in results]


def _scores(results):
    return [o["score"] for r in results for o in r.outputs]


@pytest.mark.parametrize("constrained", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_decode_identical_with_and_without_fast_step(demo, projections, constrained):
    """Demo model, 4 batches of 6 (batches shrink as sentences finish): the same tokens with the lean step as
    with Hugging Face's, unconstrained and with positive, negative and bos_avoid constraints."""
    from .conftest import corpus

    sources = SOURCES + ["A man is playing a guitar.", "The woman is slicing an onion.", "Two dogs run in a field."]
    sources += corpus(17, seed=5)[:17]
    cons = None
    if constrained:
        pool = [
            {"positive": [["often"]]},
            {"positive": [["cat"], ["mat"]], "negative": [["the"]]},
            {"negative": [["a", "a"]]},
            None,
            {"positive": [["guitar"]]},
            {"bos_avoid": [["The"]]},
            {"positive": [["dogs"], ["field"], ["run"]]},
            {"positive": [["day"], ["time"], ["world"], ["people"]]},
        ]
        cons = [pool[i % len(pool)] for i in range(len(sources))]
    runs = {}
    for fast in (False, True):
        runs[fast] = decode(demo, sources, cons, beam=5, nbest=3, max_length=40, batch_size=6, fast_step=fast)
    assert _tokens(runs[True]) == _tokens(runs[False])
    assert _scores(runs[True]) == pytest.approx(_scores(runs[False]), abs=1e-4)
    if constrained:
        assert any(r.outputs for r in runs[True]) and sum(bool(r.outputs) for r in runs[True]) >= len(sources) - 2


def test_fast_step_equals_hf_path_bart_constrained(tiny_bart):
    c = [{"positive": [["cat"]], "negative": [["the"], ["a", "a"]], "bos_avoid": [["How"]]}] * 3
    a = decode(tiny_bart, SOURCES[:3], c, beam=4, nbest=2, max_length=20, fast_step=False)
    b = decode(tiny_bart, SOURCES[:3], c, beam=4, nbest=2, max_length=20, fast_step=True)
    assert _tokens(a) == _tokens(b)


def test_which_models_take_the_fast_step(tiny_marian, tiny_t5_dir, monkeypatch):
    """Marian and BART in eval mode only; T5 keeps Hugging Face's decoder; PARAFORGE_FAST_STEP=0 turns it
    off, 1 on, unset: on CPU; the fused weights are rebuilt when a decoder weight changes in place."""
    monkeypatch.setenv("PARAFORGE_FAST_STEP_ONEDNN", "0")  # (the fused weights as they are, not packed)
    t5 = load_model(tiny_t5_dir, device="cpu")
    assert fast_step.for_model(t5.model) is None
    model = tiny_marian.model
    fast = fast_step.for_model(model)
    assert fast is not None and fast_step.for_model(model) is fast
    w = model.model.decoder.layers[0].self_attn.k_proj.weight
    saved = w.detach().clone()
    try:
        with torch.no_grad():
            w.mul_(2.0)
        fresh = fast_step.for_model(model)
        assert fresh is not fast
        d = w.shape[0]
        assert torch.equal(fresh.layers[0].w_qkv[d : 2 * d], w)
    finally:
        with torch.no_grad():
            w.copy_(saved)
    model.train()
    try:
        assert fast_step.for_model(model) is None
    finally:
        model.eval()
    monkeypatch.setenv("PARAFORGE_FAST_STEP_ONEDNN", "1")
    assert fast_step.for_model(model).onednn == fast_step._onednn_linear_works()
    monkeypatch.setenv("PARAFORGE_FAST_STEP", "0")
    assert not fast_step.enabled_by_env()
    calls = []
    real = fast_step.FastStepState.step
    monkeypatch.setattr(fast_step.FastStepState, "step", lambda self, *a: calls.append(1) or real(self, *a))
    decode(tiny_marian, SOURCES[:2], None, beam=3, max_length=10)
    assert not calls
    monkeypatch.setenv("PARAFORGE_FAST_STEP", "1")
    decode(tiny_marian, SOURCES[:2], None, beam=3, max_length=10)
    assert calls
    monkeypatch.delenv("PARAFORGE_FAST_STEP")  # the default: on CPU (not yet on a GPU)
    assert fast_step.default_on(torch.device("cpu")) and not fast_step.default_on(torch.device("cuda"))
    calls.clear()
    decode(tiny_marian, SOURCES[:2], None, beam=3, max_length=10)
    assert calls


def test_fast_steps_do_not_keep_their_models_alive(tiny_marian):
    """The per-model cache is keyed weakly and its entries hold no reference to their model."""
    import gc

    from transformers import MarianConfig, MarianMTModel

    from .conftest import tiny_config_kwargs

    config = MarianConfig(**tiny_config_kwargs(tiny_marian.vocab.size, tiny_marian.tokenizer.pad_token_id))
    model = MarianMTModel(config)
    model.eval()
    assert fast_step.for_model(model) is not None
    before = len(fast_step._CACHE)
    del model
    gc.collect()
    assert len(fast_step._CACHE) == before - 1


def test_fast_step_cached_while_decoding_serves_outside_inference_mode(tiny_marian):
    """``beam_search`` runs in inference mode, so the lean decoder it caches holds inference tensors: a later
    caller without inference mode (no_grad only, as here) steps with it exactly as with a fresh one."""
    model = tiny_marian.model
    fast_step._CACHE.pop(model, None)  # (built by the decode below, whatever ran before)
    decode(tiny_marian, ["the cat sat"], beam=2, max_length=6)
    cached = fast_step.for_model(model)
    assert cached is not None and torch.is_inference(cached.layers[0].w_qkv)
    fresh = fast_step.FastStep(model, cached.key)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, tiny_marian.vocab.size, (2, 5), generator=g)
    with torch.no_grad():
        enc = model.get_encoder()(input_ids=ids, attention_mask=torch.ones_like(ids), return_dict=True)
        outs = []
        for fast in (cached, fresh):
            st = fast.start(enc.last_hidden_state, None, 8)
            logits = [st.step(torch.full((2,), model.config.decoder_start_token_id, dtype=torch.long), 0)]
            st.repeat(2)
            tok = torch.randint(0, tiny_marian.vocab.size, (4,), generator=torch.Generator().manual_seed(1))
            logits.append(st.step(tok, 1))
            st.reorder(torch.tensor([1, 1, 2, 3]))
            logits.append(st.step(tok, 2))
            outs.append(logits)
    assert all(torch.equal(a, b) for a, b in zip(*outs))


# --- dynamic int8 weights (decode(..., int8=True); off by default) ---------------------------------------

needs_int8 = pytest.mark.skipif(not fast_step.int8_linear_works(), reason="this torch has no quantized x86 engine")


@needs_int8
def test_int8_step_is_close_to_float32_and_decodes_mostly_the_same(demo):
    """The int8 twin of the lean decoder (kept beside the float32 one) gives logits within int8's error of
    the float32 step's, and decoding with it mostly returns the same best outputs, every constraint still
    met: an option that trades exactness for speed, and says how much."""
    fast32, fast8 = fast_step.for_model(demo.model), fast_step.for_model(demo.model, int8=True)
    assert fast8 is not fast32 and fast8.int8 and fast_step.for_model(demo.model, int8=True) is fast8
    enc_in = demo.tokenizer(SOURCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        enc = demo.model.get_encoder()(**enc_in, return_dict=True).last_hidden_state
        start = torch.full((len(SOURCES),), demo.model.config.decoder_start_token_id, dtype=torch.long)
        a = fast32.start(enc, enc_in["attention_mask"], 8).step(start, 0)
        b = fast8.start(enc, enc_in["attention_mask"], 8).step(start, 0)
    assert not torch.equal(a, b)  # (int8 arithmetic, not a silent float32 fallback)
    assert (a - b).abs().max().item() < 0.05 * a.abs().max().item()
    sources = (
        SOURCES
        + [line for line in (DEMO.parent / "corpus.txt").read_text().splitlines() if 5 <= len(line.split()) <= 12][:28]
    )
    cons = [
        {"positive": [[s.split()[0]]], "negative": [["the"]]} if i % 3 == 0 else None for i, s in enumerate(sources)
    ]
    r32 = decode(demo, sources, cons, beam=5, nbest=1, max_length=40)
    r8 = decode(demo, sources, cons, beam=5, nbest=1, max_length=40, int8=True)
    from generation.decoding import normalise_constraints, violations

    for r, c in zip(r8, cons):
        assert r.safety_net_dropped == 0
        for o in r.outputs:
            assert violations(o["text"], normalise_constraints(c)) == []
    same = sum([o["tokens"] for o in x.outputs] == [o["tokens"] for o in y.outputs] for x, y in zip(r32, r8))
    assert same >= 0.8 * len(sources), same


@needs_int8
def test_int8_needs_the_fast_step(tiny_marian, tiny_t5_dir):
    with pytest.raises(ValueError, match="int8 runs on the lean decoder step only"):
        decode(tiny_marian, ["a b"], None, beam=2, max_length=6, fast_step=False, int8=True)
    with pytest.raises(ValueError, match="int8 runs on the lean decoder step only"):
        decode(load_model(tiny_t5_dir, device="cpu"), ["a b"], None, beam=2, max_length=6, int8=True)
