"""The one decoder step interface (generation/decoding/step.py, issue 49 item 1): every step kind satisfies the
protocol, one rule picks the step for both searches, Hugging Face's seq2seq step (HFSeq2SeqStep) computes what
the model's own forward with ``past_key_values`` computes bit for bit, and it and the fast step give the same
tokens for a search; the diverse sampler's processors compute what they replaced.

Tiny random models (no network) and the shipped demo model, CPU.
"""

from __future__ import annotations

import random

import pytest
import torch

from generation.decode_options import DiverseOptions
from generation.decoding import decode, diverse, fast_step, from_objects, load_model
from generation.decoding.causal import CausalDecoder, CausalState, prompt_batch
from generation.decoding.hf_compat import repeat_rows, select_rows
from generation.decoding.processors import BanWords, DiscourageWords, Temperature, TopKSampler, WordBans
from generation.decoding.step import DecoderState, DecoderStep, HFSeq2SeqState, HFSeq2SeqStep, decoder_step

from .causal_models import ending_causal, tiny_tokenizer
from .test_fast_step import DEMO, SOURCES, demo  # noqa: F401 - the fast step tests' demo model (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DEMO_LINES = (DEMO.parent / "corpus.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tiny_t5(tiny_t5_dir):
    return load_model(tiny_t5_dir, device="cpu")


@pytest.fixture(scope="module")
def tiny_llama():
    tok = tiny_tokenizer(chat=False)
    return from_objects(ending_causal("llama", tok), tok, "cpu", prompt_template="paraphrase-plain")


def _ids(loaded, sources):
    enc = loaded.tokenizer(sources, return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]


def test_each_step_kind_satisfies_the_protocol(tiny_marian, tiny_t5, tiny_llama):
    """The fast step, Hugging Face's seq2seq step and the decoder-only step, and each one's state."""
    cases = [
        (tiny_marian, dict(fast=True), fast_step.FastStep, fast_step.FastStepState),
        (tiny_marian, dict(fast=False), HFSeq2SeqStep, HFSeq2SeqState),
        (tiny_t5, dict(fast=True), HFSeq2SeqStep, HFSeq2SeqState),  # (no fast step for T5)
    ]
    for loaded, kw, step_type, state_type in cases:
        ids, mask = _ids(loaded, SOURCES[:2])
        step = decoder_step(loaded, ids, **kw)
        assert type(step) is step_type and isinstance(step, DecoderStep)
        state = step.start(step.encode(ids, mask), mask, 8)
        assert type(state) is state_type and isinstance(state, DecoderState)
    prompts, mask = prompt_batch(tiny_llama, SOURCES[:2])
    step = decoder_step(tiny_llama, prompts)
    assert type(step) is CausalDecoder and isinstance(step, DecoderStep) and step.encode(prompts, mask) is None
    state = step.start(None, mask, 8)
    assert type(state) is CausalState and isinstance(state, DecoderState)
    assert step.rows_leave_exactly and not HFSeq2SeqStep.rows_leave_exactly


def test_one_rule_picks_the_step(tiny_marian, monkeypatch):
    """None follows fast_step.default_on (the CPU; PARAFORGE_FAST_STEP); int8 needs the fast step."""
    ids, _ = _ids(tiny_marian, SOURCES[:1])
    assert isinstance(decoder_step(tiny_marian, ids), fast_step.FastStep)
    monkeypatch.setenv("PARAFORGE_FAST_STEP", "0")
    assert isinstance(decoder_step(tiny_marian, ids), HFSeq2SeqStep)
    assert decoder_step(tiny_marian, ids, int8=fast_step.int8_linear_works()) is not None
    with pytest.raises(ValueError, match="int8 runs on the lean decoder step only"):
        decoder_step(tiny_marian, ids, fast=False, int8=True)


