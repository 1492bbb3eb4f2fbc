"""Vectorised beam search with Dynamic Beam Allocation (Post & Vilar 2018) and exact word-level bans.

Every hypothesis' state lives in tensors over (batch x beam): tokens, score, positive-constraint progress
(``met`` [H, T] over constraint elements, ``cur`` the element last met inside an unfinished phrase),
negative state (see ``banned.py``). Per step, with no Python loop over hypotheses or candidates:

1. one decoder step with the key/value cache (the encoder ran once; ``step.py``'s interface: the fast
   step, Hugging Face's seq2seq step or a decoder-only model's, one rule picks it), log-softmax, the
   model's own logits processors (exactly as ``generate`` applies them; ``hf_compat``), then the
   word-level ban mask (``BeamSearch.apply_bans``); EOS is forbidden while positive constraints are unmet;
2. ``candidates``: the top 2K over (beam x vocab) of each sentence (Hugging Face's set) plus, with
   constraints, each hypothesis' best token, its best word-boundary token and every unmet constraint's
   next token; duplicates removed;
3. ``constraint_states``: each candidate's new constraint state; its bank is the number of constraint
   elements met;
4. ``allocate_banks``, ``select_running``: beam slots shared across banks round-robin (the best of
   every bank, most constraints first, then the second best, ...) - with no constraints this is exactly
   score order, hence Hugging Face's beam search;
5. ``add_finished``: finished hypotheses handled as in ``transformers`` (scores normalised by
   length ** length_penalty), accepted only when every positive constraint is met; ``advance`` and
   ``update_stopping`` then move the running beams on.

When a sentence is done (``stop``): Hugging Face's heuristic - no running beam, its score over the current
length, beats the worst finished hypothesis kept - read over all K finished slots ("beam": exactly
``generate``'s rule) or over the n-best the caller gets ("nbest"). The default, "auto", reads the n-best
for sentences with positive constraints and all K for the others. Why: a finished hypothesis must meet
every positive constraint, and DBA gives the bank that meets them only its share of the beam, so filling
all K slots kept such a sentence searching long after its n-best were found - on the demo model (beam 5,
one best, 8 of the sentence's own words) 1.7x the sentence-steps of the unconstrained search, some
sentences to ``max_length``, for hypotheses nobody gets. Without positive constraints "beam" costs
almost nothing (577 against 574 sentence-steps there) and keeps ``generate``'s outputs exactly.

On a GPU, steps 1 (after the model and its processors) to 5 are captured once per batch as a CUDA graph
and replayed (``cuda_graphs.py``): they are many tiny kernels, and launching them cost more than running them.
On the CPU, step 2's argmax and top-k come from block maxima (``row_blocks.py``), exactly as torch's.

The constraints' own state lives beside this module: required phrases in ``positive.py``, banned and
BOS-anchored ones in ``banned.py``; the options of a search in ``generation.decode_options.DecodeOptions``.

Why one module of some 600 lines: :func:`beam_search` (the loop that steps the model) and
:class:`BeamSearch` (the state and the five stages above) are one algorithm seen from two sides. The loop
decides what a CUDA graph captures (``BeamSearch.step`` on tensors updated in place), and moves the model's
cache and inputs by what the stages chose (``src_sel``, the rows ``keep`` returns); split apart, neither
half can be read without the other open.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..decode_options import DecodeOptions
from . import cuda_graphs
from .banned import NegativeState, NegativeTables
from .hf_compat import FastProcessors, eos_count, generation_config_for, logits_processors, pad_token_id
from .positive import PositiveState, PositiveTables
from .row_blocks import RowBlocks
from .step import decoder_step
from .stop_check import StopCheck, raise_if_stopped

NEG = -1.0e9


# (inference mode, not only no_grad: a step is hundreds of tiny tensor operations, and without autograd's
# version counters and view tracking each costs about a microsecond less - 5% of a decode of the demo model.
# Tensors made here are inference tensors: the search's die with the call, and the fused weight copies
# fast_step caches are only ever read)
@torch.inference_mode()
def beam_search(
    loaded,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    options: DecodeOptions,
    *,
    pos: PositiveTables | None = None,
    neg: NegativeTables | None = None,
    stats: dict | None = None,
    should_stop: StopCheck | None = None,
) -> list[list[tuple]]:
    """Returns per sentence a list (best first) of (token ids without the start token, raw score, normalised
    score); at most ``options.beam`` entries, only hypotheses satisfying every constraint. ``stats["steps"]``,
    if given, grows by the decoder steps run (so a benchmark can tell cost per step from output length), and
    ``stats["sentence_steps"]`` by the sentences each of those steps decoded.

    ``options.stop`` ("auto", "beam" or "nbest"; see the module's docstring) and ``options.nbest`` (the
    hypotheses the caller will use) say when a sentence's search ends.

    ``options.shrink`` (default: on where no CUDA graph is replayed) drops a sentence from the model's inputs,
    its cache and the search state once its finished hypotheses can no longer change (as CTranslate2 drops
    finished sentences): the rest of the batch then costs what its unfinished sentences cost, not what the
    whole batch did. Outputs are those of the full batch; the model's arithmetic on fewer rows may differ
    in the last bits (a matrix product's blocking depends on its row count), as it does in ``generate``
    for a sentence decoded in another batch.

    ``options.cuda_graph`` (default: on when the model is on a GPU) replays each step's bookkeeping -
    everything after the model's step and its logits processors - as one captured CUDA graph. On a GPU those
    are a hundred-odd tiny kernels whose launches cost far more than their work, and more with constraints
    than without: replayed, constraints cost almost nothing per step. The graph is captured at the second
    step of each call (the first runs eagerly and builds the per-layout tables), the last step runs eagerly,
    and a capture that fails falls back to eager steps (recorded in ``cuda_graphs.GRAPH_FAILURES``).

    ``options.fast_step`` (default: on CPU; ``PARAFORGE_FAST_STEP=0`` / ``1`` in the environment: off / on
    on any device) runs the decoder's steps with ``fast_step.FastStep`` where the model is one it
    reproduces (Marian, BART): the same arithmetic as Hugging Face's decoder as plain functional calls on a
    static key/value cache, without its per-module and cache-class overhead. Other models (T5, ...) run
    Hugging Face's decoder. ``options.int8``: the fast step's products on dynamic int8 weights (CPU, Marian
    and BART only; a ValueError elsewhere): about half their time, outputs no longer Hugging Face's.

    ``should_stop`` (``stop_check``): asked before every decoder step; True raises ``DecodingStopped`` (a
    cancelled job's batch ends within a step instead of at its end). None: never asked."""
    model = loaded.model
    dev = loaded.device
    beam, max_length, early_stopping = options.beam, options.max_length, options.early_stopping
    gen_cfg = generation_config_for(model, beam, max_length, options.length_penalty, early_stopping, dev)
    processors = FastProcessors(logits_processors(model, gen_cfg, input_ids))
    use_graph = cuda_graphs.supported(dev) if options.cuda_graph is None else options.cuda_graph
    if use_graph and not cuda_graphs.supported(dev):
        raise ValueError("cuda_graph needs the model on a CUDA device")
    shrink = not use_graph if options.shrink is None else options.shrink
    if shrink and use_graph:
        raise ValueError("shrink and cuda_graph exclude each other (a graph replays fixed shapes)")
    search = BeamSearch(loaded, gen_cfg, input_ids.shape[0], options, pos=pos, neg=neg)
    # the model's step (step.py: the fast step, Hugging Face's seq2seq step or a decoder-only model's)
    step = decoder_step(loaded, input_ids, fast=options.fast_step, int8=options.int8)
    state = step.start(step.encode(input_ids, attention_mask), attention_mask, max_length)
    # the first step once per sentence: every beam of a sentence starts from the same token, so its
    # logits and cache are copied K times (the fast step keeps cross-attention per sentence: only its
    # self-attention is copied)
    first_logits = state.step(search.seqs[::beam, 0], 0)
    state.repeat(beam)
    first_logp = torch.log_softmax(first_logits.float(), dim=-1).repeat_interleave(beam, dim=0)
    cur_len = 1
    sentence_steps = 0  # sentences decoded, summed over steps (less than B x steps when the batch shrinks)
    graph = logp_buf = None
    while True:
        raise_if_stopped(should_stop, "beam search")
        if first_logp is not None:
            logp, first_logp = first_logp, None
        else:
            logp = torch.log_softmax(state.step(search.seqs[:, cur_len - 1], cur_len - 1).float(), dim=-1)
        if processors.steps:
            logp = processors(state.history(search.seqs, cur_len), logp)
        last_step = cur_len + 1 >= max_length
        if graph is None and use_graph and cur_len >= 2 and not last_step and not cuda_graphs.GRAPH_FAILURES:
            logp_buf = logp.clone()
            graph = cuda_graphs.capture(lambda: search.step(logp_buf, None, False))  # noqa: B023 - captured at once
        if graph is not None and not last_step:
            logp_buf.copy_(logp)
            graph.replay()
        else:
            search.step(logp, cur_len, last_step)
        sentence_steps += search.B
        cur_len += 1
        if last_step or cur_len >= max_length:
            break
        if not bool(search.unsat_heur.any()):
            break
        if early_stopping is True and bool(search.slots_full().all()):
            break
        rows = None
        if shrink:
            done = search.done_sentences()
            if bool(done.any()):  # (dropping at every chance measured no slower than waiting for several)
                rows = search.keep(torch.nonzero(~done)[:, 0])
        if rows is None:
            state.reorder(search.src_sel)
        else:  # (rows are sentence-major, K per kept sentence: every K-th names its sentence)
            state.select(search.src_sel, rows[::beam] // beam)
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + cur_len - 1
        stats["sentence_steps"] = stats.get("sentence_steps", 0) + sentence_steps
    return search.finished()


@dataclass
class Candidates:
    """One step's candidates: N per sentence (the top 2K, plus K x E extras with constraints)."""

    score: torch.Tensor  # [B, N] accumulated log-prob; -inf for a duplicate or an invalid extra
    beam: torch.Tensor  # [B, N] the hypothesis extended, 0..K-1 within its sentence
    token: torch.Tensor  # [B, N] the token appended
    source: torch.Tensor  # [B * N] the row of the hypothesis extended, 0..H-1
    finishes: torch.Tensor  # [B, N] bool: the token is EOS, or this is the last step
    finite: torch.Tensor  # [B, N] bool: a real score (neither banned nor a dead beam's)

    @property
    def n(self) -> int:
        return self.score.shape[1]


@dataclass
class CandidateConstraints:
    """Each candidate's constraint state after its token (rows [B * N], sentence-major)."""

    may_end: torch.Tensor  # [B, N] bool: finishing here satisfies every constraint
    bank: torch.Tensor | None = None  # [B, N] positive constraint elements met
    met: torch.Tensor | None = None  # [B * N, T] positive elements met (PositiveState.met)
    cur: torch.Tensor | None = None  # [B * N] element last met inside an unfinished phrase
    done: torch.Tensor | None = None  # [B * N] bool: all positive elements met
    neg_node: torch.Tensor | None = None  # [B * N, ...] negative state (NegativeState.advance)
    neg_progress: torch.Tensor | None = None


class BeamSearch:
    """The search state of one call, as tensors over H = B sentences x K beams updated in place by
    :meth:`step` (a captured CUDA graph reads and writes these very tensors), and the step's stages."""

    def __init__(
        self,
        loaded,
        gen_cfg,
        batch_size: int,
        options: DecodeOptions,
        *,
        pos: PositiveTables | None,
        neg: NegativeTables | None,
    ) -> None:
        dev = self.dev = loaded.device
        B, K = self.B, self.K = batch_size, options.beam
        max_length, length_penalty = options.max_length, options.length_penalty
        self.V = loaded.vocab.size
        self.H = H = B * K
        self.eos = eos = loaded.vocab.eos_id
        self.max_length = max_length
        self.length_penalty = length_penalty
        self.early_stopping = early_stopping = options.early_stopping
        self.pos = pos
        # every token that ends an output (a chat model's end-of-turn ones too), and generate's candidate
        # count: max(2, 1 + its EOS tokens) x K, so that K running beams remain if the best all end
        eos_all = loaded.vocab.eos_ids or (eos,)
        self.more_eos = torch.tensor(eos_all[1:], dtype=torch.long, device=dev) if len(eos_all) > 1 else None
        self.n_top = max(2, 1 + eos_count(gen_cfg)) * K
        start = gen_cfg.decoder_start_token_id
        if start is None:
            start = getattr(loaded.model.config, "decoder_start_token_id", None)
        if isinstance(start, (list, tuple)):
            start = start[0]
        if start is None:  # a decoder-only model: the column before the continuation, never returned
            start = eos
        boundary = loaded.vocab.boundary.to(dev)
        self.sentence_id = torch.arange(B, device=dev)  # [B] index in the call's batch
        hyp_sentence = self.sentence_id.repeat_interleave(K)  # [H] each hypothesis' sentence (tables' row)
        constrained_pos = pos is not None and bool(pos.valid.any())
        constrained_neg = neg is not None and not neg.empty
        self.constrained = constrained_pos or constrained_neg
        self.ps = PositiveState(pos, hyp_sentence, boundary) if constrained_pos else None
        self.ns = None
        if constrained_neg:
            self.ns = NegativeState(neg, hyp_sentence, boundary, eos)
            self.ns.set_token_info(loaded.vocab, dev)

        pad = pad_token_id(gen_cfg)
        self.seqs = torch.full((H, max_length), pad if pad is not None else eos, dtype=torch.long, device=dev)
        self.seqs[:, 0] = start  # [H, L] running hypotheses
        self.run_scores = torch.zeros(B, K, device=dev)  # [B, K]
        self.run_scores[:, 1:] = NEG  # one live beam at the start: the others would repeat it
        self.fin_seqs = self.seqs.view(B, K, max_length).clone()  # [B, K, L] finished ones
        self.fin_scores = torch.full((B, K), NEG, device=dev)  # length-normalised
        self.fin_raw = torch.full((B, K), NEG, device=dev)  # sum of log-probs
        self.fin_len = torch.zeros(B, K, dtype=torch.long, device=dev)
        self.fin_ok = torch.zeros(B, K, dtype=torch.bool, device=dev)  # returned
        self.is_fin = torch.zeros(B, K, dtype=torch.bool, device=dev)  # slot filled
        self.unsat_heur = torch.ones(B, 1, dtype=torch.bool, device=dev)  # sentence still searching
        self.stop_slot = _stop_slots(  # [B, 1] the slot read
            options.stop, K, options.nbest, pos.valid.any(1) if constrained_pos else None, B, dev
        )
        self.cur_t = torch.ones((), dtype=torch.long, device=dev)  # cur_len on the device, for the graph
        self.src_sel = torch.zeros(H, dtype=torch.long, device=dev)  # each new hypothesis' source row (cache)
        # 1 / len ** length_penalty per length, as float32 (what a GPU divides by a Python number with)
        self.inv_len = 1.0 / torch.tensor([max(n, 1) ** length_penalty for n in range(max_length + 1)], device=dev)
        self.never = early_stopping == "never" and length_penalty > 0.0
        self.boundary = boundary  # [V] bool
        self.boundary_bias = torch.zeros(self.V, device=dev).masked_fill(~boundary, float("-inf"))  # [V] 0 / -inf
        # the CPU's exact argmax / top-k through block maxima (a GPU's own kernels are fast: not there)
        self._blocks = RowBlocks(self.V, dev) if dev.type == "cpu" else None
        self.hyp_in_beam = torch.arange(H, device=dev)[:, None] % K  # [H, 1]
        self.sentence_base = torch.arange(B, device=dev)[:, None]  # [B, 1] row position
        self._store: dict[str, torch.Tensor] | None = None  # finished slots of every sentence, once any is dropped

    def step(self, logp: torch.Tensor, cur_len: int | None, last_step: bool) -> None:
        """One step's bookkeeping on ``logp`` [H, V] (in place). ``cur_len``: the Python length, or None
        while capturing (then only ``cur_t`` says it)."""
        self.apply_bans(logp)
        cand = self.candidates(logp, last_step)
        cons = self.constraint_states(cand, last_step)
        order = self.allocate_banks(cand, cons)
        ranked_score = cand.score.gather(1, order)
        ranked_finishes = cand.finishes.gather(1, order)
        ranked_finite = cand.finite.gather(1, order)
        chosen, chosen_scores = self.select_running(order, ranked_score, ranked_finishes, ranked_finite)
        self.add_finished(cand, cons, order, ranked_score, ranked_finishes, ranked_finite, cur_len)
        self.advance(cand, cons, chosen, chosen_scores)
        self.update_stopping(cur_len)

    def apply_bans(self, logp: torch.Tensor) -> None:
        """Banned tokens and, while positive constraints are unmet, EOS to -inf in ``logp`` [H, V], in
        place (no [H, V] mask per step). EOS is a boundary: a pending one counts as met."""
        if self.ns is not None:
            self.ns.apply_bans(logp, float("-inf"))
        if self.ps is not None:
            logp[:, self.eos].masked_fill_(~self.ps.done, float("-inf"))
            if self.more_eos is not None:
                logp[:, self.more_eos] = logp[:, self.more_eos].masked_fill(~self.ps.done[:, None], float("-inf"))

    def candidates(self, logp: torch.Tensor, last_step: bool) -> Candidates:
        """The top 2K of each sentence's (beam x vocab) scores (Hugging Face's set); with constraints also
        each hypothesis' best token, its best word-boundary token and every unmet constraint's next token
        (E extras per hypothesis), each (hypothesis, token) pair once."""
        B, K, V = self.B, self.K, self.V
        blk = self._blocks
        run = self.run_scores.view(self.H, 1)
        top = None
        if blk is not None:  # (CPU: exactly what the [H, V] passes below give, from the blocks' maxima)
            bmax = blk.maxima(logp) if self.constrained or logp.numel() >= blk.TOPK_MIN else None
            if logp.numel() >= blk.TOPK_MIN:
                top = blk.group_topk(logp, bmax, self.run_scores, self.n_top)
        if top is None:
            acc = logp + run  # [H, V]
            top = torch.topk(acc.view(B, K * V), self.n_top, dim=1)  # [B, 2K] (more with several EOS)
        top_s, top_i = top
        if self.constrained:
            if blk is not None:
                best = blk.argmax(logp, bmax)
                best_b = best.clone()
                # a row's best token is its best boundary token when it is one (the first maximum of the row
                # is then the first maximum among boundary tokens); the other rows are searched again
                again = torch.nonzero(~self.boundary[best])[:, 0]
                if again.numel():
                    best_b[again] = blk.argmax(logp.index_select(0, again) + self.boundary_bias)
                extra_tok = [best[:, None], best_b[:, None]]
            else:
                # (adding 0 / -inf is the masked_fill it replaces bit for bit, in one [H, V] pass instead
                # of a copy and a fill)
                extra_tok = [logp.argmax(1)[:, None], (logp + self.boundary_bias).argmax(1)[:, None]]
            if self.ps is not None:
                extra_tok.append(self.ps.next_tokens())
            et = torch.cat(extra_tok, 1)  # [H, E]
            valid_e = et >= 0
            et_c = et.clamp(min=0)
            # (logp + run gathered: acc's very sums, one per extra instead of one per (hypothesis, token))
            es = (logp.gather(1, et_c) + run).masked_fill(~valid_e, float("-inf"))
            ei = (self.hyp_in_beam * V + et_c).view(B, -1)  # [B, K * E]
            cand_i = torch.cat([top_i, ei], 1)
            cand_s = torch.cat([top_s, es.view(B, -1)], 1)
            cand_s = cand_s.masked_fill(self._duplicates(top_i, ei, valid_e), float("-inf"))
        else:
            cand_i, cand_s = top_i, top_s
        c_beam = cand_i // V
        c_tok = cand_i % V
        return Candidates(
            score=cand_s,
            beam=c_beam,
            token=c_tok,
            source=(self.sentence_base * K + c_beam).view(-1),
            finishes=self.is_eos(c_tok) | last_step,
            finite=torch.isfinite(cand_s) & (cand_s > NEG / 2),
        )

    def is_eos(self, tok: torch.Tensor) -> torch.Tensor:
        """Bool of ``tok``'s shape: the token ends an output."""
        hit = tok == self.eos
        return hit if self.more_eos is None else hit | torch.isin(tok, self.more_eos)

    def _duplicates(self, top_i: torch.Tensor, extra_i: torch.Tensor, valid_e: torch.Tensor) -> torch.Tensor:
        """[B, N] bool: every copy of a (hypothesis, token) pair but the first (copies have one score);
        invalid extras get keys of their own (K * V + position) so that they never hide a real copy."""
        B, K, V = self.B, self.K, self.V
        key = torch.cat(
            [
                top_i,
                torch.where(
                    valid_e,
                    extra_i.view_as(valid_e),
                    K * V + torch.arange(valid_e.numel(), device=self.dev).view_as(valid_e),
                ).view(B, -1),
            ],
            1,
        )
        srt, srt_o = torch.sort(key, dim=1, stable=True)
        dup = torch.zeros_like(srt, dtype=torch.bool)
        dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
        return torch.zeros_like(dup).scatter(1, srt_o, dup)

    def constraint_states(self, cand: Candidates, last_step: bool) -> CandidateConstraints:
        """Each candidate's constraint state after its token; its bank is the positive elements it met."""
        B, N = self.B, cand.n
        if not self.constrained:
            return CandidateConstraints(may_end=torch.ones(B, N, dtype=torch.bool, device=self.dev))
        cand_sentence = self.sentence_id[:, None].expand(B, N).reshape(-1)  # [B * N] tables' rows
        flat_tok = cand.token.view(-1)
        may_end = torch.ones(B * N, dtype=torch.bool, device=self.dev)
        out = CandidateConstraints(may_end=may_end)
        if self.ps is not None:
            out.met, out.cur = self.ps.advance(cand.source, flat_tok, cand_sentence)
            bank = out.met.sum(1)
            out.done = self.ps.finish_ok(out.met, out.cur, cand_sentence, bank)
            may_end &= out.done
            out.bank = bank.view(B, N)
        if self.ns is not None:
            out.neg_node, out.neg_progress = self.ns.advance(cand.source, flat_tok, cand_sentence)
            if last_step:
                may_end &= ~(self.ns.ends_badly(out.neg_node, out.neg_progress, cand_sentence) & ~self.is_eos(flat_tok))
        out.may_end = may_end.view(B, N)
        return out

    def allocate_banks(self, cand: Candidates, cons: CandidateConstraints) -> torch.Tensor:
        """[B, N] candidate positions in the order beam slots are filled: round-robin over banks by rank
        within the bank (the best of every bank, most constraints met first, then the second best, ...).
        With one bank this is plain score order; without constraints the top-2K order as it is."""
        B, N = self.B, cand.n
        if not self.constrained:
            return torch.arange(N, device=self.dev).expand(B, N)
        s_sorted, s_ord = torch.sort(cand.score, dim=1, descending=True, stable=True)
        if self.ps is None:  # non-finite scores sort last anyway
            return s_ord
        b_sorted = cons.bank.gather(1, s_ord)
        n_banks = int(self.pos.T + 1)
        # rank within its bank: sorted by (bank, position) each bank is a run; rank = position in the run
        pos = torch.arange(N, device=self.dev)
        g_sorted, g_ord = torch.sort(b_sorted * N + pos, dim=1)  # (distinct keys)
        start = torch.searchsorted(g_sorted, g_sorted - g_sorted % N)  # each run's first position
        rank = torch.empty_like(g_ord).scatter_(1, g_ord, pos - start)  # [B, N]
        fin_sorted = torch.isfinite(s_sorted) & (s_sorted > NEG / 2)
        key = rank * n_banks + (n_banks - 1 - b_sorted)
        key = torch.where(fin_sorted, key, key + 10**9 + rank)
        _, k_ord = torch.sort(key, dim=1, stable=True)
        return s_ord.gather(1, k_ord)

    def select_running(
        self,
        order: torch.Tensor,
        ranked_score: torch.Tensor,
        ranked_finishes: torch.Tensor,
        ranked_finite: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The next running beams: the first K candidates in ``order`` that neither finish nor are dead.
        Returns their candidate positions [B, K] and scores [B, K] (a dead slot's far below NEG)."""
        N = order.shape[1]
        skip = ranked_finishes | ~ranked_finite
        run_key = torch.arange(N, device=self.dev)[None, :] + skip.long() * N
        sel = torch.topk(-run_key, self.K, dim=1)[1]  # positions in order
        chosen = order.gather(1, sel)
        scores = ranked_score.gather(1, sel) + skip.gather(1, sel).float() * NEG
        scores = torch.where(torch.isfinite(scores), scores, torch.full_like(scores, 2 * NEG))
        return chosen, scores

    def add_finished(
        self,
        cand: Candidates,
        cons: CandidateConstraints,
        order: torch.Tensor,
        ranked_score: torch.Tensor,
        ranked_finishes: torch.Tensor,
        ranked_finite: torch.Tensor,
        cur_len: int | None,
    ) -> None:
        """Merge the finishing candidates among the first K positions of ``order`` (only those can finish,
        so only their sequences are gathered) into the K finished slots, as ``transformers`` does: scores
        normalised by length ** length_penalty, none once a sentence is done; with constraints, only
        hypotheses that satisfy them are returned."""
        B, K, L = self.B, self.K, self.max_length
        first = order[:, :K]  # [B, K]
        first_score = ranked_score[:, :K]
        just = ranked_finishes[:, :K] & ranked_finite[:, :K] & cons.may_end.gather(1, first)
        norm = self._over_len(first_score, cur_len)  # generated tokens including the final one: cur_len
        full = self.slots_full() & (self.early_stopping is True)
        add = norm + full.float() * NEG + (~self.unsat_heur).float() * NEG + (~just).float() * NEG
        cand_seqs = self.seqs[cand.source.view(B, -1).gather(1, first).reshape(-1)].view(B, K, L)
        cand_seqs.scatter_(2, self.cur_t.view(1, 1, 1).expand(B, K, 1), cand.token.gather(1, first)[:, :, None])
        m_seqs = torch.cat([self.fin_seqs, cand_seqs], 1)  # [B, 2K, L]
        m_scores = torch.cat([self.fin_scores, add], 1)
        m_raw = torch.cat([self.fin_raw, first_score], 1)
        m_len = torch.cat([self.fin_len, self.cur_t.expand(B, K)], 1)
        m_ok = torch.cat([self.fin_ok, just & ~full & self.unsat_heur], 1)
        m_isf = torch.cat([self.is_fin, just], 1)
        keep = torch.topk(m_scores, K, dim=1)[1]  # [B, K]
        self.fin_seqs.copy_(m_seqs.gather(1, keep[:, :, None].expand(-1, -1, L)))
        self.fin_scores.copy_(m_scores.gather(1, keep))
        self.fin_raw.copy_(m_raw.gather(1, keep))
        self.fin_len.copy_(m_len.gather(1, keep))
        self.fin_ok.copy_(m_ok.gather(1, keep))
        self.is_fin.copy_(m_isf.gather(1, keep))

    def advance(
        self, cand: Candidates, cons: CandidateConstraints, chosen: torch.Tensor, chosen_scores: torch.Tensor
    ) -> None:
        """The chosen candidates [B, K] become the running hypotheses: sequences, constraint state, scores."""
        B, N, H = self.B, cand.n, self.H
        src_flat = cand.source.view(B, N).gather(1, chosen).view(-1)  # [H]
        tok_flat = cand.token.gather(1, chosen).view(-1)
        self.seqs.copy_(self.seqs[src_flat])
        self.seqs.scatter_(1, self.cur_t.view(1, 1).expand(H, 1), tok_flat[:, None])
        self.src_sel.copy_(src_flat)
        if self.constrained:
            flat_sel = (self.sentence_base * N + chosen).view(-1)
            if self.ps is not None:
                self.ps.met.copy_(cons.met[flat_sel])
                self.ps.cur.copy_(cons.cur[flat_sel])
                self.ps.done.copy_(cons.done[flat_sel])
            if self.ns is not None:
                self.ns.select(None, cons.neg_node[flat_sel], cons.neg_progress[flat_sel])
        self.run_scores.copy_(chosen_scores)

    def update_stopping(self, cur_len: int | None) -> None:
        """``transformers``' early-stopping heuristic: a sentence is done once no running beam can beat the
        worst finished one it keeps (best_len: the length just generated, or the maximum with ``"never"``),
        kept meaning the first ``stop_slot`` + 1 slots (slots are in score order, filled ones first while
        the sentence searches): all K, ``generate``'s rule, or its n-best (``stop``)."""
        lp = self.length_penalty
        best_run = self.run_scores.max(1, keepdim=True)[0]
        best_run = best_run / ((self.max_length - 1) ** lp) if self.never else self._over_len(best_run, cur_len)
        worst_kept = torch.where(
            self.slots_full(), self.fin_scores.gather(1, self.stop_slot), torch.full_like(best_run, NEG)
        )
        self.unsat_heur.logical_and_(best_run > worst_kept)
        self.cur_t.add_(1)

    def slots_full(self) -> torch.Tensor:
        """[B, 1] bool: every finished slot the sentence's stopping rule reads is filled."""
        return self.is_fin.gather(1, self.stop_slot)

    _FINISHED = ("fin_seqs", "fin_scores", "fin_raw", "fin_len", "fin_ok", "is_fin")

    def done_sentences(self) -> torch.Tensor:
        """[B] bool: sentences whose finished slots can no longer change (the stopping heuristic says done,
        or, with ``early_stopping=True``, every slot it reads is filled): their rows only cost time from now
        on."""
        done = ~self.unsat_heur[:, 0]
        if self.early_stopping is True:
            done |= self.slots_full()[:, 0]
        return done

    def keep(self, keep: torch.Tensor) -> torch.Tensor:
        """Drop every sentence but ``keep`` ([B'] row positions, ascending) from the search, as CTranslate2
        drops finished ones: the running state is compacted to B' x K rows and the dropped sentences'
        finished slots stay in a store that :meth:`finished` reads. Only for sentences in
        :meth:`done_sentences` (their slots are final: ``add_finished`` adds nothing to a done sentence).
        The tables stay as they are (rows are looked up by ``sentence_id``). Returns the kept hypotheses'
        rows [B' x K] in the old layout: the caller moves the model's cache and inputs along."""
        self._flush()
        K = self.K
        rows = (keep[:, None] * K + torch.arange(K, device=self.dev)).view(-1)
        self.B, self.H = len(keep), len(keep) * K
        self.sentence_id = self.sentence_id[keep]
        self.seqs = self.seqs[rows]
        self.src_sel = self.src_sel[rows]
        for name in ("run_scores", "unsat_heur", "stop_slot") + self._FINISHED:
            setattr(self, name, getattr(self, name)[keep])
        self.hyp_in_beam = torch.arange(self.H, device=self.dev)[:, None] % K
        self.sentence_base = torch.arange(self.B, device=self.dev)[:, None]
        hyp_sentence = self.sentence_id.repeat_interleave(K)
        if self.ps is not None:
            self.ps.keep_rows(rows, hyp_sentence)
        if self.ns is not None:
            self.ns.keep_rows(rows, hyp_sentence)
        return rows

    def _flush(self) -> None:
        """Copy the current sentences' finished slots into the store (made at the first drop: full size)."""
        if self._store is None:
            self._store = {k: getattr(self, k).clone() for k in self._FINISHED}
            return
        for k in self._FINISHED:
            self._store[k][self.sentence_id] = getattr(self, k)

    def _over_len(self, x: torch.Tensor, cur_len: int | None) -> torch.Tensor:
        """x / gen_len ** length_penalty: with the Python number when there is one (eager: exactly as
        ``transformers``), else with the device's table (the graph), bit for bit what a GPU computes."""
        # (index_select, not inv_len[cur_t]: indexing with a 0-dim tensor reads it on the host)
        if cur_len is not None:
            return x / (cur_len**self.length_penalty)
        return x * self.inv_len.index_select(0, self.cur_t.view(1))

    def finished(self) -> list[list[tuple[list[int], float, float]]]:
        """Per sentence its returned hypotheses, best first: (token ids after the start token, raw score,
        normalised score). Read to the host in one transfer (element by element, each read would wait)."""
        if self._store is not None:
            self._flush()
            fin = self._store
        else:
            fin = {k: getattr(self, k) for k in self._FINISHED}
        ok, scores, raw, lens, fseqs = (
            fin[k].tolist() for k in ("fin_ok", "fin_scores", "fin_raw", "fin_len", "fin_seqs")
        )
        results = []
        for b in range(len(ok)):
            rows = []
            for k in range(self.K):
                if not ok[b][k] or scores[b][k] <= NEG / 2:
                    continue
                rows.append((fseqs[b][k][1 : 1 + lens[b][k]], raw[b][k], scores[b][k]))
            results.append(rows)
        return results


def _stop_slots(stop: str, beam: int, nbest: int, positive: torch.Tensor | None, B: int, dev) -> torch.Tensor:
    """[B, 1] per sentence the finished slot whose score ends its search (``stop``; slots 0..K-1 are in
    score order): K - 1 under "beam", n - 1 under "nbest", and under "auto" n - 1 where the sentence has
    positive constraints (``positive`` [B] bool, None for none)."""
    slots = torch.full((B, 1), beam - 1, dtype=torch.long, device=dev)
    if stop == "nbest":
        slots.fill_(nbest - 1)
    elif stop == "auto" and positive is not None:
        slots.masked_fill_(positive[:, None], nbest - 1)
    return slots
