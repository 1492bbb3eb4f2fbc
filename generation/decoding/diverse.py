"""ParaBank 2's diverse mode (Hu et al., CoNLL 2019, sections 2-3): a plain module, usable without Django.

    from generation.decoding import load_model
    from generation.decoding.diverse import diverse_decode
    from generation.decode_options import DiverseOptions
    m = load_model("generation/demo/model")
    [r] = diverse_decode(m, ["The committee approved the new budget on Monday."], options=DiverseOptions(seed=1))
    r.outputs   # [{"text", "score", "rank", "cluster", "banned"}], best (lowest score) first

For each input:

1. ``negative_sets`` random sets of the reference's distinct words (``ban_fraction`` of them, or shares
   graded over ``ban_fraction`` +- ``ban_spread``; each at least one; the reference is the source when none
   is given; dealt from a shuffled deck, so that every word is banned before any is banned twice), each
   word banned with its casing variants (its lowercase and capitalised forms and the form the reference
   has: the rule ParaBank's negative constraints follow, ``generation.selection``'s ``negative_phrases``)
   through ``banned.py``'s exact word-level tables, or, with ``discourage``, made that much less likely;
2. ``samples`` top-``top_k`` samples at ``temperature`` under each set: all ``negative_sets x samples``
   samples of an input are rows of one batched decoder step (the encoder runs once per input and its
   rows share its output; the first decoder step too), several inputs per batch (``batch_size``); in ban
   mode a token after which the open word spells a banned word out is not drawn (the ban forbids only
   the word's completion: such a row could only go on into a non-word, "eyes" + "s");
3. candidates with a non-word (a word neither English nor in the reference, ``generation.english.non_words``:
   the non-word screen's rule; what a subword model writes when its word is banned, "Thes" for "The") are
   dropped unless ``allow_non_words``; each remaining candidate's score: its negative
   log-likelihood per token under the model (EOS included), plus the backward model's NLL per token of
   the source given the candidate when one is given; candidates above ``max_nll`` are dropped, and in
   ban mode any that holds a banned word (never, by construction: a safety net, counted);
4. identical candidates (as lowercased words without punctuation) merged, the best-scoring kept;
   ``clustering.k_medoids`` under word Levenshtein distance with the reference as pinned point 0 (its
   cluster: what is strictly nearer the reference than any other medoid); the best of every other
   cluster, best first, ``keep`` at most (fewer when fewer clusters form).

Decoder-only models (Llama, Qwen, Gemma, ... loaded with a prompt template, ``generation/prompts.py``): each
input's prompt (the source in the template) runs once, one forward over the batch's left-padded prompts
(``causal.CausalState``, the step beam search uses for them), and its key/value cache is copied to the input's
``negative_sets x samples`` rows (``Cache.batch_repeat_interleave``); the rows then sample continuations one
token each step under the same bans, and end at any of the model's end tokens (EOS, a chat model's
end-of-turn tokens, a line break under a template that stops there: ``loading.from_objects``); a line break
that ends a row stays out of its text. Their rows leave the batch as they end (each row's cache is its own, so
no cross-attention block has to stay whole). Scoring, the non-word filter, clustering and keeping are the
same. A decoder-only backward model reads the source as the continuation of the candidate's prompt
(:func:`backward_nll`).

Randomness comes from a hash of (seed, source, reference) per input: the same seed and device give the
same outputs whatever else is in the batch (up to the last bits of the model's arithmetic, which can
depend on the batch's padding, as in ``decode``).

Speed. Rows that have ended leave the batch on the CPU's fast step (oneDNN): a row stops at its EOS, but
its input's 150 rows ran until the longest ended (on the demo model 46% of the row-steps of development
lines 1000-1007 were such rows, one row at ``max_length`` while the mean was 44 tokens). Once at most
``SHRINK`` of an input's rows go on, the ended ones leave (:func:`rows_to_keep`: every input keeps the
same number, at least ``MIN_ROWS``), and the cross-attention still runs each row in its place of the full
block (``FastStepState.place_cross_rows``), so that every product is the one the full batch computed: the
same seed gives the same tokens and the same float64 sums as with every row kept (checked on 24
development lines and 2 multi-input batches, ban and discourage mode, with and without a backward
model). On the demo model (2 shared cores) that halved the diverse decode's time: 13.45 s -> 7.05 s for
lines 1000-1011 (``bench/diversity.py --offset 1000 --references 12``, medians of 3 interleaved passes).
Elsewhere (a GPU, Hugging Face's step) every row stays to the end, as before.

Why one module of over 600 lines: sampling, scoring, clustering and keeping are one pipeline over the same
rows (their order, their sets, their seeds), and the sampler's three steps (the fast step, Hugging Face's, a
decoder-only model's) share its loop; split apart, checking that a seed gives the same tokens means reading
them all at once. Issue 49's one step interface is where it gets shorter.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import english
from ..decode_options import DiverseOptions
from ..morphology import capitalised
from ..words import words_of
from . import fast_step, normalise_constraints, violations
from .banned import NegativeState, build_negative_tables
from .causal import CausalDecoder, prompt_batch
from .clustering import comparable_words, distance_matrix, k_medoids, pick_per_cluster
from .hf_compat import FastProcessors, generation_config_for, logits_processors, pad_token_id, repeat_rows, select_rows
from .loading import LoadedModel
from .stop_check import StopCheck, raise_if_stopped

CPU_INPUTS = 1
CUDA_INPUTS = 8
BACKWARD_BATCH = 64
# a decoder-only backward model's candidates per forward: its logits cover prompt and source ([rows, tokens,
# vocabulary]: 8 x 64 x 262k floats for Gemma 3 are 0.5 GiB), not the source alone as a seq2seq model's do
CAUSAL_BACKWARD_BATCH = 8
# Ended rows leave the batch (module docstring, "Speed") once at most SHRINK of the rows go on, and never
# below MIN_ROWS rows: at 1-3 rows the fast step's logits differed in the last bits from the full batch's
# (4-149 rows: the same bit for bit on this host, 1 and 2 threads), so 8 keeps a margin.
SHRINK = 0.75
MIN_ROWS = 8
SCORE_DIGITS = 4


@dataclass
class Candidate:
    """One distinct sampled text: its score (lower is better) and the negative set it was sampled under."""

    text: str
    score: float
    banned: list[str]


@dataclass
class DiverseResult:
    """One input's kept paraphrases (``outputs``, rank order) and what became of its samples (``counts``:
    ``sampled``, ``finished`` (ended with EOS within max_length), ``violating`` (safety net), ``non_word``
    (dropped for a non-word), ``distinct``,
    ``under_max_nll``, ``clusters`` (formed, the pinned one included))."""

    source: str
    reference: str
    outputs: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"source": self.source, "outputs": self.outputs, "candidates": self.counts}


def input_seed(seed: int, source: str, reference: str) -> int:
    """A 63-bit seed of (seed, source, reference): an input's draws depend on nothing else."""
    digest = hashlib.blake2b(f"{seed}\x1f{source}\x1f{reference}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def distinct_words(reference: str) -> list[str]:
    """The reference's words (``\\w+`` runs), each once (case-insensitively), in order of appearance."""
    seen: dict[str, str] = {}
    for w in words_of(reference):
        seen.setdefault(w.lower(), w)
    return list(seen.values())


def ban_pool(reference: str, options: DiverseOptions) -> list[str]:
    """The words negative sets are drawn from: the reference's distinct English content words. Function
    words (``english.BAN_POOL_STOP_WORDS``) come in only with ``options.ban_function_words``: a subword model
    that may not write "the" or "a" writes "Thes" or "AL", and banning them rewrites nothing a reader would
    call a paraphrase. Words that are not English (``english.is_english``: numbers, "2013") never while there
    are others, because no paraphrase replaces them. The wider pool when a narrower one is empty."""
    words = distinct_words(reference)
    stop = english.BAN_POOL_STOP_WORDS
    content = words if options.ban_function_words else [w for w in words if w.lower() not in stop]
    known = [w for w in content if english.is_english(w)]
    return known or content or words


def casing_variants(word: str) -> list[str]:
    """The forms a banned word is banned in: lowercase, capitalised, and as written (each once)."""
    low = word.lower()
    return list(dict.fromkeys([low, capitalised(low), word]))


def draw_negative_sets(reference: str, options: DiverseOptions, rng: random.Random) -> list[list[str]]:
    """``options.negative_sets`` random sets of :func:`ban_pool`'s words, each its share of them
    (``options.ban_fractions``, lowest first; rounded, at least one; none for a reference without words),
    casing variants included. The sets are dealt from a shuffled deck of the pool (a fresh shuffle when it
    runs out, no word twice in a set), so every word is banned before any is banned twice: drawn
    independently, five one-word sets from a three-word pool left a word unbanned more often than not, and
    its paraphrases unsampled."""
    words = ban_pool(reference, options)
    sets = []
    deck: list[str] = []
    for fraction in options.ban_fractions:
        n = min(len(words), max(1, round(fraction * len(words)))) if words else 0
        if len(deck) < n:  # a fresh shuffle under what is left, none of it twice in one set
            deck += [w for w in rng.sample(words, len(words)) if w not in deck]
        drawn, deck = deck[:n], deck[n:]
        sets.append([form for w in drawn for form in casing_variants(w)])
    return sets


def non_words(text: str, reference: str) -> list[str]:
    """The non-words of ``text`` (``english.non_words``, the non-word screen's rule), its words and its
    reference's as clustering compares them: what a subword model writes when its word is banned ("thes",
    "newael", "mandelas")."""
    return english.non_words(comparable_words(text), comparable_words(reference))


def _start_token(model, gen_cfg) -> int:
    start = gen_cfg.decoder_start_token_id
    if start is None:
        start = model.config.decoder_start_token_id
    if isinstance(start, (list, tuple)):
        start = start[0]
    return int(start)


def avoid_spelled_bans(ns: NegativeState, top_v: torch.Tensor, top_i: torch.Tensor) -> torch.Tensor:
    """``top_v`` with -inf for the top-k tokens after which the open word spells a banned word out. The ban
    forbids only what would complete the word, so a row that has spelled "eyes" can only go on into a longer
    word: "eyes" + "s", "floating" + "igator". On the demo model that was most of the samples' non-words
    (30 of 30 rows for "All eyes on the trip ..." with "eyes" banned), and the non-word filter left 10
    distinct candidates of 150 samples per reference on average (42 with this rule; development lines
    1000-1031): too few for 8 clusters and 5 outputs. Sampling then picks among the other top-k tokens;
    a row whose every top-k token spells a banned word out keeps them (the non-word filter judges its
    candidate)."""
    H, k = top_i.shape
    src = torch.arange(H, device=top_i.device).repeat_interleave(k)
    bidx = ns.bidx.repeat_interleave(k)
    node, g = ns.advance(src, top_i.reshape(-1), bidx)
    finite = torch.isfinite(top_v)
    spelled = ns.ends_badly(node, g, bidx).view(H, k) & finite
    spelled &= ~(spelled | ~finite).all(1, keepdim=True)
    return top_v.masked_fill(spelled, float("-inf"))


def rows_to_keep(done: torch.Tensor) -> torch.Tensor | None:
    """The rows (flat indices, ascending) to go on decoding when finished rows leave the batch, or None
    while that is not worth a copy of the cache: ``done`` is [inputs, rows per input]; every input keeps
    its unfinished rows and as many finished ones (its first) as make every input's count equal (the fast
    step's cross-attention reads an input's rows as one block), and at least ``MIN_ROWS`` rows; only when
    that leaves at most ``SHRINK`` of the rows."""
    inputs, per = done.shape
    n = max(int((~done).sum(1).max()), min(MIN_ROWS, per))
    if n > SHRINK * per:
        return None
    first = torch.argsort(done.to(torch.uint8), dim=1, stable=True)[:, :n]  # unfinished rows first
    offsets = torch.arange(inputs, device=done.device)[:, None] * per
    return (first.sort(dim=1).values + offsets).reshape(-1)


@torch.inference_mode()
def sample_batch(
    loaded: LoadedModel,
    sources: list[str],
    banned: list[list[list[str]]],
    generators: list[torch.Generator],
    options: DiverseOptions,
    stats: dict | None = None,
    should_stop: StopCheck | None = None,
) -> list[list[tuple[list[int], float, int] | None]]:
    """Top-k samples for B inputs: ``banned[b][s]`` is set s of input b; each set gets ``options.samples``
    rows, all B x sets x samples rows decoded together (the encoder and the first step once per input; a
    decoder-only model's prompt once per input). Returns per input and row (set-major) (token ids without
    start and EOS (a decoder-only model's: with the token that ended it), sum of log-probabilities under
    the model with EOS, tokens with EOS), or None for a row that did not end with EOS within
    ``max_length`` or found every token banned. ``should_stop`` (``stop_check``): asked before every decoder
    step, True raises ``DecodingStopped``; None: never asked (the draws are the same either way)."""
    model, vocab, dev = loaded.model, loaded.vocab, loaded.device
    B, M, R = len(sources), options.samples, options.rows
    L = options.max_length
    tok = loaded.tokenizer
    causal = loaded.causal
    if causal:  # a decoder-only model: each source's prompt (causal.py), left-padded
        input_ids, am = prompt_batch(loaded, sources)
    else:
        enc_in = tok(sources, return_tensors="pt", padding=True, truncation=True)
        input_ids, am = enc_in["input_ids"].to(dev), enc_in["attention_mask"].to(dev)
    gen_cfg = generation_config_for(model, 1, L, 1.0, False, dev)
    processors = FastProcessors(logits_processors(model, gen_cfg, input_ids))
    eos = vocab.eos_id
    # every token that ends a decoder-only model's row (its end-of-turn tokens, a line break under a
    # template that stops there: ``loading.from_objects``); an encoder-decoder's rows end at EOS only
    more_eos = vocab.eos_ids[1:] if causal else ()
    more_eos = torch.tensor(more_eos, dtype=torch.long, device=dev) if more_eos else None
    pad = pad_token_id(gen_cfg)
    pad = eos if pad is None else pad
    # the random numbers of every step, per input from its own generator (on the CPU: the same on any device)
    uniforms = torch.cat([torch.rand(L, R, generator=g, dtype=torch.float64) for g in generators], 1).to(dev)

    tables = build_negative_tables(vocab, [[([w], False) for w in s] for sets in banned for s in sets], dev)
    row_set = torch.arange(B * R, device=dev) // M  # each row's negative set: the tables' row
    ns = None
    if not tables.empty:
        ns = NegativeState(tables, row_set, vocab.boundary.to(dev), eos)
        ns.set_token_info(vocab, dev)

    fast = fast_step.for_model(model) if fast_step.default_on(dev) and not causal else None
    if causal:
        # the prompts run once per input (B rows); each input's key/value cache is then copied to its R rows.
        # The start column is a placeholder (EOS, as in dba.py), never fed to the model
        enc = None
        start = torch.full((B,), eos, dtype=torch.long, device=dev)
        state = CausalDecoder(model, input_ids).start(None, am, L)
        first = state.step(start, 0)
        state.repeat(R)
        cache = row_mask = None
    elif fast is not None:
        enc = model.get_encoder()(input_ids=input_ids, attention_mask=am, return_dict=True)
        start = torch.full((B,), _start_token(model, gen_cfg), dtype=torch.long, device=dev)
        state = fast.start(enc.last_hidden_state, am, L)
        first = state.step(start, 0)
        state.repeat(R)
        cache = row_mask = None
    else:
        enc = model.get_encoder()(input_ids=input_ids, attention_mask=am, return_dict=True)
        start = torch.full((B,), _start_token(model, gen_cfg), dtype=torch.long, device=dev)
        out = model(encoder_outputs=enc, attention_mask=am, decoder_input_ids=start[:, None], use_cache=True)
        cache, first = out.past_key_values, out.logits[:, -1, :]
        repeat_rows(cache, R)
        enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(R, dim=0)
        row_mask = am.repeat_interleave(R, dim=0)
    first_logp = torch.log_softmax(first.float(), dim=-1).repeat_interleave(R, dim=0)

    H = B * R
    rows = torch.arange(H, device=dev)  # the original row of each row still decoded
    seqs = torch.full((H, L), pad, dtype=torch.long, device=dev)
    seqs[:, 0] = start[0]
    total = torch.zeros(H, dtype=torch.float64, device=dev)
    length = torch.zeros(H, dtype=torch.long, device=dev)
    done = torch.zeros(H, dtype=torch.bool, device=dev)
    ended = torch.zeros(H, dtype=torch.bool, device=dev)  # finished with EOS, every token allowed
    out_seqs, out_total, out_length, out_ended = seqs.clone(), total.clone(), length.clone(), ended.clone()
    k = min(options.top_k, vocab.size)
    steps = 0
    inputs = B
    # ended rows leave the batch only where that is bit for bit the same (module docstring, "Speed"), and
    # always for a decoder-only model (its rows share no cross-attention block: each row's prompt cache is its own)
    compact = (fast is not None and fast.onednn) or causal
    stepped = fast is not None or causal  # the step goes through ``state`` (fast_step's or causal.py's)
    for cur in range(1, L):
        raise_if_stopped(should_stop, "diverse sampling")
        if first_logp is not None:
            logp, first_logp = first_logp, None
        elif stepped:
            logp = torch.log_softmax(state.step(seqs[:, cur - 1], cur - 1).float(), dim=-1)
        else:
            out = model(
                encoder_outputs=enc,
                attention_mask=row_mask,
                decoder_input_ids=seqs[:, cur - 1 : cur],
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            logp = torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)
        if not causal:
            logp = processors(seqs[:, :cur], logp)
        elif processors.steps:  # (what generate's processors read: the prompt and the continuation)
            logp = processors(state.history(seqs, cur), logp)
        steps += 1
        work = logp
        if ns is not None:
            if options.discourage is None:
                work = logp.clone()
                ns.apply_bans(work, float("-inf"))
            else:
                work = logp - options.discourage * ns.ban_mask().float()
        if options.temperature != 1.0:
            work = work / options.temperature
        top_v, top_i = torch.topk(work, k, dim=1)
        if ns is not None and options.discourage is None:
            top_v = avoid_spelled_bans(ns, top_v, top_i)
        dead = ~torch.isfinite(top_v).any(1)  # every token banned: the row cannot go on
        probs = torch.softmax(top_v.masked_fill(dead[:, None], 0.0).double(), dim=1)
        cdf = probs.cumsum(1)
        u = uniforms[cur - 1].index_select(0, rows) * cdf[:, -1]
        pick = torch.searchsorted(cdf, u[:, None]).clamp_(max=k - 1)
        token = top_i.gather(1, pick)[:, 0].masked_fill(done, pad)
        live = ~done & ~dead
        total += torch.where(live, logp.gather(1, token[:, None])[:, 0].double(), 0.0)
        length += live.long()
        seqs[:, cur] = token
        if ns is not None:
            node, g = ns.advance(torch.arange(len(rows), device=dev), token, ns.bidx)
            ns.select(None, node, g)
        newly = live & (token == eos if more_eos is None else (token == eos) | torch.isin(token, more_eos))
        ended |= newly
        done |= newly | dead
        if bool(done.all()) or cur + 1 >= L:
            break
        per_input = len(rows) // inputs  # rows per input still decoded (R until rows are compacted)
        finished_inputs = done.view(-1, per_input).all(1)
        if bool(finished_inputs.any()):  # drop inputs whose every row is done (their state is kept aside)
            keep_inputs = torch.nonzero(~finished_inputs)[:, 0]
            keep = torch.nonzero(~finished_inputs.repeat_interleave(per_input))[:, 0]
            inputs = len(keep_inputs)
        elif compact:  # drop finished rows, the same number from each input (the fast step's layout)
            keep, keep_inputs = rows_to_keep(done.view(-1, per_input)), None
        else:
            keep = None
        if keep is not None:
            gone = torch.ones(len(rows), dtype=torch.bool, device=dev)
            gone[keep] = False
            gone = torch.nonzero(gone)[:, 0]
            out_seqs[rows[gone]], out_total[rows[gone]] = seqs[gone], total[gone]
            out_length[rows[gone]], out_ended[rows[gone]] = length[gone], ended[gone]
            rows, seqs, total, length = rows[keep], seqs[keep], total[keep], length[keep]
            done, ended = done[keep], ended[keep]
            if ns is not None:
                ns.keep_rows(keep, ns.bidx[keep])
            if causal:
                state.select(keep, keep_inputs)
            elif fast is None:
                select_rows(cache, keep, keep)
                enc.last_hidden_state = enc.last_hidden_state.index_select(0, keep)
                row_mask = row_mask.index_select(0, keep)
            elif keep_inputs is None:
                state.reorder(keep)
            else:
                state.select(keep, keep_inputs)
            if causal:
                pass
            elif compact and len(rows) < R * inputs:  # each row where the full batch had it (place_cross_rows)
                within = torch.arange(len(rows), device=dev) // (len(rows) // inputs)
                state.place_cross_rows(within * R + rows % R, R)
            elif compact:
                state.place_cross_rows(None)
    out_seqs[rows], out_total[rows], out_length[rows], out_ended[rows] = seqs, total, length, ended
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + steps
        stats["rows"] = stats.get("rows", 0) + H
    results: list[list[tuple[list[int], float, int] | None]] = []
    seq_list, tot_list, len_list, end_list = (
        out_seqs.tolist(),
        out_total.tolist(),
        out_length.tolist(),
        out_ended.tolist(),
    )
    for b in range(B):
        per = []
        for r in range(b * R, (b + 1) * R):
            n = len_list[r]  # (a decoder-only row's ids keep the token that ended it: a line break may spell text)
            per.append((seq_list[r][1 : n + int(causal)], tot_list[r], n) if end_list[r] else None)
        results.append(per)
    return results


@torch.inference_mode()
def backward_nll(backward: LoadedModel, candidates: list[str], target: str) -> list[float]:
    """NLL per token (EOS included) of ``target`` given each candidate under the ``backward`` model,
    teacher-forced, in batches. A decoder-only model reads ``target`` as the continuation of the candidate's
    prompt (its template), ended by the token it ends a reply with: the sequence its fine-tuning learns
    (``generation.rewriter.causal.encode_pairs``)."""
    if backward.causal:
        return _causal_backward_nll(backward, candidates, target)
    tok, model, dev = backward.tokenizer, backward.model, backward.device
    out: list[float] = []
    for k in range(0, len(candidates), BACKWARD_BATCH):
        part = candidates[k : k + BACKWARD_BATCH]
        enc = tok(part, text_target=[target] * len(part), return_tensors="pt", padding=True, truncation=True)
        labels = enc["labels"].to(dev)
        pad = tok.pad_token_id
        mask = labels != pad if pad is not None else torch.ones_like(labels, dtype=torch.bool)
        logits = model(
            input_ids=enc["input_ids"].to(dev), attention_mask=enc["attention_mask"].to(dev), labels=labels
        ).logits
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, labels[:, :, None])[:, :, 0]
        nll = -(logp * mask).sum(1) / mask.sum(1).clamp(min=1)
        out += nll.tolist()
    return out


