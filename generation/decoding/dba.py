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

A positive phrase is the token sequence of its words with the leading-space marker followed by a
*boundary element* (a token starting with a non-word character, or EOS / the end of the output): a phrase
started must continue; otherwise its progress is undone - so a met phrase is always a run of whole words.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

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
    """``batch[b]`` = token-id sequences of the required phrases of sentence b."""
    B = len(batch)
    T = max((sum(len(p) + 1 for p in phrases) for phrases in batch), default=0)
    C = torch.full((B, max(T, 1)), PAD, dtype=torch.long)
    first = torch.zeros_like(C, dtype=torch.bool)
    last = torch.zeros_like(first)
    pstart = torch.zeros_like(C)
    for b, phrases in enumerate(batch):
        i = 0
        for p in phrases:
            elems = list(p) + [BOUNDARY]
            C[b, i:i + len(elems)] = torch.tensor(elems)
            first[b, i] = True
            last[b, i + len(elems) - 1] = True
            pstart[b, i:i + len(elems)] = i
            i += len(elems)
    return PositiveTables(C.to(device), first.to(device), last.to(device), pstart.to(device), (C != PAD).to(device))


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
        new_cur = torch.where(match & ~is_last, nxt, -1)
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
        return torch.where(want & rows["is_token"], rows["C_tokens"], PAD)

    def _rows(self, bidx):
        """The tables' rows for a row layout ``bidx``, gathered once (a decoder's layouts are
        sentence-major and fixed in length, so the length identifies the layout)."""
        rows = self._by_len.get(len(bidx))
        if rows is None:
            C_tokens = self.t.C[:, self.token_cols][bidx]
            rows = self._by_len[len(bidx)] = {
                "first_tok": self.first_tok[bidx], "n_valid": self.n_valid[bidx],
                "first_tokens": self.t.first[:, self.token_cols][bidx], "is_token": C_tokens >= 0,
                "C_tokens": C_tokens}
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


@torch.no_grad()
def beam_search(loaded, input_ids, attention_mask, *, beam, max_length, length_penalty=1.0, early_stopping=False,
                pos: PositiveTables | None = None, neg=None, stats: dict | None = None):
    """Returns per sentence a list (best first) of (token ids without the start token, raw score, normalised
    score); at most ``beam`` entries, only hypotheses satisfying every constraint. ``stats["steps"]``, if
    given, grows by the decoder steps run (so a benchmark can tell cost per step from output length)."""
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

    enc = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(K, dim=0)
    am = attention_mask.repeat_interleave(K, dim=0)

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
    cache = None
    cur_len = 1
    not_boundary = ~boundary
    hyp_in_beam = torch.arange(H, device=dev)[:, None] % K
    sentence_base = torch.arange(B, device=dev)[:, None]
    while True:
        out = model(encoder_outputs=enc, attention_mask=am, decoder_input_ids=seqs[:, cur_len - 1:cur_len],
                    past_key_values=cache, use_cache=True, return_dict=True)
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
        logp = torch.log_softmax(logits, dim=-1)
        logp = procs(seqs[:, :cur_len], logp)
        last_step = cur_len + 1 >= max_length
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
            key = torch.cat([top_i, torch.where(valid_e, hyp_in_beam * V + et_c,
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
            oh = torch.nn.functional.one_hot(b_sorted, nb)
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
        o_hits = hits.gather(1, order) if hits.dim() == 2 else hits.expand(B, N)
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
        gen_len = cur_len  # generated tokens including the final one
        norm = f_s / (gen_len ** length_penalty)
        full = is_fin.all(1, keepdim=True) & (early_stopping is True)
        add = norm + full.float() * NEG + (~unsat_heur).float() * NEG + (~just).float() * NEG
        cand_seqs = seqs[c_src.view(B, N).gather(1, first).reshape(-1)].view(B, K, max_length)
        cand_seqs[:, :, cur_len] = c_tok.gather(1, first)
        m_seqs = torch.cat([fin_seqs, cand_seqs], 1)
        m_scores = torch.cat([fin_scores, add], 1)
        m_raw = torch.cat([fin_raw, f_s], 1)
        m_len = torch.cat([fin_len, torch.full((B, K), gen_len, dtype=torch.long, device=dev)], 1)
        m_ok = torch.cat([fin_ok, just & ~full & unsat_heur], 1)
        m_isf = torch.cat([is_fin, just], 1)
        ti = torch.topk(m_scores, K, dim=1)[1]
        fin_seqs = m_seqs.gather(1, ti[:, :, None].expand(-1, -1, max_length))
        fin_scores = m_scores.gather(1, ti)
        fin_raw = m_raw.gather(1, ti)
        fin_len = m_len.gather(1, ti)
        fin_ok = m_ok.gather(1, ti)
        is_fin = m_isf.gather(1, ti)
        # advance running state
        src_flat = c_src.view(B, N).gather(1, sel_c).view(-1)
        tok_flat = c_tok.gather(1, sel_c).view(-1)
        seqs = seqs[src_flat]
        seqs[:, cur_len] = tok_flat
        if constrained:
            flat_sel = (sentence_base * N + sel_c).view(-1)
            if ps is not None:
                ps.met, ps.cur, ps.done = c_met[flat_sel], c_cur[flat_sel], c_done[flat_sel]
            if ns is not None:
                ns.select(None, c_node[flat_sel], c_g[flat_sel])
        run_scores = new_run_scores
        cache.reorder_cache(src_flat)
        cur_len += 1
        # early-stopping heuristic and loop condition, as in transformers
        if early_stopping == "never" and length_penalty > 0.0:
            best_len = max_length - 1
        else:
            best_len = cur_len - 1
        best_run = run_scores.max(1, keepdim=True)[0] / (best_len ** length_penalty)
        worst_fin = torch.where(is_fin, fin_scores.min(1, keepdim=True)[0], torch.full_like(fin_scores, NEG))
        unsat_heur = unsat_heur & (best_run > worst_fin).any(1, keepdim=True)
        if last_step or cur_len >= max_length:
            break
        if not bool(unsat_heur.any()):
            break
        if bool(is_fin.all()) and early_stopping is True:
            break
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + cur_len - 1
    results = []
    for b in range(B):
        rows = []
        for k in range(K):
            if not bool(fin_ok[b, k]) or float(fin_scores[b, k]) <= NEG / 2:
                continue
            L = int(fin_len[b, k])
            ids = fin_seqs[b, k, 1:1 + L].tolist()
            rows.append((ids, float(fin_raw[b, k]), float(fin_scores[b, k])))
        results.append(rows)
    return results
