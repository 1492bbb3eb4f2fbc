"""Split-half reliability of a similarity table: the one statistic the batch preview predicts
(``annotation.batches.preview``) and the campaign's dashboard and ``report --table reliability`` show
(``scoring.reliability``). It lives here, below both, because annotation must not import scoring.

The rule:

* a candidate takes part with at least ``MIN_JUDGMENTS_PER_CANDIDATE`` (2) judgments: its judgments are split
  at random into two halves of ``n // 2`` and ``n - n // 2`` (``half_sizes``), each half is averaged;
* the halves' agreement is Spearman's rho between the first halves' means and the second halves' means over
  the candidates (``spearman``; average ranks for ties; undefined with fewer than 3 candidates or a constant
  side), the mean over the splits where the dashboard draws several;
* that correlation is stepped up to the reliability of a candidate's mean over R ratings by the
  Spearman-Brown formula for halves of ``R // 2`` and ``R - R // 2`` ratings (``stepped_up``; a correlation
  at or below 0 steps up to 0). R is the batch's assignments per HIT in the preview, and on the dashboard the
  number of judgments most candidates have: the lower median of the participating candidates' counts
  (``ratings_of``), so that a batch of 3 assignments shows "stepped up to 3 ratings" on both.

With 3 ratings the halves are 1 and 2 ratings; the unequal-halves Spearman-Brown inversion
(``rho1_from_halves``) recovers the one-rating reliability behind their correlation before stepping up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MIN_JUDGMENTS_PER_CANDIDATE = 2  # the fewest that split into two halves of at least one
SPLIT_SEEDS = tuple(range(20))  # the dashboard's splits


def half_sizes(n: int) -> tuple[int, int]:
    """The two halves a candidate's ``n`` judgments split into: the first ``n // 2``, the rest."""
    return n // 2, n - n // 2


def rank_rows(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based; tied values share the mean of their ranks) of each row of a 2-D array."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    rows, n = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=1)
    position = np.broadcast_to(np.arange(n), (rows, n))
    starts = np.ones((rows, n), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones((rows, n), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((rows, n))
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, axis=1)
    return ranks


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of ``x`` with the same row of ``y`` (Pearson's r of their average ranks);
    NaN where undefined (fewer than 3 columns, a constant row, a NaN in the row)."""
    import numpy as np

    x, y = np.atleast_2d(np.asarray(x, dtype=np.float64)), np.atleast_2d(np.asarray(y, dtype=np.float64))
    if x.shape[1] < 3:
        return np.full(x.shape[0], np.nan)
    rx, ry = rank_rows(x), rank_rows(y)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    defined = (denominator > 0) & ~np.isnan(x).any(axis=1) & ~np.isnan(y).any(axis=1)
    return np.where(defined, (rx * ry).sum(axis=1) / np.where(defined, denominator, 1.0), np.nan)


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho of two equally long sequences; None where undefined (fewer than 3 pairs, a constant side)."""
    import numpy as np

    rho = float(spearman_rows(np.asarray(a, dtype=np.float64)[None, :], np.asarray(b, dtype=np.float64)[None, :])[0])
    return None if math.isnan(rho) else rho


def spearman_brown(rho1: float, ratings: int) -> float:
    """Reliability of a mean of ``ratings`` ratings whose single reliability is ``rho1``."""
    return ratings * rho1 / (1 + (ratings - 1) * rho1) if ratings > 0 else 0.0


def rho1_from_halves(r: float, a: int, b: int) -> float:
    """The single-rating reliability behind a half correlation ``r`` (of the mean of ``a`` ratings with the mean
    of ``b`` others; 0 for r <= 0): classical test theory's r = rho1 / sqrt((rho1 + (1 - rho1) / a) (rho1 + (1 -
    rho1) / b)), inverted.

    Solves [ab - r^2 (a-1)(b-1)] u^2 - r^2 (a+b-2) u - r^2 = 0 for its positive root."""
    if r <= 0:
        return 0.0
    r = min(r, 1.0)
    r2 = r * r
    qa = a * b - r2 * (a - 1) * (b - 1)
    qb = r2 * (a + b - 2)
    return min(1.0, (qb + math.sqrt(qb * qb + 4 * qa * r2)) / (2 * qa))


def split_half_reliability(r: float, a: int, b: int) -> float:
    """A split-half correlation (halves of ``a`` and ``b`` ratings) stepped up to all a + b ratings."""
    return spearman_brown(rho1_from_halves(r, a, b), a + b)


def stepped_up(r: float | None, ratings: int | None) -> float | None:
    """The halves' correlation ``r`` stepped up to ``ratings`` ratings (halves ``half_sizes(ratings)``); None
    when ``r`` is undefined or fewer than 2 ratings leave nothing to split."""
    if r is None or ratings is None or ratings < MIN_JUDGMENTS_PER_CANDIDATE:
        return None
    return split_half_reliability(r, *half_sizes(ratings))


def ratings_of(counts: Sequence[int]) -> int | None:
    """The number of ratings the dashboard steps up to: the lower median of the participating candidates'
    judgment counts (a batch of R assignments, filled: R); None without candidates."""
    if not counts:
        return None
    ordered = sorted(counts)
    return int(ordered[(len(ordered) - 1) // 2])


def split_half_label(ratings: int | None) -> str:
    """The figure's name, the same on the batch preview and the dashboard."""
    if ratings is None or ratings < MIN_JUDGMENTS_PER_CANDIDATE:
        return "Split-half reliability (no candidate with two judgments to split)"
    return f"Split-half reliability, stepped up to {ratings} ratings (Spearman-Brown)"
