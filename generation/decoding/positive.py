"""Positive constraints (required phrases) as tensors: the tables of one batch and the state of its hypotheses.

A positive phrase is the token sequence of its words with the leading-space marker followed by a
*boundary element* (a token starting with a non-word character, or EOS / the end of the output): a phrase
started must continue; otherwise its progress is undone - so a met phrase is always a run of whole words.

Per hypothesis the state is ``met`` [H, T] over the batch's constraint elements (T: the most elements of a
sentence, phrases laid end to end with their boundary elements) and ``cur``, the element last met inside an
unfinished phrase (-1: none). ``dba.BeamSearch`` advances it for every candidate of a step; the number of
elements met is the candidate's bank (Dynamic Beam Allocation). The negative side is ``banned.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BOUNDARY = -1  # the element "a word boundary follows" (a non-word token or EOS)
PAD = -2  # no element (tables padded to the longest sentence's)


@dataclass
class PositiveTables:
    C: torch.Tensor  # [B, T] token id, BOUNDARY, or PAD
    first: torch.Tensor  # [B, T] bool
    last: torch.Tensor  # [B, T] bool
    pstart: torch.Tensor  # [B, T] long
    valid: torch.Tensor  # [B, T] bool

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
            C[b][i : i + n] = list(p) + [BOUNDARY]
            first[b][i] = True
            last[b][i + n - 1] = True
            pstart[b][i : i + n] = [i] * n
            i += n
    C = torch.tensor(C, dtype=torch.long, device=device)
    return PositiveTables(
        C,
        torch.tensor(first, dtype=torch.bool, device=device),
        torch.tensor(last, dtype=torch.bool, device=device),
        torch.tensor(pstart, dtype=torch.long, device=device),
        C != PAD,
    )


class PositiveState:
    """The required phrases' progress of H hypotheses (``bidx[h]``: the sentence, the tables' row, of
    hypothesis h), advanced for a step's candidates without a Python loop over them."""

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
        self.C_flat, self.pstart_flat, self.last_flat = tables.C.view(-1), tables.pstart.view(-1), tables.last.view(-1)
        # each phrase's first element and its token, phrases in order ([B, P], P the most phrases of a
        # sentence; a padding phrase's token is PAD): the extra candidates are per phrase, not per element
        n_phr = max(1, int(tables.first.sum(1).max()))
        fpos = torch.sort((~tables.first).to(torch.int8), dim=1, stable=True)[1][:, :n_phr]
        self.phrase_first = fpos
        self.phrase_tok = tables.C.gather(1, fpos).masked_fill(~tables.first.gather(1, fpos), PAD)
        self._by_len: dict[int, dict[str, torch.Tensor]] = {}
        self.done = self.finish_ok(self.met, self.cur, bidx)

    def advance(self, src, tok, bidx):
        t = self.t
        rows = self._rows(bidx)
        base = rows["base"]  # (the tables' rows read through flat indices: one index, not two)
        met = self.met[src]  # (advanced indexing: a copy)
        cur = self.cur[src]
        idx = self.idx
        in_prog = cur >= 0
        nxt = (cur + 1).clamp(max=t.T - 1)
        nxt_tok = self.C_flat[base + nxt]
        match = in_prog & ((nxt_tok == tok) | ((nxt_tok == BOUNDARY) & self.boundary[tok]))
        undo = in_prog > match  # (bools: a > b is a & ~b, in one pass)
        ps = self.pstart_flat[base + cur.clamp(min=0)]
        met.masked_fill_(undo[:, None] & (idx >= ps[:, None]) & (idx <= cur[:, None]), False)
        # (one element per row set: read, or, written back, instead of a [rows, T] mask)
        met.scatter_(1, nxt[:, None], met.gather(1, nxt[:, None]) | match[:, None])
        is_last = self.last_flat[base + nxt]
        new_cur = nxt.masked_fill(~match | is_last, -1)
        # the first phrase this token starts (max's index: the first maximum, 0 where none)
        any_s, j = ((rows["first_tok"] == tok[:, None]) > met).to(torch.int8).max(1)
        any_s = (any_s > 0) & (~match | is_last)
        met.scatter_(1, j[:, None], met.gather(1, j[:, None]) | any_s[:, None])
        new_cur = torch.where(any_s, j, new_cur)
        return met, new_cur

    def finish_ok(self, met, cur, bidx, n_met=None):
        """All elements met, counting a pending boundary as met (the output ends there). ``n_met``: the
        rows' counts of met elements, if known. (For the current hypotheses this is ``self.done``, kept
        from the step that chose them: EOS, a boundary, may end a hypothesis exactly when this holds.)"""
        t = self.t
        rows = self._rows(bidx)
        n = rows["n_valid"] - (met.sum(1) if n_met is None else n_met)
        nxt = (cur + 1).clamp(max=t.T - 1)
        pending = ((cur >= 0) & (self.C_flat[rows["base"] + nxt] == BOUNDARY)) > met.gather(1, nxt[:, None])[:, 0]
        return (n == 0) | ((n == 1) & pending)

    def next_tokens(self):
        """[H, P] token ids of every unmet constraint's next token (PAD where none): per phrase the token
        that starts it while it is unmet and no phrase is in progress, and in the first column the next
        token of the phrase in progress (none when a boundary element is next). Over phrases rather than
        elements: a hypothesis has at most P such tokens, and the valid ones keep their order (phrase
        order is element order)."""
        rows = self._rows(self.bidx)
        in_prog = (self.cur >= 0)[:, None]
        nt = rows["phrase_tok"].masked_fill(self.met.gather(1, rows["phrase_first"]) | in_prog, PAD)
        nxt = self.t.C[self.bidx, (self.cur + 1).clamp(max=self.t.T - 1)][:, None]  # [H, 1]
        first = torch.where(in_prog, nxt.masked_fill(nxt < 0, PAD), nt[:, :1])
        return torch.cat([first, nt[:, 1:]], 1)

    def keep_rows(self, rows: torch.Tensor, bidx: torch.Tensor) -> None:
        """Keep hypotheses ``rows`` only, now of sentences ``bidx`` (``BeamSearch.keep``)."""
        self.bidx = bidx
        self.met, self.cur, self.done = self.met[rows], self.cur[rows], self.done[rows]
        self._by_len = {}  # new layouts: their lengths may equal old ones'

    def _rows(self, bidx):
        """The tables' rows for a row layout ``bidx``, gathered once (a decoder's layouts are
        sentence-major and fixed in length, so the length identifies the layout)."""
        rows = self._by_len.get(len(bidx))
        if rows is None:
            rows = self._by_len[len(bidx)] = {
                "first_tok": self.first_tok[bidx],
                "n_valid": self.n_valid[bidx],
                "base": bidx * self.t.T,
                "phrase_first": self.phrase_first[bidx],
                "phrase_tok": self.phrase_tok[bidx],
            }
        return rows