def _causal_backward_nll(backward: LoadedModel, candidates: list[str], target: str) -> list[float]:
    """:func:`backward_nll` for a decoder-only model: each candidate's prompt then ``target`` and the end token,
    right-padded; the NLL per token of what follows the prompt."""
    from ..rewriter.causal import IGNORE, collate, encode_pairs, end_token_id

    tok, model, dev = backward.tokenizer, backward.model, backward.device
    end = end_token_id(backward.prompt, tok, backward.vocab.eos_ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else end
    out: list[float] = []
    for k in range(0, len(candidates), CAUSAL_BACKWARD_BATCH):
        part = candidates[k : k + CAUSAL_BACKWARD_BATCH]
        examples = encode_pairs(backward.prompt, tok, end, [(c, target) for c in part], max_len=1 << 20)
        ids, mask, labels = collate(examples, pad)
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev)).logits[:, :-1]
        labels = labels[:, 1:].to(dev)  # position t's logits predict token t + 1
        known = labels != IGNORE
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, labels.clamp(min=0)[:, :, None])[:, :, 0]
        out += (-(logp * known).sum(1) / known.sum(1).clamp(min=1)).tolist()
    return out


def choose_outputs(reference: str, candidates: list[Candidate], options: DiverseOptions) -> tuple[list[dict], int]:
    """The kept paraphrases of ``candidates`` (already scored and filtered), and the clusters formed:
    merged by their comparable words (best score kept), clustered with the reference pinned as point 0,
    the best of each other cluster, best first, ``options.keep`` at most."""
    best: dict[tuple[str, ...], Candidate] = {}
    for c in sorted(candidates, key=lambda c: (c.score, c.text)):
        best.setdefault(tuple(comparable_words(c.text)), c)
    points = list(best.values())  # best first
    if not points:
        return [], 1
    dist = distance_matrix([reference, *(c.text for c in points)])
    clustering = k_medoids(dist, options.clusters)
    scores = [0.0, *(c.score for c in points)]
    picked = pick_per_cluster(clustering, scores)[: options.keep]
    outputs = [
        {
            "text": points[i - 1].text,
            "score": round(points[i - 1].score, SCORE_DIGITS),
            "rank": rank,
            "cluster": cluster,
            "banned": points[i - 1].banned,
        }
        for rank, (i, cluster) in enumerate(picked, 1)
    ]
    return outputs, len(clustering.medoids)


