"""ParaBank 2's diverse mode (Hu et al., CoNLL 2019, sections 2-3): a plain module, usable without Django.

    from generation.decoding import load_model
    from generation.decoding.diverse import diverse_decode
    from generation.decode_options import DiverseOptions
    m = load_model("generation/demo/model")
    [r] = diverse_decode(m, ["The committee approved the new budget on Monday."], options=DiverseOptions(seed=1))
    r.outputs   # [{"text", "score", "rank", "cluster", "banned"}], best (lowest score) first; with a backward
                # model each gains "backward_nll" (its part of "score")

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

The sampler (:func:`sample_batch`) calls the model only through the one step interface (``step.py``: the
fast step, Hugging Face's seq2seq step or a decoder-only model's, whichever ``step.decoder_step`` picks);
its per-step work is a chain of small processors (``processors.py``: bans or discouragement, temperature,
the top k, no banned word spelled out, the draw), and the rows' bookkeeping is :class:`SampledRows`'.
Sampling, scoring, clustering and keeping stay one module: one pipeline over the same rows (their order,
their sets, their seeds).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import english
from ..decode_options import DiverseOptions
from ..facts import fact_changes
from ..morphology import capitalised
from ..words import words_of
from . import normalise_constraints, violations
from .backward import backward_nll
from .causal import prompt_batch
from .clustering import comparable_words, distance_matrix, k_medoids, pick_per_cluster
from .hf_compat import FastProcessors, generation_config_for, logits_processors, pad_token_id
from .loading import LoadedModel
from .processors import TopKSampler, WordBans
from .step import decoder_step, start_token
from .stop_check import StopCheck, raise_if_stopped

# Ended rows leave the batch (module docstring, "Speed") once at most SHRINK of the rows go on, and never
# below MIN_ROWS rows: at 1-3 rows the fast step's logits differed in the last bits from the full batch's
# (4-149 rows: the same bit for bit on this host, 1 and 2 threads), so 8 keeps a margin.
SHRINK = 0.75
MIN_ROWS = 8
SCORE_DIGITS = 4


@dataclass
class Candidate:
    """One distinct sampled text: its score (lower is better; the backward NLL included when there is one), the
    negative set it was sampled under, and the backward model's NLL of the source given it (None without one)."""

    text: str
    score: float
    banned: list[str]
    backward_nll: float | None = None


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
    call a paraphrase. Words that are not English (``english.is_english``: numbers, "2013") or are names
    (``english.written_names``: "Nelson Mandela") never while there are others, because no paraphrase replaces
    them and a model that may not write them misspells them ("Ne Mandela", "Mandelas"). The wider pool when a
    narrower one is empty."""
    words = distinct_words(reference)
    stop = english.BAN_POOL_STOP_WORDS
    content = words if options.ban_function_words else [w for w in words if w.lower() not in stop]
    names = english.written_names(words)
    known = [w for w in content if english.is_english(w) and w.lower() not in names]
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
    vocab, dev = loaded.vocab, loaded.device
    B, R, L = len(sources), options.rows, options.max_length
    if loaded.causal:  # a decoder-only model: each source's prompt (causal.py), left-padded
        input_ids, am = prompt_batch(loaded, sources)
    else:
        enc_in = loaded.tokenizer(sources, return_tensors="pt", padding=True, truncation=True)
        input_ids, am = enc_in["input_ids"].to(dev), enc_in["attention_mask"].to(dev)
    gen_cfg = generation_config_for(loaded.model, 1, L, 1.0, False, dev)
    processors = FastProcessors(logits_processors(loaded.model, gen_cfg, input_ids))
    pad = pad_token_id(gen_cfg)
    rows = SampledRows(B * R, L, start_token(loaded, gen_cfg), vocab.eos_id if pad is None else pad, loaded)
    # the random numbers of every step, per input from its own generator (on the CPU: the same on any device)
    uniforms = torch.cat([torch.rand(L, R, generator=g, dtype=torch.float64) for g in generators], 1).to(dev)
    bans = WordBans.for_sets(vocab, [s for sets in banned for s in sets], options.samples, options.discourage, dev)
    sampler = TopKSampler.for_options(options, vocab.size, bans)

    # the step (step.py); the encoder, the first step (a decoder-only model's prompt) once per input, then
    # its cache copied to the input's R rows
    step = decoder_step(loaded, input_ids)
    state = step.start(step.encode(input_ids, am), am, L)
    first = state.step(rows.seqs[::R, 0], 0)
    state.repeat(R)
    first_logp = torch.log_softmax(first.float(), dim=-1).repeat_interleave(R, dim=0)
    # ended rows leave the batch only where that is bit for bit the same (module docstring, "Speed"): on
    # the CPU's fast step, and always for a decoder-only model (each row's prompt cache is its own)
    compact = step.rows_leave_exactly
    steps, inputs = 0, B
    for cur in range(1, L):
        raise_if_stopped(should_stop, "diverse sampling")
        if first_logp is not None:
            logp, first_logp = first_logp, None
        else:
            logp = torch.log_softmax(state.step(rows.seqs[:, cur - 1], cur - 1).float(), dim=-1)
        if processors.steps:  # (what generate's processors read: a decoder-only model's prompt too)
            logp = processors(state.history(rows.seqs, cur), logp)
        steps += 1
        token, dead = sampler(rows.seqs[:, :cur], logp, uniforms[cur - 1].index_select(0, rows.ids))
        token = rows.add(cur, token, dead, logp)
        if bans is not None:
            bans.advance(token)
        if bool(rows.done.all()) or cur + 1 >= L:
            break
        keep, keep_inputs = _rows_leaving(rows.done, inputs, compact)
        if keep is None:
            continue
        rows.keep(keep)
        if bans is not None:
            bans.keep(keep)
        state.select(keep, keep_inputs)
        if keep_inputs is not None:
            inputs = len(keep_inputs)
        if compact and len(rows.ids) < R * inputs:  # each row where the full batch had it (place_cross_rows)
            within = torch.arange(len(rows.ids), device=dev) // (len(rows.ids) // inputs)
            state.place_cross_rows(within * R + rows.ids % R, R)
        elif compact:
            state.place_cross_rows(None)
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + steps
        stats["rows"] = stats.get("rows", 0) + B * R
    return rows.results(B, R)


def _rows_leaving(done: torch.Tensor, inputs: int, compact: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(rows to keep, inputs kept) after a step, or (None, None) to keep all: the inputs whose every row is
    done leave (their state is kept aside); with ``compact``, else finished rows, the same number from each
    input (:func:`rows_to_keep`: the fast step's layout), every input staying (inputs kept: None)."""
    per_input = len(done) // inputs  # rows per input still decoded (R until rows are compacted)
    finished_inputs = done.view(-1, per_input).all(1)
    if bool(finished_inputs.any()):
        keep_inputs = torch.nonzero(~finished_inputs)[:, 0]
        return torch.nonzero(~finished_inputs.repeat_interleave(per_input))[:, 0], keep_inputs
    if compact:
        return rows_to_keep(done.view(-1, per_input)), None
    return None, None


