"""EASL (Sakaguchi & Van Durme 2018): scalar scores as Beta posteriors, judgments sent where they inform.

Each item (a candidate paraphrase) has a Beta(a, b) over its similarity in [0, 1], starting at
Beta(1, 1). A slider value s = score / 100 updates a += s, b += 1 - s; the point estimate is the mode
(a-1)/(a+b-2) -- which, from that prior, is exactly the mean of the slider values, so EASL's gain is in
*which* items get judged, not in the estimate. Round 0 shows every item once; later rounds take the
items of highest variance as anchors and fill each HIT with partners from the same reference,
sampled by TrueSkill-style match quality (items of similar, uncertain means). EASL has no stopping
rule; ``stopping_reason`` adds one (every variance below a threshold, or a judgment budget spent).

``zscore_estimates`` is the bias-corrected alternative: each worker's scores standardised by their
own mean and deviation (as WMT's direct assessment does), averaged per item.

Plain functions over plain data (no Django): ``easl_rounds.py`` maps them onto batches.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev

DEFAULT_G = 0.1
DEFAULT_ITEMS_PER_HIT = 5
DEFAULT_VARIANCE_THRESHOLD = 0.02  # Beta variance m(1-m)/(n+3): about 10 judgments for an item near 0.5


@dataclass(frozen=True)
class BetaPosterior:
    a: float = 1.0
    b: float = 1.0

    def update(self, score: float | None) -> BetaPosterior:
        """One slider judgment (0-100); None (the N/A slider of a nonsensical candidate) is skipped."""
        if score is None:
            return self
        s = min(1.0, max(0.0, float(score) / 100.0))
        return BetaPosterior(self.a + s, self.b + 1.0 - s)

    @property
    def judgments(self) -> float:
        return self.a + self.b - 2.0

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)

    @property
    def mode(self) -> float:
        """(a-1)/(a+b-2); the mean where the mode is undefined (no judgment yet)."""
        denominator = self.a + self.b - 2.0
        if denominator <= 1e-12:
            return self.mean
        return min(1.0, max(0.0, (self.a - 1.0) / denominator))

    @property
    def variance(self) -> float:
        total = self.a + self.b
        return self.a * self.b / (total * total * (total + 1.0))


def posteriors_from_scores(
    scores: Mapping[Hashable, Iterable[float | None]], items: Iterable[Hashable] = ()
) -> dict[Hashable, BetaPosterior]:
    """Posterior of every item (``items`` adds ones with no judgment yet, at Beta(1, 1))."""
    out = {item: BetaPosterior() for item in items}
    for item, values in scores.items():
        post = out.get(item, BetaPosterior())
        for value in values:
            post = post.update(value)
        out[item] = post
    return out


def match_quality(m_i: float, var_i: float, m_j: float, var_j: float, *, g: float = DEFAULT_G) -> float:
    """q = sqrt(2g^2/c) * exp(-(m_j - m_i)^2 / (2c)), c = 2g^2 + var_i + var_j."""
    c = 2.0 * g * g + var_i + var_j
    return math.sqrt(2.0 * g * g / c) * math.exp(-((m_j - m_i) ** 2) / (2.0 * c))


@dataclass(frozen=True)
class HitPlan:
    """One HIT to create: the group (reference) and its items (candidates), in display order."""

    group: Hashable
    items: tuple
    anchor: Hashable | None = None


def first_round(
    groups: Mapping[Hashable, Sequence[Hashable]], *, items_per_hit: int = DEFAULT_ITEMS_PER_HIT, seed: int = 0
) -> list[HitPlan]:
    """Every item exactly once, in HITs of one group, sizes as even as possible (7 -> 4 + 3)."""
    rng = random.Random(seed)
    plans = []
    for group in sorted(groups, key=str):
        items = list(groups[group])
        if not items:
            continue
        rng.shuffle(items)
        n_hits = math.ceil(len(items) / items_per_hit)
        for k in range(n_hits):
            plans.append(HitPlan(group=group, items=tuple(items[k::n_hits])))
    rng.shuffle(plans)
    return plans


def _weighted_sample(rng: random.Random, population: list, weights: list[float], k: int) -> list:
    """k distinct elements, each draw proportional to the remaining weights."""
    population, weights, chosen = list(population), list(weights), []
    while population and len(chosen) < k:
        total = sum(weights)
        if total <= 0:
            index = rng.randrange(len(population))
        else:
            index = rng.choices(range(len(population)), weights=weights)[0]
        chosen.append(population.pop(index))
        weights.pop(index)
    return chosen


def next_round(
    groups: Mapping[Hashable, Sequence[Hashable]],
    posteriors: Mapping[Hashable, BetaPosterior],
    *,
    n_hits: int,
    items_per_hit: int = DEFAULT_ITEMS_PER_HIT,
    g: float = DEFAULT_G,
    seed: int = 0,
) -> list[HitPlan]:
    """``n_hits`` HITs: the highest-variance items as anchors (ties broken at random), each with partners
    of its own group drawn without replacement with probability proportional to match quality."""
    rng = random.Random(seed)
    group_of = {item: group for group, items in groups.items() for item in items}
    ranked = list(group_of)
    rng.shuffle(ranked)
    ranked.sort(key=lambda item: posteriors.get(item, BetaPosterior()).variance, reverse=True)
    plans = []
    for anchor in ranked[: max(0, n_hits)]:
        group = group_of[anchor]
        a = posteriors.get(anchor, BetaPosterior())
        others = [item for item in groups[group] if item != anchor]
        weights = [
            match_quality(
                a.mode,
                a.variance,
                posteriors.get(o, BetaPosterior()).mode,
                posteriors.get(o, BetaPosterior()).variance,
                g=g,
            )
            for o in others
        ]
        items = [anchor, *_weighted_sample(rng, others, weights, items_per_hit - 1)]
        rng.shuffle(items)
        plans.append(HitPlan(group=group, items=tuple(items), anchor=anchor))
    return plans


def stopping_reason(
    posteriors: Mapping[Hashable, BetaPosterior],
    *,
    variance_threshold: float | None,
    judgments: int = 0,
    judgment_budget: int | None = None,
) -> str | None:
    """Why to stop collecting (None: go on): the budget is spent, or every variance is below the threshold."""
    if judgment_budget is not None and judgments >= judgment_budget:
        return f"judgment budget reached ({judgments} of {judgment_budget})"
    if not posteriors:
        return "no items to judge"
    worst = max(p.variance for p in posteriors.values())
    if variance_threshold is not None and worst < variance_threshold:
        return f"every variance is below {variance_threshold} (largest {worst:.4f})"
    return None


def zscore_estimates(judgments: Iterable[tuple[Hashable, Hashable, float | None]]) -> dict[Hashable, float]:
    """Per item, the mean of its judgments after standardising each worker's scores by that worker's mean
    and deviation (WMT direct assessment). Removes a worker's offset and scale; N/A scores are skipped;
    a worker whose scores do not vary contributes 0."""
    rows = [(worker, item, float(score)) for worker, item, score in judgments if score is not None]
    by_worker: dict[Hashable, list[float]] = {}
    for worker, _, score in rows:
        by_worker.setdefault(worker, []).append(score)
    stats = {w: (fmean(s), pstdev(s)) for w, s in by_worker.items()}
    per_item: dict[Hashable, list[float]] = {}
    for worker, item, score in rows:
        mean, sd = stats[worker]
        per_item.setdefault(item, []).append((score - mean) / sd if sd > 1e-9 else 0.0)
    return {item: fmean(z) for item, z in per_item.items()}
