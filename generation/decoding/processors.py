"""The diverse sampler's per-step stages (``diverse.sample_batch``) as small processors, in the style of
``transformers``' logits processors.

Each step, after the model's step (``step.py``) and ``generate``'s own processors (``hf_compat``):

1. logits processors, ``(input_ids, scores [rows, V]) -> scores``, never in place (the sampler keeps the
   model's log-probabilities for the rows' scores): :class:`BanWords` (every token that would complete a
   banned word: -inf), or :class:`DiscourageWords` (those tokens ``penalty`` lower), then
   :class:`Temperature`;
2. the top k of each row;
3. top-k processors, ``(top_v [rows, k], top_i [rows, k]) -> top_v``: :class:`AvoidSpelledBans` (ban mode:
   no token after which the open word spells a banned word out);
4. :class:`TopKSampler`'s draw: one token per row by inverse CDF over the top k's softmax in float64, from
   the caller's uniform numbers (one per row and step, drawn from each input's own generator: the same
   seed gives the same tokens whatever else is in the batch).

:class:`WordBans` holds the rows' negative state (``banned.NegativeState``): it makes the processors that
read it, and moves it on by the drawn tokens and the rows that leave.
"""

from __future__ import annotations

from typing import Protocol

import torch

from .banned import NegativeState, build_negative_tables


class LogitsProcessor(Protocol):
    """``transformers``' logits processor: the scores of the next token over the vocabulary, changed."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor: ...


class TopKProcessor(Protocol):
    """A processor of each row's k best tokens (``top_v`` [rows, k] scores of the tokens ``top_i``)."""

    def __call__(self, top_v: torch.Tensor, top_i: torch.Tensor) -> torch.Tensor: ...


class BanWords:
    """Ban mode: every token that would complete a banned word of the row's set to -inf (on a copy)."""

    def __init__(self, ns: NegativeState):
        self.ns = ns

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        work = scores.clone()
        self.ns.apply_bans(work, float("-inf"))
        return work


class DiscourageWords:
    """Discourage mode: those tokens ``penalty`` lower (a banned word may then appear)."""

    def __init__(self, ns: NegativeState, penalty: float):
        self.ns = ns
        self.penalty = penalty

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores - self.penalty * self.ns.ban_mask().float()


class Temperature:
    """Scores over ``temperature`` (only made for a temperature other than 1)."""

    def __init__(self, temperature: float):
        self.temperature = temperature

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.temperature


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


class AvoidSpelledBans:
    """:func:`avoid_spelled_bans` as a top-k processor."""

    def __init__(self, ns: NegativeState):
        self.ns = ns

    def __call__(self, top_v: torch.Tensor, top_i: torch.Tensor) -> torch.Tensor:
        return avoid_spelled_bans(self.ns, top_v, top_i)


class WordBans:
    """The rows' negative sets (``banned.py``'s exact word-level tables: one row of the tables per set) and
    their state, one per sampled row; ban mode, or ``discourage`` (a penalty) instead."""

    def __init__(self, ns: NegativeState, discourage: float | None):
        self.ns = ns
        self.discourage = discourage

    @classmethod
    def for_sets(cls, vocab, sets: list[list[str]], rows_per_set: int, discourage: float | None, dev):
        """The bans of ``sets`` (words, each banned as a one-word phrase) for ``rows_per_set`` rows each, set
        after set; None when no set bans anything."""
        tables = build_negative_tables(vocab, [[([w], False) for w in s] for s in sets], dev)
        if tables.empty:
            return None
        row_set = torch.arange(len(sets) * rows_per_set, device=dev) // rows_per_set  # each row's tables' row
        ns = NegativeState(tables, row_set, vocab.boundary.to(dev), vocab.eos_id)
        ns.set_token_info(vocab, dev)
        return cls(ns, discourage)

    def logits_processors(self) -> list[LogitsProcessor]:
        return [BanWords(self.ns) if self.discourage is None else DiscourageWords(self.ns, self.discourage)]

    def top_k_processors(self) -> list[TopKProcessor]:
        return [AvoidSpelledBans(self.ns)] if self.discourage is None else []

    def advance(self, token: torch.Tensor) -> None:
        """Each row's state after its drawn ``token`` [rows]."""
        ns = self.ns
        node, g = ns.advance(torch.arange(len(token), device=token.device), token, ns.bidx)
        ns.select(None, node, g)

    def keep(self, keep: torch.Tensor) -> None:
        """Only the rows ``keep`` go on."""
        self.ns.keep_rows(keep, self.ns.bidx[keep])


class TopKSampler:
    """Top-``k`` sampling: the logits processors, the top k of each row, the top-k processors, then one
    token per row drawn by inverse CDF. Returns (token [rows], dead [rows] bool: every token banned, the
    row cannot go on; its token is then the first of its top k)."""

    def __init__(
        self,
        k: int,
        logits_processors: list[LogitsProcessor] = (),
        top_k_processors: list[TopKProcessor] = (),
    ):
        self.k = k
        self.logits_processors = list(logits_processors)
        self.top_k_processors = list(top_k_processors)

    @classmethod
    def for_options(cls, options, vocab_size: int, bans: WordBans | None) -> TopKSampler:
        """The sampler ``DiverseOptions`` ask for (``top_k``, ``temperature``; ``bans``' processors)."""
        logits = bans.logits_processors() if bans is not None else []
        if options.temperature != 1.0:
            logits.append(Temperature(options.temperature))
        top_k = bans.top_k_processors() if bans is not None else []
        return cls(min(options.top_k, vocab_size), logits, top_k)

    def __call__(
        self, input_ids: torch.Tensor, scores: torch.Tensor, uniform: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per row of ``scores`` [rows, V] (log-probabilities), ``uniform`` [rows] float64 in [0, 1)."""
        for p in self.logits_processors:
            scores = p(input_ids, scores)
        top_v, top_i = torch.topk(scores, self.k, dim=1)
        for p in self.top_k_processors:
            top_v = p(top_v, top_i)
        dead = ~torch.isfinite(top_v).any(1)
        probs = torch.softmax(top_v.masked_fill(dead[:, None], 0.0).double(), dim=1)
        cdf = probs.cumsum(1)
        u = uniform * cdf[:, -1]
        pick = torch.searchsorted(cdf, u[:, None]).clamp_(max=self.k - 1)
        return top_i.gather(1, pick)[:, 0], dead