def test_hf_step_is_the_models_own_forward_bit_for_bit(tiny_marian, tiny_t5):
    """HFSeq2SeqState, driven as the searches drive it (first step per sentence, repeat, reorders, sentences
    dropped), gives exactly the logits of the model's forward with its cache moved by hand (the code it
    replaced in beam_search and sample_batch)."""
    for loaded in (tiny_marian, tiny_t5):
        model = loaded.model
        g = torch.Generator().manual_seed(0)
        ids, mask = _ids(loaded, SOURCES)
        B, K = len(SOURCES), 3
        start = torch.full((B,), model.config.decoder_start_token_id, dtype=torch.long)
        with torch.inference_mode():
            state = HFSeq2SeqStep(model).start(HFSeq2SeqStep(model).encode(ids, mask), mask, 12)
            enc = model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=True)
            out = model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=start[:, None], use_cache=True)
            assert torch.equal(state.step(start, 0), out.logits[:, -1, :])
            cache = out.past_key_values
            state.repeat(K)
            repeat_rows(cache, K)
            enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(K, dim=0)
            row_mask = mask.repeat_interleave(K, dim=0)
            sentences = B
            for pos in range(1, 9):
                H = sentences * K
                tok = torch.randint(0, loaded.vocab.size, (H,), generator=g)
                got = state.step(tok, pos)
                out = model(
                    encoder_outputs=enc,
                    attention_mask=row_mask,
                    decoder_input_ids=tok[:, None],
                    past_key_values=cache,
                    use_cache=True,
                )
                cache = out.past_key_values
                assert torch.equal(got, out.logits[:, -1, :]), (type(model).__name__, pos)
                moves = (torch.arange(H) // K) * K + torch.randint(0, K, (H,), generator=g)
                if pos in (3, 6):  # a sentence leaves
                    kept = torch.arange(1, sentences)
                    rows = (kept[:, None] * K + torch.arange(K)).view(-1)
                    state.select(moves[rows], kept)
                    select_rows(cache, moves[rows], rows)
                    enc.last_hidden_state = enc.last_hidden_state.index_select(0, rows)
                    row_mask = row_mask.index_select(0, rows)
                    sentences -= 1
                else:
                    state.reorder(moves)
                    cache.self_attention_cache.reorder_cache(moves)


@pytest.mark.parametrize("constrained", [False, True])
def test_hf_step_and_fast_step_give_the_same_search(demo, constrained):  # noqa: F811
    """The same beam search through either step: the same tokens (the scores within float rounding)."""
    cons = [{"negative": [["often"]], "positive": [["today"]]}, {"negative": [["cat"]]}, None, None]
    cons = cons if constrained else None
    hf = decode(demo, SOURCES, cons, beam=4, nbest=2, max_length=30, fast_step=False)
    fast = decode(demo, SOURCES, cons, beam=4, nbest=2, max_length=30, fast_step=True)
    assert [[o["tokens"] for o in r.outputs] for r in hf] == [[o["tokens"] for o in r.outputs] for r in fast]
    for a, b in zip(hf, fast):
        assert [o["score"] for o in a.outputs] == pytest.approx([o["score"] for o in b.outputs], abs=1e-3)


def test_sampler_processors_compute_what_they_replaced(tiny_marian):
    """TopKSampler with the ban / discourage / temperature processors, against the sampler's former inline
    arithmetic on the same scores and uniform numbers: the same tokens, the same dead rows; the processors
    never change the scores they are given."""
    vocab = tiny_marian.vocab
    sets = [["cat", "Cat"], ["dog"], ["the", "The", "mat"]]
    g = torch.Generator().manual_seed(1)
    rows = len(sets) * 4
    logp = torch.log_softmax(torch.randn(rows, vocab.size, generator=g), dim=-1)
    u = torch.rand(rows, generator=g, dtype=torch.float64)
    for discourage, temperature in ((None, 1.0), (None, 0.7), (2.0, 1.0), (2.0, 1.3)):
        options = DiverseOptions(top_k=12, temperature=temperature, discourage=discourage)
        bans = WordBans.for_sets(vocab, sets, 4, discourage, "cpu")
        sampler = TopKSampler.for_options(options, vocab.size, bans)
        kinds = [type(p) for p in sampler.logits_processors]
        assert kinds == [BanWords if discourage is None else DiscourageWords] + [Temperature] * (temperature != 1.0)
        before = logp.clone()
        token, dead = sampler(None, logp, u)
        assert torch.equal(logp, before)
        # the former inline code
        ns, k = bans.ns, options.top_k
        if discourage is None:
            work = logp.clone()
            ns.apply_bans(work, float("-inf"))
        else:
            work = logp - discourage * ns.ban_mask().float()
        if temperature != 1.0:
            work = work / temperature
        top_v, top_i = torch.topk(work, k, dim=1)
        if discourage is None:
            top_v = diverse_avoid(ns, top_v, top_i)
        want_dead = ~torch.isfinite(top_v).any(1)
        probs = torch.softmax(top_v.masked_fill(want_dead[:, None], 0.0).double(), dim=1)
        cdf = probs.cumsum(1)
        pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).clamp_(max=k - 1)
        assert torch.equal(token, top_i.gather(1, pick)[:, 0]) and torch.equal(dead, want_dead)


def diverse_avoid(ns, top_v, top_i):
    from generation.decoding.processors import avoid_spelled_bans

    return avoid_spelled_bans(ns, top_v, top_i)


def test_hf_step_and_fast_step_sample_the_same_tokens(demo, monkeypatch):  # noqa: F811
    """sample_batch through either step (PARAFORGE_FAST_STEP=0: Hugging Face's): the same seed draws the same
    tokens (the float64 sums within float rounding); and the same again through the same step."""
    options = DiverseOptions(negative_sets=3, samples=12, max_length=40, seed=7)
    batch = DEMO_LINES[10:12]
    seeds = [diverse.input_seed(options.seed, s, s) for s in batch]
    sets = [diverse.draw_negative_sets(s, options, random.Random(seed)) for s, seed in zip(batch, seeds)]

    def sample():
        gens = [torch.Generator().manual_seed(seed) for seed in seeds]
        return diverse.sample_batch(demo, batch, sets, gens, options)

    fast = sample()
    assert sample() == fast
    monkeypatch.setenv("PARAFORGE_FAST_STEP", "0")
    hf = sample()
    assert sum(row is not None for rows in hf for row in rows) > options.rows  # (most rows end)
    for a, b in zip(hf, fast):
        assert [r and (r[0], r[2]) for r in a] == [r and (r[0], r[2]) for r in b]
        totals = [r[1] for r in a if r is not None]
        assert totals == pytest.approx([r[1] for r in b if r is not None], abs=1e-3)
