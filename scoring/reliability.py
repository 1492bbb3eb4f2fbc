"""How reliable a campaign's similarity judgments are: split-half reliability of the raw and of the
bias-corrected (z-score) candidate estimate, and Krippendorff's alpha (``report --table reliability``).

Rules (docs/explanation/quality-control.md, "Reliability", states the same):

* Judgments: counted ones only (verified assignments, counted workers as in ``scoring.aggregation``),
  slider N/A excluded. Attention copies (a candidate whose text is the reference, or with the
  pseudo-system "0", whichever systems also produced it) and degraded items are left out everywhere
  here: their scores are predictable by design and would inflate every figure.
* The z-score of a judgment uses its worker's mean and population SD over all of that worker's
  counted non-N/A judgments of these same candidates (those with too few judgments to split included); a
  worker whose SD is 0 is left out of the z-score estimate only (``workers_sd0``).
* Split-half reliability is ``annotation.quality.split_half``'s statistic, the one the batch preview predicts: over
  the candidates with at least ``MIN_JUDGMENTS_PER_CANDIDATE`` (2) such judgments (``n_candidates``), for
  each seed 0-19 a ``numpy.random.default_rng(seed)`` permutes each candidate's judgments (candidates in id
  order, judgments in stored order); the first floor(n/2) form one half and the rest the other. The raw
  estimate of a half is the mean of its scores, the z-score estimate the mean of its z-scores (the map back
  to 0-100 is linear and would not change a rank); both estimates use the same permutations. Spearman's rho
  between the two halves' estimates over the candidates, averaged over the 20 splits (``split_half``: the
  halves' agreement, which the plot draws split by split). For the z-score estimate a candidate whose half
  holds only left-out workers sits that split out. A split whose rho is undefined (fewer than 3 candidates,
  or a constant half) is skipped; no defined split gives null. That mean rho is then stepped up by
  Spearman-Brown to ``ratings`` ratings, the lower median of the candidates' judgment counts (a filled batch
  of 3 assignments: 3), with halves of ratings // 2 and the rest (``split_half_reliability``).
* Krippendorff's alpha, interval metric, of the raw slider scores: units are the same candidates (all
  of them, any number of judgments; a unit with one value is not pairable), one value per counted
  judgment. Null when fewer than two pairable values or no variation at all.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from annotation.quality.split_half import (
    MIN_JUDGMENTS_PER_CANDIDATE,
    SPLIT_SEEDS,
    half_sizes,
    ratings_of,
    spearman,
    stepped_up,
)
from scoring.aggregation import CampaignData, worker_scales


def split_half(
    scores: Sequence[Sequence[float]],
    zscores: Sequence[Sequence[float | None]] | None = None,
    *,
    seeds: Sequence[int] = SPLIT_SEEDS,
) -> dict[str, float | None]:
    """Mean split-half Spearman's rho of the raw estimate (and of the z-score one when ``zscores`` is given:
    the same judgments' z-scores, None for a left-out worker). ``scores`` holds the eligible candidates'
    judgments, in the order the permutations apply to (rules in the module docstring)."""
    per_seed = split_rhos_of(scores, zscores, seeds=seeds)
    result = {"raw": _mean_rho(per_seed["raw"])}
    if zscores is not None:
        result["zscore"] = _mean_rho(per_seed["zscore"])
    return result


def _mean_rho(rhos: Sequence[float | None]) -> float | None:
    import numpy as np

    defined = [r for r in rhos if r is not None]
    return float(np.mean(defined)) if defined else None


def split_rhos_of(
    scores: Sequence[Sequence[float]],
    zscores: Sequence[Sequence[float | None]] | None = None,
    *,
    seeds: Sequence[int] = SPLIT_SEEDS,
) -> dict[str, list[float | None]]:
    """Each seed's split-half rho (None where undefined), raw and z-score (an empty list without ``zscores``).

    The permutations are drawn one candidate after another, as the rule says; the half means are then taken
    for all candidates with the same number of judgments at once (numpy's mean of each row: the same
    figures as one candidate at a time, a campaign of 40,000 candidates in about a second)."""
    import numpy as np

    sizes = [len(v) for v in scores]
    groups = {n: np.array([i for i, size in enumerate(sizes) if size == n]) for n in set(sizes)}
    raw = {n: np.array([scores[i] for i in idx], dtype=np.float64).reshape(len(idx), n) for n, idx in groups.items()}
    # z-scores of candidates with no left-out worker go the same way; the others one at a time
    partial = [i for i in range(len(scores)) if zscores is not None and None in zscores[i]]
    z = (
        {
            n: np.array([[v if v is not None else np.nan for v in zscores[i]] for i in idx], dtype=np.float64).reshape(
                len(idx), n
            )
            for n, idx in groups.items()
        }
        if zscores is not None
        else {}
    )
    raw_rhos, z_rhos = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        orders = [rng.permutation(n) for n in sizes]
        raw_a, raw_b = np.empty(len(scores)), np.empty(len(scores))
        z_a, z_b = np.full(len(scores), np.nan), np.full(len(scores), np.nan)
        for n, idx in groups.items():
            first = half_sizes(n)[0]
            order = np.array([orders[i] for i in idx], dtype=np.intp).reshape(len(idx), n)
            halves = np.take_along_axis(raw[n], order, axis=1)
            with warnings.catch_warnings():  # an empty half (one judgment) is NaN, as before
                warnings.simplefilter("ignore", RuntimeWarning)
                raw_a[idx], raw_b[idx] = halves[:, :first].mean(axis=1), halves[:, first:].mean(axis=1)
            if zscores is not None and 0 < first < n:
                zh = np.take_along_axis(z[n], order, axis=1)
                z_a[idx], z_b[idx] = zh[:, :first].mean(axis=1), zh[:, first:].mean(axis=1)
        raw_rhos.append(spearman(raw_a.tolist(), raw_b.tolist()))
        if zscores is None:
            continue
        for i in partial:  # a half of only left-out workers sits the split out (NaN)
            first = half_sizes(sizes[i])[0]
            za = [zscores[i][k] for k in orders[i][:first] if zscores[i][k] is not None]
            zb = [zscores[i][k] for k in orders[i][first:] if zscores[i][k] is not None]
            z_a[i], z_b[i] = (float(np.mean(za)), float(np.mean(zb))) if za and zb else (np.nan, np.nan)
        kept = ~np.isnan(z_a)
        z_rhos.append(spearman(z_a[kept].tolist(), z_b[kept].tolist()))
    return {"raw": raw_rhos, "zscore": z_rhos}


def krippendorff_alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha with the interval metric (squared difference) over units of values; any
    number of values per unit (Krippendorff 2011, "Computing Krippendorff's alpha-reliability").

    Computed from per-unit sums rather than a raters x units matrix, so memory grows with the number of
    judgments, not workers x candidates. (The ``krippendorff`` package computes the same figure and is
    the test suite's oracle; it is GPL-3.0, so the product does not import it.)"""
    import numpy as np

    pairable = [np.asarray(u, dtype=np.float64) for u in units if len(u) >= 2]
    if not pairable:
        return None
    m = np.array([len(u) for u in pairable], dtype=np.float64)
    s1 = np.array([u.sum() for u in pairable])
    s2 = np.array([(u * u).sum() for u in pairable])
    n = m.sum()
    # sum over ordered pairs i != j of (v_i - v_j)^2 within a set of k values = 2 k sum v^2 - 2 (sum v)^2
    observed = float(((2 * m * s2 - 2 * s1 * s1) / (m - 1)).sum() / n)
    expected = float((2 * n * s2.sum() - 2 * s1.sum() ** 2) / (n * (n - 1)))
    if expected <= 0:
        return None
    return 1.0 - observed / expected


