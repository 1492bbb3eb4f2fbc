"""Negative (and BOS-anchored) phrase blocking with exact whole-word semantics, in tensors.

A banned phrase ``w1 .. wn`` is violated when the word stream of the detokenised output
(``re.findall(r"\\w+")``) holds ``w1 .. wn`` consecutively; a BOS phrase when the stream *starts* with it.
Whatever subword segmentation spells the words, a word is only complete when a non-word character (or
the end of the output) follows it, so the mechanism forbids exactly the tokens that would *complete* the
last word of a phrase whose earlier words were just matched:

* per hypothesis the state is ``node`` (the open word as a node of the trie of banned words' prefixes:
  0 = no open word, 1 = an open word that is no banned word's prefix, 2.. = trie nodes) and ``g[p]``
  (KMP progress of phrase ``p`` over completed words; anchored phrases fall into a sink on mismatch);
* forbidden next tokens: (i) tokens starting with a non-word character, and EOS, when the open word
  equals the last word of a phrase at progress ``len-1``; (ii) the few tokens that append letters and
  then break (``often.``) that would complete such a word; (iii) tokens with a complete banned word
  strictly inside them (``▁U.S.``-like; rare, banned outright - conservative, never unsound).

Overlaps (``a a b`` inside ``a a a b``) are handled by the KMP failure function over words.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .vocab import VocabInfo

ROOT, DEAD = 0, 1


def _kmp_table(phrase: list[int], n_words: int, anchored: bool, width: int) -> list[list[int]]:
    """delta[state][word] for states 0..width-1 (state len = matched; sink = width-1 for anchored)."""
    L = len(phrase)
    sink = width - 1
    fail = [0] * (L + 1)
    k = 0
    for i in range(1, L):
        while k and phrase[i] != phrase[k]:
            k = fail[k]
        if phrase[i] == phrase[k]:
            k += 1
        fail[i + 1] = k
    table = []
    for s in range(width):
        row = []
        for w in range(n_words + 1):  # n_words = "other word"
            if anchored:
                row.append(s + 1 if s < L and w < n_words and phrase[s] == w else sink)
                continue
            if s > L:
                row.append(0)
                continue
            q = s if s < L else fail[L]
            while q and (w == n_words or phrase[q] != w):
                q = fail[q]
            row.append(q + 1 if w < n_words and phrase[q] == w else 0)
        table.append(row)
    return table


@dataclass
class NegativeTables:
    """Per-batch tables (B sentences). P phrases max, state width S."""
    n_phr: int
    V: int
    kmp: torch.Tensor          # [B, P, S, W+1] long
    plen: torch.Tensor         # [B, P] long (0 = padding phrase: never matches)
    last_node: torch.Tensor    # [B, P] long: trie node of the phrase's last word
    ext_keys: torch.Tensor     # [B, K] long sorted: node*V + token
    ext_vals: torch.Tensor     # [B, K] long
    word_of_node: torch.Tensor # [B, N] long (W = other)
    n_words: torch.Tensor      # [B] long
    tail_node: torch.Tensor    # [B, V] long
    trip: torch.Tensor         # [B, E, 3] long (node, phrase, token); padding phrase -1
    static_ban: torch.Tensor   # [B, V] bool
    init_g: torch.Tensor       # [B, P] long
    has_static_ban: bool = False

    @property
    def empty(self) -> bool:
        return self.n_phr == 0


def build_negative_tables(info: VocabInfo, batch: list[list[tuple[list[str], bool]]], device) -> NegativeTables:
    """``batch[b]`` = list of (words, anchored) phrases."""
    V = info.size
    B = len(batch)
    per = []
    for phrases in batch:
        words = sorted({w for ph, _ in phrases for w in ph})
        wid = {w: i for i, w in enumerate(words)}
        W = len(words)
        nodes = {"": ROOT}
        strs = ["", None]
        for w in words:
            for k in range(1, len(w) + 1):
                if w[:k] not in nodes:
                    nodes[w[:k]] = len(strs)
                    strs.append(w[:k])
        word_of_node = [W] * len(strs)
        for w in words:
            word_of_node[nodes[w]] = wid[w]
        ext = {}
        for u, n in nodes.items():
            for w in words:
                if not w.startswith(u):
                    continue
                for k in range(len(u) + 1, len(w) + 1):
                    piece = w[len(u):k]
                    for t in info.by_lead_nobreak.get(piece, []) + info.by_lead_break.get(piece, []):
                        ext[n * V + t] = nodes[w[:k]]
        tails = {}
        for u, n in nodes.items():
            if u:
                for t in info.by_tail.get(u, ()):
                    tails[t] = n
        trips = []
        for p, (ph, _) in enumerate(phrases):
            last = ph[-1]
            for i in range(len(last)):
                for t in info.by_lead_break.get(last[i:], ()):
                    trips.append((nodes[last[:i]], p, t))
        static = [t for t in info.inner_ids if any(x in wid for x in info.inner[t])]
        per.append(dict(phrases=[([wid[w] for w in ph], a) for ph, a in phrases], W=W, word_of_node=word_of_node,
                        ext=ext, tails=tails, trips=trips, static=static, nodes=nodes))
    P = max((len(d["phrases"]) for d in per), default=0)
    Lmax = max((len(ph) for d in per for ph, _ in d["phrases"]), default=0)
    S = Lmax + 2
    Wmax = max((d["W"] for d in per), default=0)
    Nmax = max((len(d["word_of_node"]) for d in per), default=2)
    Kmax = max((len(d["ext"]) for d in per), default=0) + 1
    Emax = max((len(d["trips"]) for d in per), default=0) + 1
    kmp = torch.zeros(B, max(P, 1), S, Wmax + 1, dtype=torch.long)
    plen = torch.zeros(B, max(P, 1), dtype=torch.long)
    last_node = torch.full((B, max(P, 1)), -5, dtype=torch.long)
    init_g = torch.zeros(B, max(P, 1), dtype=torch.long)
    ext_keys = torch.full((B, Kmax), torch.iinfo(torch.long).max, dtype=torch.long)
    ext_vals = torch.full((B, Kmax), DEAD, dtype=torch.long)
    won = torch.full((B, Nmax), Wmax, dtype=torch.long)
    n_words = torch.zeros(B, dtype=torch.long)
    tail_node = torch.tensor([ROOT if not tl else DEAD for tl in info.tail], dtype=torch.long).repeat(B, 1)
    trip = torch.full((B, Emax, 3), -1, dtype=torch.long)
    trip[:, :, 0] = -5
    trip[:, :, 2] = 0
    static_ban = torch.zeros(B, V, dtype=torch.bool)
    for b, d in enumerate(per):
        W = d["W"]
        n_words[b] = W
        for p, (ph, anchored) in enumerate(d["phrases"]):
            tab = _kmp_table(ph, W, anchored, S)
            t = torch.tensor(tab, dtype=torch.long)  # [S, W+1]
            kmp[b, p, :, :W] = t[:, :W]
            kmp[b, p, :, Wmax] = t[:, W]   # "other" always lives in the last column
            plen[b, p] = len(ph)
            last_node[b, p] = d["nodes"][_word_str(d, ph[-1])]
        won[b, : len(d["word_of_node"])] = torch.tensor([x if x < W else Wmax for x in d["word_of_node"]])
        if d["ext"]:
            ks = sorted(d["ext"])
            ext_keys[b, : len(ks)] = torch.tensor(ks)
            ext_vals[b, : len(ks)] = torch.tensor([d["ext"][k] for k in ks])
        for t, n in d["tails"].items():
            tail_node[b, t] = n
        if d["trips"]:
            trip[b, : len(d["trips"])] = torch.tensor(d["trips"])
        if d["static"]:
            static_ban[b, d["static"]] = True
    return NegativeTables(n_phr=P, V=V, kmp=kmp.to(device), plen=plen.to(device), last_node=last_node.to(device),
                          ext_keys=ext_keys.to(device), ext_vals=ext_vals.to(device), word_of_node=won.to(device),
                          n_words=n_words.to(device), tail_node=tail_node.to(device), trip=trip.to(device),
                          static_ban=static_ban.to(device), init_g=init_g.to(device),
                          has_static_ban=bool(static_ban.any()))


def _word_str(d, wid):
    # the sorted word list is implicit in the trie: find the node whose word id is wid
    for s, n in d["nodes"].items():
        if d["word_of_node"][n] == wid:
            return s
    raise KeyError(wid)


class NegativeState:
    """Vectorised state for H hypotheses; ``bidx[h]`` is the sentence of hypothesis h."""

    def __init__(self, tables: NegativeTables, bidx: torch.Tensor, boundary: torch.Tensor, eos_id: int):
        self.t = tables
        self.bidx = bidx
        self.boundary = boundary  # [V] bool (break with empty lead, incl. EOS)
        self.boundary_ids = torch.nonzero(boundary)[:, 0]
        self.eos_id = eos_id
        self.node = torch.zeros(len(bidx), dtype=torch.long, device=bidx.device)
        self.g = tables.init_g[bidx].clone()
        self._by_len: dict[int, dict[str, torch.Tensor]] = {}

    def _rows(self, bidx: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tables' rows for a row layout ``bidx``, gathered once: a decoder's layouts (its hypotheses,
        its candidates) are sentence-major and fixed in length, so the length identifies the layout."""
        rows = self._by_len.get(len(bidx))
        if rows is None:
            t = self.t
            plen = t.plen[bidx]
            P = t.kmp.shape[1]
            trip = t.trip[bidx]                                          # [n, E, 3]
            pn = trip[:, :, 1].clamp(min=0)
            rows = self._by_len[len(bidx)] = {
                "closing_g": torch.where(plen > 0, plen - 1, -1),        # g of a phrase one word from done
                "last_node": t.last_node[bidx],
                "trip_node": torch.where(trip[:, :, 1] >= 0, trip[:, :, 0], -5),
                "trip_phrase": pn,
                "trip_g": plen.gather(1, pn) - 1,
                "trip_tok": trip[:, :, 2],
                "ext_keys": t.ext_keys[bidx],
                "ext_vals": t.ext_vals[bidx],
                "kmp_row": (bidx[:, None] * P + torch.arange(P, device=bidx.device)[None, :]) * t.kmp.shape[2],
            }
        return rows

    def _closing(self, node, g, rows):
        """[h, P] bool: phrase p is one word from complete and the open word is that word."""
        return (g == rows["closing_g"]) & (node[:, None] == rows["last_node"])

    def ban_mask(self, *, sync_free: bool | None = None) -> torch.Tensor:
        """[H, V] bool of forbidden next tokens."""
        mask = torch.zeros(len(self.bidx), self.t.V, dtype=torch.bool, device=self.bidx.device)
        self.apply_bans(mask, True, sync_free=sync_free)
        return mask

    def apply_bans(self, scores: torch.Tensor, value, *, sync_free: bool | None = None) -> None:
        """Set ``scores[h, v] = value`` (in place) for every forbidden next token, without building an
        [H, V] mask per step. On the CPU only the few banned entries are written (found with
        ``nonzero``); on a GPU (``sync_free``, the default there) the same entries are written without
        asking the device how many there are, so the host never waits for the GPU at this point."""
        t = self.t
        rows = self._rows(self.bidx)
        if sync_free is None:
            sync_free = scores.device.type != "cpu"
        if t.has_static_ban:
            scores.masked_fill_(t.static_ban[self.bidx], value)
        closing = self._closing(self.node, self.g, rows).any(1)                 # [H]
        active = (rows["trip_node"] == self.node[:, None]) & (self.g.gather(1, rows["trip_phrase"]) == rows["trip_g"])
        if sync_free:
            scores.masked_fill_(closing[:, None] & self.boundary[None, :], value)
            # write ``value`` where a trip is active and leave the rest: min (or, for a bool mask, max)
            # with a neutral element, so that two trips on one token cannot undo each other
            neutral = False if scores.dtype == torch.bool else float("inf")
            scores.scatter_reduce_(1, rows["trip_tok"], torch.where(active, value, neutral).to(scores.dtype),
                                   reduce="amax" if scores.dtype == torch.bool else "amin")
            return
        closing = torch.nonzero(closing)[:, 0]  # hypotheses
        if closing.numel():
            scores[closing[:, None], self.boundary_ids[None, :]] = value
        h, e = torch.nonzero(active, as_tuple=True)
        if h.numel():
            scores[h, rows["trip_tok"][h, e]] = value

    def ends_badly(self, node, g, bidx) -> torch.Tensor:
        """[N] bool: ending the output in this state completes a phrase (the open word closes at the end)."""
        return self._closing(node, g, self._rows(bidx)).any(1)

    def advance(self, src: torch.Tensor, tok: torch.Tensor, bidx: torch.Tensor):
        """New (node, g) for candidates (source hypothesis, token)."""
        t = self.t
        rows = self._rows(bidx)
        node = self.node[src]
        g = self.g[src]
        # extend the open word by the token's lead
        q = node * t.V + tok
        keys = rows["ext_keys"]
        pos = torch.searchsorted(keys, q[:, None]).clamp(max=keys.shape[1] - 1)
        ext = torch.where(keys.gather(1, pos)[:, 0] == q, rows["ext_vals"].gather(1, pos)[:, 0], DEAD)
        ext = torch.where(self.lead_empty[tok], node, ext)
        # the word completed by a break (none when no word was open and the lead is empty)
        brk = self.brk[tok]
        completes = brk & (ext != ROOT)
        Wc = t.kmp.shape[-1]
        w = torch.where(ext >= 2, t.word_of_node[bidx, ext.clamp(max=t.word_of_node.shape[1] - 1)], Wc - 1)
        # kmp[b, p, g, w] for every candidate and phrase, read through one flat index (gathering the
        # candidates' whole [P, S, Wc] tables per step cost more than the rest of the step)
        flat = t.kmp.view(-1)
        row = rows["kmp_row"]
        g = torch.where(completes[:, None], flat[(row + g) * Wc + w[:, None]], g)
        # inner words (none banned, else the token was banned): each is an "other" word
        g = torch.where(self.has_inner[tok][:, None], flat[(row + g) * Wc + (Wc - 1)], g)
        new_node = torch.where(brk, t.tail_node[bidx, tok], ext)
        return new_node, g

    def set_token_info(self, info: VocabInfo, device):
        self.brk = info.has_break.to(device)
        self.lead_empty = torch.tensor([not x for x in info.lead], dtype=torch.bool, device=device)
        self.has_inner = torch.tensor([bool(x) for x in info.inner], dtype=torch.bool, device=device)

    def select(self, src, node, g):
        self.node = node
        self.g = g
