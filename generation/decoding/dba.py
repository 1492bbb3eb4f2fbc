"""Vectorised beam search with Dynamic Beam Allocation (Post & Vilar 2018) and exact word-level bans.

Every hypothesis' state lives in tensors over (batch x beam): tokens, score, positive-constraint progress
(``met`` [H, T] over constraint elements, ``cur`` the element last met inside an unfinished phrase),
negative state (see ``banned.py``). Per step, with no Python loop over hypotheses or candidates:

1. one decoder step with the key/value cache (the encoder ran once), log-softmax, the model's own logits
   processors (exactly as ``generate`` applies them), then the word-level ban mask; EOS is forbidden
   while positive constraints are unmet;
2. candidates: the top 2K over (beam x vocab) of each sentence (Hugging Face's set) plus, with
   constraints, each hypothesis' best token, its best word-boundary token and every unmet constraint's
   next token; duplicates removed;
3. each candidate's new constraint state; its bank is the number of constraint elements met;
4. beam slots shared across banks round-robin (the best of every bank, most constraints first, then the
   second best, ...) - with no constraints this is exactly score order, hence Hugging Face's beam search;
5. finished hypotheses handled as in ``transformers`` (scores normalised by length ** length_penalty),
   accepted only when every positive constraint is met.

On a GPU, steps 1 (after the model and its processors) to 5 are captured once per batch as a CUDA graph
and replayed: they are many tiny kernels, and launching them cost more than running them.

A positive phrase is the token sequence of its words with the leading-space marker followed by a
*boundary element* (a token starting with a non-word character, or EOS / the end of the output): a phrase
started must continue; otherwise its progress is undone - so a met phrase is always a run of whole words.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

BOUNDARY = -1
PAD = -2
NEG = -1.0e9


@dataclass
class PositiveTables:
    C: torch.Tensor       # [B, T] token id, BOUNDARY, or PAD
    first: torch.Tensor   # [B, T] bool
    last: torch.Tensor    # [B, T] bool
    pstart: torch.Tensor  # [B, T] long
    valid: torch.Tensor   # [B, T] bool

    @property
    def T(self):
        return self.C.shape[1]


def build_positive_tables(batch: list[list[list[int]]], device) -> PositiveTables:
    """``batch[b]`` = token-id sequences of the required phrases of sentence b. Rows are built as lists and
    moved to the device once per table (element-wise tensor writes cost more than a GPU's decoding)."""
    B = len(batch)
    T = max(1, max((sum(len(p) + 1 for p in phrases) for phrases in batch), default=0))
    C = [[PAD] * T for _ in range(B)]
    first = [[False] * T for _ in range(B)]
    last = [[False] * T for _ in range(B)]
    pstart = [[0] * T for _ in range(B)]
    for b, phrases in enumerate(batch):
        i = 0
        for p in phrases:
            n = len(p) + 1
            C[b][i:i + n] = list(p) + [BOUNDARY]
            first[b][i] = True
            last[b][i + n - 1] = True
            pstart[b][i:i + n] = [i] * n
            i += n
    C = torch.tensor(C, dtype=torch.long, device=device)
    return PositiveTables(C, torch.tensor(first, dtype=torch.bool, device=device),
                          torch.tensor(last, dtype=torch.bool, device=device),
                          torch.tensor(pstart, dtype=torch.long, device=device), C != PAD)


class PositiveState:
    def __init__(self, tables: PositiveTables, bidx: torch.Tensor, boundary: torch.Tensor):
        self.t = tables
        self.bidx = bidx
        self.boundary = boundary
        H = len(bidx)
        self.met = torch.zeros(H, tables.T, dtype=torch.bool, device=bidx.device)
        self.cur = torch.full((H,), -1, dtype=torch.long, device=bidx.device)
        self.idx = torch.arange(tables.T, device=bidx.device)
        # the token that starts each phrase (PAD elsewhere): one comparison finds the phrases a token starts
        self.first_tok = torch.where(tables.first, tables.C, torch.full_like(tables.C, PAD))
        self.n_valid = tables.valid.sum(1)
        self.token_cols = torch.nonzero((tables.C >= 0).any(0))[:, 0]
        self._by_len: dict[int, dict[str, torch.Tensor]] = {}
        self.done = self.finish_ok(self.met, self.cur, bidx)

    def advance(self, src, tok, bidx):
        t = self.t
        met = self.met[src]  # (advanced indexing: a copy)
        cur = self.cur[src]
        idx = self.idx
        in_prog = cur >= 0
        nxt = (cur + 1).clamp(max=t.T - 1)
        nxt_tok = t.C[bidx, nxt]
        match = in_prog & ((nxt_tok == tok) | ((nxt_tok == BOUNDARY) & self.boundary[tok]))
        undo = in_prog & ~match
        ps = t.pstart[bidx, cur.clamp(min=0)]
        met &= ~(undo[:, None] & (idx >= ps[:, None]) & (idx <= cur[:, None]))
        met |= match[:, None] & (idx == nxt[:, None])
        is_last = t.last[bidx, nxt]
        new_cur = nxt.masked_fill(~match | is_last, -1)
        starts = (self._rows(bidx)["first_tok"] == tok[:, None]) & ~met
        any_s = starts.any(1) & (~match | is_last)
        j = starts.to(torch.int8).argmax(1)
        met |= any_s[:, None] & (idx == j[:, None])
        new_cur = torch.where(any_s, j, new_cur)
        return met, new_cur

    def finish_ok(self, met, cur, bidx, n_met=None):
        """All elements met, counting a pending boundary as met (the output ends there). ``n_met``: the
        rows' counts of met elements, if known. (For the current hypotheses this is ``self.done``, kept
        from the step that chose them: EOS, a boundary, may end a hypothesis exactly when this holds.)"""
        t = self.t
        n = self._rows(bidx)["n_valid"] - (met.sum(1) if n_met is None else n_met)
        nxt = (cur + 1).clamp(max=t.T - 1)
        pending = (cur >= 0) & (t.C[bidx, nxt] == BOUNDARY) & ~met.gather(1, nxt[:, None])[:, 0]
        return (n == 0) | ((n == 1) & pending)

    def next_tokens(self):
        """[H, T'] token ids of every unmet constraint's next token (PAD where none), over the T' elements
        that are a token in some sentence of the batch (boundary elements are never a next token: with
        one-word phrases that halves the extra candidates)."""
        cols = self.token_cols
        rows = self._rows(self.bidx)
        want = torch.where((self.cur >= 0)[:, None], cols[None, :] == (self.cur + 1)[:, None],
                           rows["first_tokens"] & ~self.met[:, cols])
        return rows["C_tokens"].masked_fill(~want, PAD)

    def _rows(self, bidx):
        """The tables' rows for a row layout ``bidx``, gathered once (a decoder's layouts are
        sentence-major and fixed in length, so the length identifies the layout)."""
        rows = self._by_len.get(len(bidx))
        if rows is None:
            C_tokens = self.t.C[:, self.token_cols][bidx]
            rows = self._by_len[len(bidx)] = {
                "first_tok": self.first_tok[bidx], "n_valid": self.n_valid[bidx],
                "first_tokens": self.t.first[:, self.token_cols][bidx],
                "C_tokens": C_tokens.masked_fill(C_tokens < 0, PAD)}  # boundary elements are no next token
        return rows


def _processors(model, gen_cfg, input_ids):
    try:
        return model._get_logits_processor(generation_config=gen_cfg, input_ids_seq_length=1,
                                           encoder_input_ids=input_ids, device=input_ids.device,
                                           model_kwargs={})
    except TypeError:
        return model._get_logits_processor(generation_config=gen_cfg, input_ids_seq_length=1,
                                           encoder_input_ids=input_ids)


def generation_config_for(model, beam, max_length, length_penalty, early_stopping, device):
    import copy
    gc = copy.deepcopy(model.generation_config)
    gc.num_beams = beam
    gc.max_length = max_length
    gc.max_new_tokens = None
    gc.min_length = 0
    gc.min_new_tokens = None
    gc.length_penalty = length_penalty
    gc.early_stopping = early_stopping
    gc.do_sample = False
    gc.num_return_sequences = 1
    for k in ("temperature", "top_k", "top_p"):
        if hasattr(gc, k):
            setattr(gc, k, None)
    model._prepare_special_tokens(gc, device=device)
    return gc


_GRAPH_FAILURES: list[str] = []  # why a capture failed in this process (then steps run eagerly)


@torch.no_grad()
def beam_search(loaded, input_ids, attention_mask, *, beam, max_length, length_penalty=1.0, early_stopping=False,
                pos: PositiveTables | None = None, neg=None, stats: dict | None = None,
                cuda_graph: bool | None = None):
    """Returns per sentence a list (best first) of (token ids without the start token, raw score, normalised
    score); at most ``beam`` entries, only hypotheses satisfying every constraint. ``stats["steps"]``, if
    given, grows by the decoder steps run (so a benchmark can tell cost per step from output length).

    ``cuda_graph`` (default: on when the model is on a GPU) replays each step's bookkeeping - everything
    after the model's step and its logits processors - as one captured CUDA graph. On a GPU those are a
    hundred-odd tiny kernels whose launches cost far more than their work, and more with constraints than
    without: replayed, constraints cost almost nothing per step. The graph is captured at the second step
    of each call (the first runs eagerly and builds the per-layout tables), the last step runs eagerly,
    and a capture that fails falls back to eager steps (recorded in ``_GRAPH_FAILURES``)."""
    from .banned import NegativeState

    model = loaded.model
    dev = loaded.device
    B = input_ids.shape[0]
    K = beam
    V = loaded.vocab.size
    eos = loaded.vocab.eos_id
    H = B * K
    gc = generation_config_for(model, K, max_length, length_penalty, early_stopping, dev)
    procs = _processors(model, gc, input_ids)
    start = gc.decoder_start_token_id
    if start is None:
        start = model.config.decoder_start_token_id
    if isinstance(start, (list, tuple)):
        start = start[0]
    boundary = loaded.vocab.boundary.to(dev)
    bidx = torch.arange(B, device=dev).repeat_interleave(K)
    constrained_pos = pos is not None and bool(pos.valid.any())
    constrained_neg = neg is not None and not neg.empty
    constrained = constrained_pos or constrained_neg
    ps = PositiveState(pos, bidx, boundary) if constrained_pos else None
    ns = None
    if constrained_neg:
        ns = NegativeState(neg, bidx, boundary, eos)
        ns.set_token_info(loaded.vocab, dev)
    use_graph = _graphs_supported(dev) if cuda_graph is None else bool(cuda_graph)
    if use_graph and not _graphs_supported(dev):
        raise ValueError("cuda_graph needs the model on a CUDA device")

    enc = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(K, dim=0)
    am = attention_mask.repeat_interleave(K, dim=0)

    # the search state: tensors updated in place each step (a captured graph reads and writes these)
    seqs = torch.full((H, max_length), gc._pad_token_tensor.item() if gc._pad_token_tensor is not None else eos,
                      dtype=torch.long, device=dev)
    seqs[:, 0] = start
    run_scores = torch.zeros(B, K, device=dev)
    run_scores[:, 1:] = NEG
    fin_seqs = seqs.view(B, K, max_length).clone()
    fin_scores = torch.full((B, K), NEG, device=dev)
    fin_raw = torch.full((B, K), NEG, device=dev)
    fin_len = torch.zeros(B, K, dtype=torch.long, device=dev)
    fin_ok = torch.zeros(B, K, dtype=torch.bool, device=dev)
    is_fin = torch.zeros(B, K, dtype=torch.bool, device=dev)
    unsat_heur = torch.ones(B, 1, dtype=torch.bool, device=dev)
    cur_t = torch.ones((), dtype=torch.long, device=dev)   # cur_len on the device, for the graph
    src_sel = torch.zeros(H, dtype=torch.long, device=dev)  # each new hypothesis' source row (for the cache)
    # 1 / len ** length_penalty per length, as float32 (what a GPU divides by a Python number with)
    inv_len = 1.0 / torch.tensor([max(n, 1) ** length_penalty for n in range(max_length + 1)], device=dev)
    never = early_stopping == "never" and length_penalty > 0.0
    not_boundary = ~boundary
    hyp_in_beam = torch.arange(H, device=dev)[:, None] % K
    sentence_base = torch.arange(B, device=dev)[:, None]

    def over_len(x, cur_len):
        """x / gen_len ** length_penalty: with the Python number when there is one (eager: exactly as
        ``transformers``), else with the device's table (the graph), bit for bit what a GPU computes."""
        # (index_select, not inv_len[cur_t]: indexing with a 0-dim tensor reads it on the host)
        return x / (cur_len ** length_penalty) if cur_len is not None else x * inv_len.index_select(0, cur_t.view(1))

    def step(logp, cur_len, last_step):
        """One step's bookkeeping on ``logp`` [H, V] (in place). ``cur_len``: the Python length, or None
        while capturing (then only ``cur_t`` says it)."""
        if constrained:  # bans written in place: no [H, V] mask per step
            if ns is not None:
                ns.apply_bans(logp, float("-inf"))
            if ps is not None:  # EOS only once all are met (EOS is a boundary: a pending one counts)
                logp[:, eos].masked_fill_(~ps.done, float("-inf"))
        acc = logp + run_scores.view(H, 1)
        flat = acc.view(B, K * V)
        top_s, top_i = torch.topk(flat, 2 * K, dim=1)                   # [B, 2K]
        if constrained:
            extra_tok = [logp.argmax(1)[:, None],  # (acc's row order is logp's: one score added per row)
                         logp.masked_fill(not_boundary, float("-inf")).argmax(1)[:, None]]
            if ps is not None:
                extra_tok.append(ps.next_tokens())
            et = torch.cat(extra_tok, 1)                                # [H, E]
            valid_e = et >= 0
            et_c = et.clamp(min=0)
            es = acc.gather(1, et_c).masked_fill(~valid_e, float("-inf"))
            ei = (hyp_in_beam * V + et_c).view(B, -1)
            cand_i = torch.cat([top_i, ei], 1)
            cand_s = torch.cat([top_s, es.view(B, -1)], 1)
            # dedupe: keep the first copy of each (hyp, token) - copies of one pair have the same score;
            # invalid extras get keys of their own (K * V + position) so that they never hide a real copy
            key = torch.cat([top_i, torch.where(valid_e, ei.view_as(et),
                                                K * V + torch.arange(valid_e.numel(), device=dev).view_as(et))
                             .view(B, -1)], 1)
            srt, srt_o = torch.sort(key, dim=1, stable=True)
            dup = torch.zeros_like(srt, dtype=torch.bool)
            dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
            cand_s = cand_s.masked_fill(torch.zeros_like(dup).scatter(1, srt_o, dup), float("-inf"))
        else:
            cand_i, cand_s = top_i, top_s
        N = cand_i.shape[1]
        c_beam = cand_i // V
        c_tok = cand_i % V
        c_src = (sentence_base * K + c_beam).view(-1)
        c_b = sentence_base.expand(B, N).reshape(-1)
        flat_tok = c_tok.view(-1)
        hits = (c_tok == eos) | last_step
        finite = torch.isfinite(cand_s) & (cand_s > NEG / 2)
        if constrained:
            ok_end = torch.ones(B * N, dtype=torch.bool, device=dev)
            if ps is not None:
                c_met, c_cur = ps.advance(c_src, flat_tok, c_b)
                bank = c_met.sum(1)
                c_done = ps.finish_ok(c_met, c_cur, c_b, bank)
                ok_end &= c_done
                bank = bank.view(B, N)
            if ns is not None:
                c_node, c_g = ns.advance(c_src, flat_tok, c_b)
                if last_step:
                    ok_end &= ~(ns.ends_badly(c_node, c_g, c_b) & (flat_tok != eos))
            ok_end = ok_end.view(B, N)
            s_sorted, s_ord = torch.sort(cand_s, dim=1, descending=True, stable=True)
        if ps is None and constrained:  # one bank: plain score order (non-finite scores sort last anyway)
            order = s_ord
        elif constrained:
            # bank allocation: round-robin over banks by rank, banks with more met first
            b_sorted = bank.gather(1, s_ord)
            nb = int(pos.T + 1)
            oh = b_sorted[:, :, None] == torch.arange(nb, device=dev)   # (one_hot without its checks)
            rank = (oh.cumsum(1) * oh).sum(2) - 1
            fin_sorted = torch.isfinite(s_sorted) & (s_sorted > NEG / 2)
            key = rank * nb + (nb - 1 - b_sorted)
            key = torch.where(fin_sorted, key, key + 10 ** 9 + rank)
            _, k_ord = torch.sort(key, dim=1, stable=True)
            order = s_ord.gather(1, k_ord)                               # candidate order
        else:
            order = torch.arange(N, device=dev).expand(B, N)
            ok_end = torch.ones(B, N, dtype=torch.bool, device=dev)
        o_s = cand_s.gather(1, order)
        o_hits = hits.gather(1, order)
        o_fin = finite.gather(1, order)
        # running beams: first K non-finishing candidates in order
        run_key = torch.arange(N, device=dev)[None, :] + (o_hits | ~o_fin).long() * N
        sel = torch.topk(-run_key, K, dim=1)[1]                         # positions in order
        sel_c = order.gather(1, sel)
        new_run_scores = o_s.gather(1, sel) + (o_hits | ~o_fin).gather(1, sel).float() * NEG
        new_run_scores = torch.where(torch.isfinite(new_run_scores), new_run_scores, torch.full_like(new_run_scores, 2 * NEG))
        # finished: finishing candidates among the first K positions (only those can finish, so only their
        # sequences are gathered - with constraints there are many more candidates than K)
        first = order[:, :K]
        f_s = o_s[:, :K]
        just = o_hits[:, :K] & o_fin[:, :K] & ok_end.gather(1, first)
        norm = over_len(f_s, cur_len)  # generated tokens including the final one: cur_len
        full = is_fin.all(1, keepdim=True) & (early_stopping is True)
        add = norm + full.float() * NEG + (~unsat_heur).float() * NEG + (~just).float() * NEG
        cand_seqs = seqs[c_src.view(B, N).gather(1, first).reshape(-1)].view(B, K, max_length)
        cand_seqs.scatter_(2, cur_t.view(1, 1, 1).expand(B, K, 1), c_tok.gather(1, first)[:, :, None])
        m_seqs = torch.cat([fin_seqs, cand_seqs], 1)
        m_scores = torch.cat([fin_scores, add], 1)
        m_raw = torch.cat([fin_raw, f_s], 1)
        m_len = torch.cat([fin_len, cur_t.expand(B, K)], 1)
        m_ok = torch.cat([fin_ok, just & ~full & unsat_heur], 1)
        m_isf = torch.cat([is_fin, just], 1)
        ti = torch.topk(m_scores, K, dim=1)[1]
        fin_seqs.copy_(m_seqs.gather(1, ti[:, :, None].expand(-1, -1, max_length)))
        fin_scores.copy_(m_scores.gather(1, ti))
        fin_raw.copy_(m_raw.gather(1, ti))
        fin_len.copy_(m_len.gather(1, ti))
        fin_ok.copy_(m_ok.gather(1, ti))
        is_fin.copy_(m_isf.gather(1, ti))
        # advance running state
        src_flat = c_src.view(B, N).gather(1, sel_c).view(-1)
        tok_flat = c_tok.gather(1, sel_c).view(-1)
        seqs.copy_(seqs[src_flat])
        seqs.scatter_(1, cur_t.view(1, 1).expand(H, 1), tok_flat[:, None])
        src_sel.copy_(src_flat)
        if constrained:
            flat_sel = (sentence_base * N + sel_c).view(-1)
            if ps is not None:
                ps.met.copy_(c_met[flat_sel])
                ps.cur.copy_(c_cur[flat_sel])
                ps.done.copy_(c_done[flat_sel])
            if ns is not None:
                ns.select(None, c_node[flat_sel], c_g[flat_sel])
        run_scores.copy_(new_run_scores)
        # early-stopping heuristic, as in transformers (best_len: the length just generated, or the maximum)
        best_run = run_scores.max(1, keepdim=True)[0]
        best_run = best_run / ((max_length - 1) ** length_penalty) if never else over_len(best_run, cur_len)
        worst_fin = torch.where(is_fin, fin_scores.min(1, keepdim=True)[0], torch.full_like(fin_scores, NEG))
        unsat_heur.logical_and_((best_run > worst_fin).any(1, keepdim=True))
        cur_t.add_(1)

    cache = None
    cur_len = 1
    graph = logp_buf = None
    while True:
        out = model(encoder_outputs=enc, attention_mask=am, decoder_input_ids=seqs[:, cur_len - 1:cur_len],
                    past_key_values=cache, use_cache=True, return_dict=True)
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
        logp = torch.log_softmax(logits, dim=-1)
        logp = procs(seqs[:, :cur_len], logp)
        last_step = cur_len + 1 >= max_length
        if graph is None and use_graph and cur_len >= 2 and not last_step and not _GRAPH_FAILURES:
            logp_buf = logp.clone()
            graph = _capture(lambda: step(logp_buf, None, False))
        if graph is not None and not last_step:
            logp_buf.copy_(logp)
            graph.replay()
        else:
            step(logp, cur_len, last_step)
        cache.reorder_cache(src_sel)
        cur_len += 1
        if last_step or cur_len >= max_length:
            break
        if not bool(unsat_heur.any()):
            break
        if early_stopping is True and bool(is_fin.all()):
            break
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + cur_len - 1
    # to the host once (element by element, each read would wait for the device)
    ok, scores, raw, lens, fseqs = (t.tolist() for t in (fin_ok, fin_scores, fin_raw, fin_len, fin_seqs))
    results = []
    for b in range(B):
        rows = []
        for k in range(K):
            if not ok[b][k] or scores[b][k] <= NEG / 2:
                continue
            rows.append((fseqs[b][k][1:1 + lens[b][k]], raw[b][k], scores[b][k]))
        results.append(rows)
    return results


def _graphs_supported(dev) -> bool:
    return dev.type == "cuda"


def _capture(fn):
    """``fn``'s kernels as a CUDA graph (captured, not run: replay it), or None when capturing fails. On a
    side stream, without ``torch.cuda.graph``'s garbage collection and cache emptying (per batch, those
    would cost more than the graph saves)."""
    graph = torch.cuda.CUDAGraph()
    main = torch.cuda.current_stream()
    side = _SIDE_STREAMS.get(main.device)
    if side is None:
        side = _SIDE_STREAMS[main.device] = torch.cuda.Stream(device=main.device)
    side.wait_stream(main)
    try:
        with torch.cuda.stream(side):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                fn()
            except Exception:
                try:
                    graph.capture_end()
                except Exception:  # noqa: BLE001 - the capture is void anyway: report what broke it
                    pass
                raise
            graph.capture_end()
    except Exception as exc:  # noqa: BLE001 - any capture failure means: run this process's steps eagerly
        _GRAPH_FAILURES.append(f"{type(exc).__name__}: {exc}")
        logger.warning("CUDA graph capture failed, decoding steps run eagerly: %s", exc)
        return None
    finally:
        main.wait_stream(side)
    return graph


_SIDE_STREAMS: dict = {}