class SampledRows:
    """What the sampled rows have drawn: the rows still decoded (``ids``: each one's original row) and, once
    they leave, their copies in the full layout (``out_*``)."""

    def __init__(self, H: int, L: int, start: int, pad: int, loaded: LoadedModel):
        dev, vocab = loaded.device, loaded.vocab
        self.pad, self.eos, self.causal = pad, vocab.eos_id, loaded.causal
        # every token that ends a decoder-only model's row (its end-of-turn tokens, a line break under a
        # template that stops there: ``loading.from_objects``); an encoder-decoder's rows end at EOS only
        more_eos = vocab.eos_ids[1:] if loaded.causal else ()
        self.more_eos = torch.tensor(more_eos, dtype=torch.long, device=dev) if more_eos else None
        self.ids = torch.arange(H, device=dev)
        self.seqs = torch.full((H, L), pad, dtype=torch.long, device=dev)
        self.seqs[:, 0] = start
        self.total = torch.zeros(H, dtype=torch.float64, device=dev)  # sum of log-probabilities
        self.length = torch.zeros(H, dtype=torch.long, device=dev)  # tokens drawn, EOS included
        self.done = torch.zeros(H, dtype=torch.bool, device=dev)
        self.ended = torch.zeros(H, dtype=torch.bool, device=dev)  # finished with EOS, every token allowed
        self.out_seqs, self.out_total = self.seqs.clone(), self.total.clone()
        self.out_length, self.out_ended = self.length.clone(), self.ended.clone()

    def add(self, cur: int, token: torch.Tensor, dead: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
        """Each row's drawn ``token`` at position ``cur`` (the pad token for a row already done), its
        log-probability under ``logp`` summed; rows that ended or are ``dead`` are done. Returns the tokens."""
        token = token.masked_fill(self.done, self.pad)
        live = ~self.done & ~dead
        self.total += torch.where(live, logp.gather(1, token[:, None])[:, 0].double(), 0.0)
        self.length += live.long()
        self.seqs[:, cur] = token
        is_end = token == self.eos
        if self.more_eos is not None:
            is_end = is_end | torch.isin(token, self.more_eos)
        newly = live & is_end
        self.ended |= newly
        self.done |= newly | dead
        return token

    def keep(self, keep: torch.Tensor) -> None:
        """Only the rows ``keep`` go on; the others' values go to their places in the full layout."""
        gone = torch.ones(len(self.ids), dtype=torch.bool, device=self.ids.device)
        gone[keep] = False
        gone = torch.nonzero(gone)[:, 0]
        ids = self.ids[gone]
        self.out_seqs[ids], self.out_total[ids] = self.seqs[gone], self.total[gone]
        self.out_length[ids], self.out_ended[ids] = self.length[gone], self.ended[gone]
        self.ids, self.seqs, self.total = self.ids[keep], self.seqs[keep], self.total[keep]
        self.length, self.done, self.ended = self.length[keep], self.done[keep], self.ended[keep]

    def results(self, B: int, R: int) -> list[list[tuple[list[int], float, int] | None]]:
        """Per input and row: (token ids without the start column and EOS (a decoder-only model's: with the
        token that ended it), sum of log-probabilities, tokens with EOS), or None for a row that did not end."""
        ids = self.ids
        self.out_seqs[ids], self.out_total[ids] = self.seqs, self.total
        self.out_length[ids], self.out_ended[ids] = self.length, self.ended
        seq_list, tot_list, len_list, end_list = (
            self.out_seqs.tolist(),
            self.out_total.tolist(),
            self.out_length.tolist(),
            self.out_ended.tolist(),
        )
        results: list[list[tuple[list[int], float, int] | None]] = []
        for b in range(B):
            per = []
            for r in range(b * R, (b + 1) * R):
                n = len_list[r]  # (a decoder-only row's ids keep the token that ended it: a line break may spell text)
                per.append((seq_list[r][1 : n + int(self.causal)], tot_list[r], n) if end_list[r] else None)
            results.append(per)
        return results


def choose_outputs(reference: str, candidates: list[Candidate], options: DiverseOptions) -> tuple[list[dict], int]:
    """The kept paraphrases of ``candidates`` (already scored and filtered), and the clusters formed:
    merged by their comparable words (best score kept), clustered with the reference pinned as point 0,
    the best of each other cluster, best first, ``options.keep`` at most; with ``options.keep_facts`` "best" is
    the fewest changed facts of the reference (``generation.facts``), then the score."""
    best: dict[tuple[str, ...], Candidate] = {}
    for c in sorted(candidates, key=lambda c: (c.score, c.text)):
        best.setdefault(tuple(comparable_words(c.text)), c)
    points = list(best.values())  # best first
    if not points:
        return [], 1
    dist = distance_matrix([reference, *(c.text for c in points)])
    clustering = k_medoids(dist, options.clusters)
    if options.keep_facts:  # fewest changed facts first, then the score (generation.facts)
        scores: list = [(0, 0.0), *((len(fact_changes(reference, c.text)), c.score) for c in points)]
    else:
        scores = [0.0, *(c.score for c in points)]
    picked = pick_per_cluster(clustering, scores)[: options.keep]
    outputs = []
    for rank, (i, cluster) in enumerate(picked, 1):
        c = points[i - 1]
        output = {
            "text": c.text,
            "score": round(c.score, SCORE_DIGITS),
            "rank": rank,
            "cluster": cluster,
            "banned": c.banned,
        }
        if c.backward_nll is not None:  # as beam search's outputs with a backward model
            output["backward_nll"] = round(c.backward_nll, SCORE_DIGITS)
        outputs.append(output)
    return outputs, len(clustering.medoids)


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
    per_batch = options.inputs_per_batch(loaded.device.type)
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
                if not options.allow_non_words and english.text_non_words(text, ref):
                    counts["non_word"] += 1
                    continue
                score = -total / n
                if text not in by_text or score < by_text[text].score:
                    by_text[text] = Candidate(text=text, score=score, banned=banned)
            cands = list(by_text.values())
            if backward is not None and cands:
                for c, nll in zip(cands, backward_nll(backward, [c.text for c in cands], src)):
                    c.score += nll
                    c.backward_nll = nll
            counts["distinct"] = len(cands)
            cands = [c for c in cands if c.score <= options.max_nll]
            counts["under_max_nll"] = len(cands)
            outputs, counts["clusters"] = choose_outputs(ref, cands, options)
            results.append(DiverseResult(source=src, reference=ref, outputs=outputs, counts=counts))
    return results
