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

A banned *single word* (an unanchored phrase of one word) needs no progress: it closes whenever the open word
is that word. So single words keep no ``g`` column; a trie node says whether it closes one (``single_node``) and
which tokens would complete one from it (``single_tok``, read by the open word's node). Why: a ban expands each
word into up to 34 glued spellings ("tothe" for "the", ``decoding.banned_phrases``), and a ``g`` column per
spelling (with every spelling's completing tokens compared with every hypothesis) made 20 banned words cost 8x
an unconstrained search (bench/decoding.py --quick); read by node, the cost hardly grows with their number.

A banned single word must not be **run on** either ("with" + "Julia": ``english.runs_on``, which the constraint
check counts as the banned word). Once the open word is a banned single word, a second state (the last column
of ``g``) follows it through the words of the English list that begin with it (``english.run_on_words``:
"within", "without", "withdraw" for "with"): a token with letters is allowed only when it keeps the word on one
of them or ends the word where it is English ("with" + "in" + "."), and a break or the end only where it is
English. Each banned word's part of that state (a :class:`RunOnBlock`: its own small trie) is built once per
vocabulary and word, and a batch joins the blocks of its distinct banned words, not one per sentence: "a" runs
on into 4,465 words, and joining them into every sentence's trie made 20 banned words cost 20x an unconstrained
search on the demo model. The ban fills every token with letters and writes the allowed ones' scores back,
before any other ban. Not followed (left to the final check): a token that starts before the banned word ends
and runs on past it ("wi" + "thJulia"), a token whose tail already runs it on ("▁withJ"), and a token that
holds a run-on word whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..english import run_on_words
from .vocab import VocabInfo

ROOT, DEAD = 0, 1


def _kmp_table(phrase: list[int], n_words: int, anchored: bool, width: int) -> list[list[int]]:
    """delta[state][word] for states 0..width-1 (state len = matched; sink = width-1 for anchored). Only the
    phrase's own words can move a state forward, so each row starts from its default and sets those."""
    L = len(phrase)
    sink = width - 1
    if anchored:
        table = [[sink] * (n_words + 1) for _ in range(width)]
        for s in range(min(L, width)):
            table[s][phrase[s]] = s + 1
        return table
    fail = [0] * (L + 1)
    k = 0
    for i in range(1, L):
        while k and phrase[i] != phrase[k]:
            k = fail[k]
        if phrase[i] == phrase[k]:
            k += 1
        fail[i + 1] = k
    distinct = set(phrase)
    table = []
    for s in range(width):
        row = [0] * (n_words + 1)  # "other word" (n_words) and words outside the phrase: back to 0
        if s <= L:
            for w in distinct:
                q = s if s < L else fail[L]
                while q and phrase[q] != w:
                    q = fail[q]
                if phrase[q] == w:
                    row[w] = q + 1
        table.append(row)
    return table


@dataclass
class NegativeTables:
    """Per-batch tables (B sentences). P phrases max, state width S."""

    n_phr: int
    V: int
    kmp: torch.Tensor  # [B, P, S, W+1] long
    plen: torch.Tensor  # [B, P] long (0 = padding phrase: never matches)
    last_node: torch.Tensor  # [B, P] long: trie node of the phrase's last word
    ext_keys: torch.Tensor  # [K] long sorted: (b*N + node)*V + token, all sentences in one (then a sentinel)
    ext_vals: torch.Tensor  # [K] long
    word_of_node: torch.Tensor  # [B, N] long (W = other)
    n_words: torch.Tensor  # [B] long
    tail_node: torch.Tensor  # [B, V] long
    trip: torch.Tensor  # [B, E, 3] long (node, phrase, token); padding phrase -1
    single_node: torch.Tensor  # [B, N] bool: the node is a banned single word
    single_tok: torch.Tensor  # [B, N, F] long: tokens completing a banned single word from the node; padding -1
    static_ban: torch.Tensor  # [B, V] bool
    init_g: torch.Tensor  # [B, P + 1] long: the phrases' progress, then the run-on state (-1: none)
    # run-ons (module docstring): the batch's blocks one after another, R states in all
    run_on_root: torch.Tensor  # [B, N] long: the state a banned single word's node starts; -1 elsewhere
    run_on_keys: torch.Tensor  # [M + 1] long sorted: state * V + token with letters that keeps the word on
    run_on_vals: torch.Tensor  # [M + 1] long: the state it leads to
    run_on_open: torch.Tensor  # [R + 1] bool: the word is no English word there (it may not end); last: none
    run_on_start: torch.Tensor  # [R + 1] long: where the state's allowed tokens start in run_on_tok
    run_on_count: torch.Tensor  # [R + 1] long
    run_on_tok: torch.Tensor  # [K + 1] long: tokens with letters allowed, state after state
    run_on_slot: torch.Tensor  # [A] long: 0 .. A - 1, A the most tokens a state allows
    run_on_pad: int = 0  # an id with no letters, padding a state's tokens to A (its score written back: no change)
    has_static_ban: bool = False
    has_run_ons: bool = False

    @property
    def empty(self) -> bool:
        return self.n_phr == 0


def _trie(words: list[str]) -> tuple[np.ndarray, int]:
    """``pref[j, k]``: the trie node of ``words[j][:k]`` (sorted ``words``; k up to the word's length, 0 = ROOT), and
    the number of nodes. Nodes are numbered as the prefixes first appear, word by word: in sorted order a prefix
    appeared before exactly when it is within the word's common prefix with the word before, so the numbering
    is read off the words' characters at once (one Python step per prefix cost more than the rest of a table)."""
    W = len(words)
    if not W:
        return np.zeros((0, 1), dtype=np.int64), 2
    lens = np.fromiter(map(len, words), dtype=np.int64, count=W)
    L = int(lens.max())
    chars = np.array(words, dtype=f"<U{L}").view(np.uint32).reshape(W, L)  # NUL-padded: no word holds a NUL
    same = chars[1:] == chars[:-1]
    lcp = np.zeros(W, dtype=np.int64)
    lcp[1:] = np.where(same.all(1), L, same.argmin(1))
    k = np.arange(1, L + 1)
    new = (k[None, :] > lcp[:, None]) & (k[None, :] <= lens[:, None])  # [W, L]: the prefix is a new node
    ids = np.cumsum(new.ravel()).reshape(W, L) + DEAD  # the first new prefix is node 2
    first = np.maximum.accumulate(np.where(new, np.arange(W)[:, None], 0), axis=0)  # the word that made it
    pref = np.zeros((W, L + 1), dtype=np.int64)
    pref[:, 1:] = ids[first, k - 1]
    return pref, int(new.sum()) + 2


@dataclass(frozen=True)
class RunOnBlock:
    """One banned single word's run-on states (module docstring): state 0 is the word itself, the others the
    longer starts of the English words that begin with it. Read-only: shared by every batch that bans it."""

    size: int  # states
    keys: np.ndarray  # [M] sorted: state * V + token: a token with letters that keeps the word on a run-on word
    vals: np.ndarray  # [M]: the state it leads to
    open: np.ndarray  # [size] bool: no English word there
    start: np.ndarray  # [size]: where the state's allowed tokens start in ``tok``
    count: np.ndarray  # [size]
    tok: np.ndarray  # [K]: the tokens with letters allowed, state after state (those above and those that end an
    # English word)


def run_on_block(info: VocabInfo, word: str) -> RunOnBlock:
    """``word``'s :class:`RunOnBlock` on ``info``'s vocabulary, remembered (``VocabInfo.run_on_blocks``)."""
    got = info.run_on_blocks.get(word)
    if got is None:
        got = _run_on_block(info, word)
        for array in (got.keys, got.vals, got.open, got.start, got.count, got.tok):
            array.flags.writeable = False
        if len(info.run_on_blocks) >= RUN_ON_BLOCKS_REMEMBERED:
            info.run_on_blocks.clear()
        info.run_on_blocks[word] = got
    return got


# banned words whose run-on blocks a vocabulary remembers: most are a few bytes (a glued spelling, "tothe", runs on
# into no English word), the largest about 8 MB ("a" on Gemma's vocabulary)
RUN_ON_BLOCKS_REMEMBERED = 10_000
_NO_INT = np.zeros(0, dtype=np.int64)
# a word no English word begins with: one state, where no token with letters may follow
NOTHING_RUNS_ON = RunOnBlock(
    1, _NO_INT, _NO_INT, np.ones(1, dtype=bool), np.zeros(1, np.int64), np.zeros(1, np.int64), _NO_INT
)


def _run_on_block(info: VocabInfo, word: str) -> RunOnBlock:
    V = info.size
    run_ons = run_on_words(word)
    if not run_ons:
        return NOTHING_RUNS_ON
    words = sorted({word, *(w for w, _ in run_ons)})  # each begins with ``word``
    pref, n_nodes = _trie(words)
    lens = np.array([len(w) for w in words], dtype=np.int64)
    end = pref[np.arange(len(words)), lens]
    index = {w: j for j, w in enumerate(words)}
    english_end = np.zeros(n_nodes, dtype=bool)
    english_end[end[[index[w] for w, english in run_ons if english]]] = True
    k = np.arange(pref.shape[1])
    states = np.unique(pref[(k >= len(word)) & (k <= lens[:, None])])  # the word's node first: it appears first
    local = np.full(n_nodes, -1, dtype=np.int64)
    local[states] = np.arange(len(states))
    pieces = [info.pieces_of(w).moves for w in words]
    moves = np.concatenate([np.zeros((0, 4), dtype=np.int64), *pieces])
    wj = np.repeat(np.arange(len(words)), list(map(len, pieces))).astype(np.int64)
    on = moves[:, 0] >= len(word)  # moves from the banned word on
    moves, wj = moves[on], wj[on]
    src, dst = local[pref[wj, moves[:, 0]]], local[pref[wj, moves[:, 1]]]
    keeps_on = ~info.has_break.numpy()[moves[:, 2]]
    ends_english = (moves[:, 3] == 1) & english_end[states][dst]  # closes a word that is English
    keys, at = np.unique((src * V + moves[:, 2])[keeps_on], return_index=True)
    ok = keeps_on | ends_english
    allowed = np.unique(src[ok] * V + moves[ok, 2])  # by state, then token
    count = np.bincount(allowed // V, minlength=len(states))
    return RunOnBlock(
        size=len(states),
        keys=keys,
        vals=dst[keeps_on][at],
        open=~english_end[states],
        start=np.cumsum(count) - count,
        count=count,
        tok=allowed % V,
    )


def _sentence_tables(info: VocabInfo, phrases: list[tuple[list[str], bool]]) -> dict:
    """One sentence's trie of banned words' prefixes and the moves over it, as arrays. Each word's pieces come
    from ``VocabInfo.pieces_of`` (remembered per word), so a sentence only numbers its trie and joins them."""
    V = info.size
    words = sorted({w for ph, _ in phrases for w in ph})
    wid = {w: i for i, w in enumerate(words)}
    W = len(words)
    pref, n_nodes = _trie(words)
    end = pref[np.arange(W), [len(w) for w in words]]  # each word's node
    word_of_node = np.full(n_nodes, W, dtype=np.int64)
    word_of_node[end] = np.arange(W)
    pieces = list(zip(*map(info.pieces_of, words))) or [(), (), ()]  # moves, tails, inner ids: one tuple each
    counts = list(map(len, pieces[0]))
    starts = np.cumsum([0, *counts])
    moves = np.concatenate([np.zeros((0, 4), dtype=np.int64), *pieces[0]])
    wj = np.repeat(np.arange(W), counts).astype(np.int64)
    src = pref[wj, moves[:, 0]]
    # open word (node) x token appending letters -> node; every prefix of a word is a node, and a key's node is
    # its node's prefix with the token's letters whichever word it came from
    ext_keys, at = np.unique(src * V + moves[:, 2], return_index=True)
    ext_vals = pref[wj, moves[:, 1]][at]
    tails = np.concatenate([np.zeros((0, 2), dtype=np.int64), *pieces[1]])
    tail_nodes = pref[np.repeat(np.arange(W), list(map(len, pieces[1]))).astype(np.int64), tails[:, 0]]
    singles = sorted({wid[ph[0]] for ph, anchored in phrases if len(ph) == 1 and not anchored})
    tracked = [(ph, a) for ph, a in phrases if len(ph) > 1 or a]  # phrases that need progress (module docstring)

    def completing(j: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, tokens): the open word ``word[:i]`` and a token that appends ``word[i:]`` and breaks."""
        rows = slice(starts[j], starts[j + 1])
        closes = moves[rows, 3] == 1
        return src[rows][closes], moves[rows, 2][closes]

    trips = []
    for p, (ph, _) in enumerate(tracked):
        n, t = completing(wid[ph[-1]])
        trips.append(np.stack([n, np.full_like(n, p), t], axis=1))
    is_single = np.zeros(W, dtype=bool)
    is_single[singles] = True
    closing = (moves[:, 3] == 1) & is_single[wj]
    pairs = np.unique(src[closing] * V + moves[closing, 2])  # by node, then token
    pair_node = pairs // V
    return dict(
        phrases=[([wid[w] for w in ph], a) for ph, a in tracked],
        W=W,
        word_of_node=word_of_node,
        ext_keys=ext_keys,
        ext_vals=ext_vals,
        tail_tokens=tails[:, 1],
        tail_nodes=tail_nodes,
        trips=np.concatenate(trips) if trips else np.zeros((0, 3), dtype=np.int64),
        single_nodes=end[singles],
        single_node=pair_node,
        single_slot=np.arange(len(pairs)) - np.searchsorted(pair_node, pair_node),  # place among the node's tokens
        single_tok=pairs % V,
        single_words=[words[j] for j in singles],
        static=np.concatenate([np.zeros(0, dtype=np.int64), *pieces[2]]),
        last_nodes=[int(end[wid[ph[-1]]]) for ph, _ in tracked],
    )


def build_negative_tables(info: VocabInfo, batch: list[list[tuple[list[str], bool]]], device) -> NegativeTables:
    """``batch[b]`` = list of (words, anchored) phrases. The tables are filled in numpy and moved to the
    device once each: element-wise tensor writes made this cost more than the decoding on a GPU."""
    V = info.size
    B = len(batch)
    per = [_sentence_tables(info, phrases) for phrases in batch]
    P = max((len(d["phrases"]) for d in per), default=0)
    Lmax = max((len(ph) for d in per for ph, _ in d["phrases"]), default=0)
    S = Lmax + 2
    Wmax = max((d["W"] for d in per), default=0)
    Nmax = max((len(d["word_of_node"]) for d in per), default=2)
    Emax = max((len(d["trips"]) for d in per), default=0) + 1
    Fmax = max((int(d["single_slot"].max()) + 1 for d in per if len(d["single_slot"])), default=0) or 1
    P1 = max(P, 1)
    kmp = np.zeros((B, P1, S, Wmax + 1), dtype=np.int64)
    plen = np.zeros((B, P1), dtype=np.int64)
    last_node = np.full((B, P1), -5, dtype=np.int64)
    # one sorted array for the batch: a hypothesis finds its sentence's move with one search, and no layout
    # gathers its sentences' rows of a [B, K] table (that copy cost more than building the tables)
    ext_keys = np.concatenate([*((b * Nmax * V) + d["ext_keys"] for b, d in enumerate(per)), [np.iinfo(np.int64).max]])
    ext_vals = np.concatenate([*(d["ext_vals"] for d in per), [DEAD]])
    won = np.full((B, Nmax), Wmax, dtype=np.int64)
    n_words = np.zeros(B, dtype=np.int64)
    tail_node = np.tile(np.where(info.tail_open, DEAD, ROOT), (B, 1))  # no banned word in sight
    trip = np.full((B, Emax, 3), -1, dtype=np.int64)
    trip[:, :, 0] = -5
    trip[:, :, 2] = 0
    single_node = np.zeros((B, Nmax), dtype=bool)
    single_tok = np.full((B, Nmax, Fmax), -1, dtype=np.int64)
    static_ban = np.zeros((B, V), dtype=bool)
    # run-ons: the blocks of the batch's distinct banned single words, one after another
    blocks = {w: run_on_block(info, w) for w in sorted({w for d in per for w in d["single_words"]})}
    first = dict(zip(blocks, np.cumsum([0, *(x.size for x in blocks.values())])))
    R = sum(x.size for x in blocks.values())
    run_on_root = np.full((B, Nmax), -1, dtype=np.int64)
    for b, d in enumerate(per):
        run_on_root[b, d["single_nodes"]] = [first[w] for w in d["single_words"]]
    tok_first = np.cumsum([0, *(len(x.tok) for x in blocks.values())])
    end_key = np.iinfo(np.int64).max
    run_on_keys = np.concatenate([*(x.keys + first[w] * V for w, x in blocks.items()), [end_key]])  # sorted
    run_on_vals = np.concatenate([*(x.vals + first[w] for w, x in blocks.items()), [-1]])
    run_on_open = np.concatenate([*(x.open for x in blocks.values()), [False]])
    run_on_start = np.concatenate([*(x.start + t0 for x, t0 in zip(blocks.values(), tok_first)), [0]])
    run_on_count = np.concatenate([*(x.count for x in blocks.values()), [0]])
    run_on_tok = np.concatenate([*(x.tok for x in blocks.values()), [info.eos_id]])
    for b, d in enumerate(per):
        W = d["W"]
        n_words[b] = W
        for p, (ph, anchored) in enumerate(d["phrases"]):
            tab = np.asarray(_kmp_table(ph, W, anchored, S), dtype=np.int64)  # [S, W+1]
            kmp[b, p, :, :W] = tab[:, :W]
            kmp[b, p, :, Wmax] = tab[:, W]  # "other" always lives in the last column
            plen[b, p] = len(ph)
        last_node[b, : len(d["last_nodes"])] = d["last_nodes"]
        won[b, : len(d["word_of_node"])] = np.where(d["word_of_node"] < W, d["word_of_node"], Wmax)
        tail_node[b, d["tail_tokens"]] = d["tail_nodes"]
        trip[b, : len(d["trips"])] = d["trips"]
        static_ban[b, d["static"]] = True
        single_node[b, d["single_nodes"]] = True
        single_tok[b, d["single_node"], d["single_slot"]] = d["single_tok"]

    def dev(a):
        return torch.from_numpy(a).to(device)

    return NegativeTables(
        n_phr=P + sum(len(d["single_nodes"]) for d in per),
        V=V,
        kmp=dev(kmp),
        plen=dev(plen),
        last_node=dev(last_node),
        ext_keys=dev(ext_keys),
        ext_vals=dev(ext_vals),
        word_of_node=dev(won),
        n_words=dev(n_words),
        tail_node=dev(tail_node),
        trip=dev(trip),
        single_node=dev(single_node),
        single_tok=dev(single_tok),
        static_ban=dev(static_ban),
        init_g=torch.cat([torch.zeros(B, P1, dtype=torch.long), torch.full((B, 1), -1)], 1).to(device),
        run_on_root=dev(run_on_root),
        run_on_keys=dev(run_on_keys),
        run_on_vals=dev(run_on_vals),
        run_on_open=dev(run_on_open),
        run_on_start=dev(run_on_start),
        run_on_count=dev(run_on_count),
        run_on_tok=dev(run_on_tok),
        run_on_slot=torch.arange(max(int(run_on_count.max(initial=0)), 1), device=device),
        run_on_pad=info.eos_id,  # EOS appends no letters
        has_run_ons=bool(R),
        has_static_ban=bool(static_ban.any()),
    )


def _look_up(keys: torch.Tensor, vals: torch.Tensor, q: torch.Tensor, missing: int) -> torch.Tensor:
    """``vals`` at ``q`` in sorted ``keys`` (which end with a sentinel above every key), ``missing`` where absent."""
    pos = torch.searchsorted(keys, q).clamp_(max=len(keys) - 1)
    return vals[pos].masked_fill_(keys[pos] != q, missing)


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

    def keep_rows(self, rows: torch.Tensor, bidx: torch.Tensor) -> None:
        """Keep hypotheses ``rows`` only, now of sentences ``bidx`` (``dba.BeamSearch.keep``)."""
        self.bidx = bidx
        self.node, self.g = self.node[rows], self.g[rows]
        self._by_len = {}  # new layouts: their lengths may equal old ones'

    def _rows(self, bidx: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tables' rows for a row layout ``bidx``, gathered once: a decoder's layouts (its hypotheses,
        its candidates) are sentence-major and fixed in length, so the length identifies the layout."""
        rows = self._by_len.get(len(bidx))
        if rows is None:
            t = self.t
            plen = t.plen[bidx]
            P = t.kmp.shape[1]
            trip = t.trip[bidx]  # [n, E, 3]
            pn = trip[:, :, 1].clamp(min=0)
            rows = self._by_len[len(bidx)] = {
                "closing_g": torch.where(plen > 0, plen - 1, -1),  # g of a phrase one word from done
                "last_node": t.last_node[bidx],
                "trip_node": torch.where(trip[:, :, 1] >= 0, trip[:, :, 0], -5),
                "trip_phrase": pn,
                "trip_g": plen.gather(1, pn) - 1,
                "trip_tok": trip[:, :, 2],
                "kmp_row": (bidx[:, None] * P + torch.arange(P, device=bidx.device)[None, :]) * t.kmp.shape[2],
            }
        return rows

    def _closing(self, node, g, rows, bidx):
        """[h] bool: a tracked phrase is one word from complete and the open word is that word, or the open word
        is a banned single word, or runs on from one and is no English word (yet)."""
        t = self.t
        tracked = ((g[:, :-1] == rows["closing_g"]) & (node[:, None] == rows["last_node"])).any(1)
        closing = tracked | t.single_node[bidx, node.clamp(max=t.single_node.shape[1] - 1)]
        return closing | t.run_on_open[g[:, -1]]  # (state -1: the last entry, False)

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
        if t.has_run_ons:
            self._ban_run_ons(scores, value, sync_free)
        if t.has_static_ban:
            scores.masked_fill_(t.static_ban[self.bidx], value)
        closing = self._closing(self.node, self.g, rows, self.bidx)  # [H]
        active = (rows["trip_node"] == self.node[:, None]) & (self.g.gather(1, rows["trip_phrase"]) == rows["trip_g"])
        single_tok = t.single_tok[self.bidx, self.node.clamp(max=t.single_tok.shape[1] - 1)]  # [H, F]
        single = single_tok >= 0
        single_tok = single_tok.clamp(min=0)
        if sync_free:
            scores.masked_fill_(closing[:, None] & self.boundary[None, :], value)
            # write ``value`` where a trip is active and leave the rest: min (or, for a bool mask, max)
            # with a neutral element, so that two trips on one token cannot undo each other
            # (no torch.where with Python numbers: on a GPU each one is a host-to-device copy that waits)
            neutral = False if scores.dtype == torch.bool else float("inf")
            reduce = "amax" if scores.dtype == torch.bool else "amin"
            for hits, tokens in ((active, rows["trip_tok"]), (single, single_tok)):
                vals = torch.full(hits.shape, neutral, dtype=scores.dtype, device=scores.device)
                vals.masked_fill_(hits, value)
                scores.scatter_reduce_(1, tokens, vals, reduce=reduce)
            return
        closing = torch.nonzero(closing)[:, 0]  # hypotheses
        if closing.numel():
            scores[closing[:, None], self.boundary_ids[None, :]] = value
        for hits, tokens in ((active, rows["trip_tok"]), (single, single_tok)):
            h, e = torch.nonzero(hits, as_tuple=True)
            if h.numel():
                scores[h, tokens[h, e]] = value

    def _ban_run_ons(self, scores: torch.Tensor, value, sync_free: bool) -> None:
        """On a banned single word or a word run on from one, every token with letters but the state's allowed
        ones (module docstring): the letters are filled and the allowed ids' scores written back, so this comes
        before every other ban."""
        t = self.t
        state = self.g[:, -1]
        if not sync_free:  # only the hypotheses on such a word (found with nonzero)
            h = torch.nonzero(state >= 0)[:, 0]
            if not h.numel():
                return
            state = state[h]
        ok = t.run_on_tok[(t.run_on_start[state, None] + t.run_on_slot).clamp_(max=len(t.run_on_tok) - 1)]
        ok.masked_fill_(t.run_on_slot >= t.run_on_count[state, None], t.run_on_pad)  # [., A]
        if sync_free:  # (state -1 reads the last entries: no tokens)
            kept = scores.gather(1, ok)
            scores.masked_fill_((state >= 0)[:, None] & self.letters[None, :], value)
            scores.scatter_(1, ok, kept)
            return
        kept = scores[h[:, None], ok]
        scores[h] = scores[h].masked_fill(self.letters, value)
        scores[h[:, None], ok] = kept

    def ends_badly(self, node, g, bidx) -> torch.Tensor:
        """[N] bool: ending the output in this state completes a phrase (the open word closes at the end)."""
        return self._closing(node, g, self._rows(bidx), bidx)

    def advance(self, src: torch.Tensor, tok: torch.Tensor, bidx: torch.Tensor):
        """New (node, g) for candidates (source hypothesis, token)."""
        t = self.t
        rows = self._rows(bidx)
        node = self.node[src]
        g, state = self.g[src, :-1], self.g[src, -1]
        # extend the open word by the token's lead
        ext = _look_up(t.ext_keys, t.ext_vals, (bidx * t.word_of_node.shape[1] + node) * t.V + tok, DEAD)
        ext = torch.where(self.lead_empty[tok], node, ext)
        # the word completed by a break (none when no word was open and the lead is empty)
        brk = self.brk[tok]
        completes = brk & (ext != ROOT)
        Wc = t.kmp.shape[-1]
        w = t.word_of_node[bidx, ext.clamp(max=t.word_of_node.shape[1] - 1)].masked_fill_(ext < 2, Wc - 1)
        # kmp[b, p, g, w] for every candidate and phrase, read through one flat index (gathering the
        # candidates' whole [P, S, Wc] tables per step cost more than the rest of the step)
        flat = t.kmp.view(-1)
        row = rows["kmp_row"]
        g = torch.where(completes[:, None], flat[(row + g) * Wc + w[:, None]], g)
        # inner words (none banned, else the token was banned): each is an "other" word
        g = torch.where(self.has_inner[tok][:, None], flat[(row + g) * Wc + (Wc - 1)], g)
        new_node = torch.where(brk, t.tail_node[bidx, tok], ext)
        return new_node, torch.cat([g, self._run_on_state(state, tok, brk, new_node, bidx)[:, None]], 1)

    def _run_on_state(self, state, tok, brk, new_node, bidx) -> torch.Tensor:
        """The run-on state after ``tok``: followed through the state's block while the token adds letters and
        does not break, else the state a banned single word's node starts (the open word is one), else -1."""
        t = self.t
        if not t.has_run_ons:
            return state
        followed = _look_up(t.run_on_keys, t.run_on_vals, state * t.V + tok, -1)
        started = t.run_on_root[bidx, new_node.clamp(max=t.run_on_root.shape[1] - 1)]
        letters = self.letters[tok]
        new = torch.where((state >= 0) & letters & ~brk, followed, started)
        return torch.where(~letters & ~brk, state, new)  # a token that spells nothing changes nothing

    def set_token_info(self, info: VocabInfo, device):
        self.brk = info.has_break.to(device)
        self.lead_empty = info.lead_empty.to(device)
        self.letters = ~self.lead_empty  # [V] bool: the token appends letters to the open word
        self.has_inner = info.has_inner.to(device)

    def select(self, src, node, g):
        """Take the chosen candidates' state, in place (a captured CUDA graph reads these very tensors)."""
        self.node.copy_(node)
        self.g.copy_(g)