def _split_inputs(data: CampaignData, min_per_candidate: int):
    """(candidates, eligible raw scores, their z-scores, workers_sd0): what the split-half figures run on."""
    candidates = sorted(
        (c for c in data.candidates if not c.is_attention_copy and not c.is_degraded and c.scores), key=lambda c: c.id
    )
    usable, workers_sd0 = worker_scales(candidates)
    eligible = [c for c in candidates if len(c.scores) >= min_per_candidate]
    scores = [[float(s) for s in c.scores] for c in eligible]
    zscores = [
        [(s - usable[w].mean) / usable[w].sd if w in usable else None for w, s in zip(c.workers, c.scores)]
        for c in eligible
    ]
    return candidates, scores, zscores, workers_sd0


def reliability_and_splits(
    data: CampaignData, *, min_per_candidate: int = MIN_JUDGMENTS_PER_CANDIDATE, seeds: Sequence[int] = SPLIT_SEEDS
) -> tuple[dict, dict[str, list[float | None]]]:
    """The reliability figures of a loaded campaign (rules in the module docstring) and each split's rho, raw
    and z-score (None where undefined): the spread behind the means, which the dashboard's plot draws. One
    pass over the splits gives both."""
    candidates, scores, zscores, workers_sd0 = _split_inputs(data, min_per_candidate)
    splits = split_rhos_of(scores, zscores, seeds=seeds)
    halves = {"raw": _mean_rho(splits["raw"]), "zscore": _mean_rho(splits["zscore"])}
    ratings = ratings_of([len(s) for s in scores])
    figures = {
        "split_half": halves,
        "n_candidates": len(scores),
        "krippendorff_alpha": krippendorff_alpha_interval([c.scores for c in candidates]),
        "split_half_reliability": {k: stepped_up(rho, ratings) for k, rho in halves.items()},
        "ratings": ratings,
        "workers_sd0": workers_sd0,
        "n_splits": len(seeds),
        "min_judgments_per_candidate": min_per_candidate,
    }
    return figures, splits


def reliability(
    data: CampaignData, *, min_per_candidate: int = MIN_JUDGMENTS_PER_CANDIDATE, seeds: Sequence[int] = SPLIT_SEEDS
) -> dict:
    """The reliability figures of a loaded campaign (rules in the module docstring)."""
    return reliability_and_splits(data, min_per_candidate=min_per_candidate, seeds=seeds)[0]