def default_inputs_per_batch(loaded: LoadedModel) -> int:
    """Inputs decoded together when ``batch_size`` is None: each is ``negative_sets x samples`` rows."""
    return CUDA_INPUTS if loaded.device.type == "cuda" else CPU_INPUTS


def diverse_decode(
    loaded: LoadedModel,
    sources: list[str],
    references: list[str | None] | None = None,
    *,
    options: DiverseOptions | None = None,
    backward: LoadedModel | None = None,
    stats: dict | None = None,
    should_stop: StopCheck | None = None,
    **changes: Any,
) -> list[DiverseResult]:
    """ParaBank 2's diverse paraphrases of each source (the module's docstring), in input order.
    ``references``: what the negative sets are drawn from and the pinned cluster sits on (default, or
    None for a line: the source). ``stats`` (if given) grows by ``steps`` and ``rows`` decoded.
    ``should_stop``: asked before every decoder step, True raises ``DecodingStopped`` (``stop_check``)."""
    options = options or DiverseOptions()
    if changes:
        options = options.replace(**changes)
    refs = [(r or s) for s, r in zip(sources, references or [None] * len(sources))]
    if len(refs) != len(sources):
        raise ValueError("one reference (or None) per source is needed")
    per_batch = options.batch_size or default_inputs_per_batch(loaded)
    results: list[DiverseResult] = []
    tok = loaded.tokenizer
    # a decoder-only row's ids end with the token that ended it: those that spell nothing are left out of its
    # text (a line break that ends it stays, then is stripped), as ``decode`` does
    vocab = loaded.vocab
    ending = {vocab.eos_id} | {i for i in vocab.eos_ids if not vocab.surfaces[i]} if loaded.causal else set()
    for k in range(0, len(sources), per_batch):
        srcs, rfs = sources[k : k + per_batch], refs[k : k + per_batch]
        seeds = [input_seed(options.seed, s, r) for s, r in zip(srcs, rfs)]
        sets = [draw_negative_sets(r, options, random.Random(seed)) for r, seed in zip(rfs, seeds)]
        gens = [torch.Generator().manual_seed(seed) for seed in seeds]
        rows = sample_batch(loaded, srcs, sets, gens, options, stats, should_stop)
        for src, ref, input_sets, input_rows in zip(srcs, rfs, sets, rows):
            counts = {"sampled": options.rows, "finished": 0, "violating": 0, "non_word": 0}
            by_text: dict[str, Candidate] = {}
            for r, row in enumerate(input_rows):
                if row is None:
                    continue
                ids, total, n = row
                if ending:
                    ids = [t for t in ids if t not in ending]
                text = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()
                if not words_of(text):
                    continue
                counts["finished"] += 1
                banned = input_sets[r // options.samples]
                if options.discourage is None and violations(
                    text, normalise_constraints({"negative": [[w] for w in banned]})
                ):
                    counts["violating"] += 1  # safety net: the tables should make this 0
                    continue
                if not options.allow_non_words and non_words(text, ref):
                    counts["non_word"] += 1
                    continue
                score = -total / n
                if text not in by_text or score < by_text[text].score:
                    by_text[text] = Candidate(text=text, score=score, banned=banned)
            cands = list(by_text.values())
            if backward is not None and cands:
                for c, nll in zip(cands, backward_nll(backward, [c.text for c in cands], src)):
                    c.score += nll
            counts["distinct"] = len(cands)
            cands = [c for c in cands if c.score <= options.max_nll]
            counts["under_max_nll"] = len(cands)
            outputs, counts["clusters"] = choose_outputs(ref, cands, options)
            results.append(DiverseResult(source=src, reference=ref, outputs=outputs, counts=counts))
    return results
