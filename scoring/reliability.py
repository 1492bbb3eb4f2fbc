"""How reliable a campaign's similarity judgments are: split-half reliability of the raw and of the
bias-corrected (z-score) candidate estimate, and Krippendorff's alpha (``report --table reliability``).

Rules (the README's "report" section states the same):

* Judgments: counted ones only (verified assignments, counted workers as in ``scoring.aggregation``),
  slider N/A excluded. Attention copies (a candidate whose text is the reference, or with the
  pseudo-system "0", whichever systems also produced it) and degraded items are left out everywhere
  here: their scores are predictable by design and would inflate every figure.
* The z-score of a judgment uses its worker's mean and population SD over all of that worker's
  counted non-N/A judgments of these same candidates (those with fewer than 4 judgments included); a
  worker whose SD is 0 is left out of the z-score estimate only (``workers_sd0``).
* Split-half reliability: over the candidates with at least ``MIN_JUDGMENTS_PER_CANDIDATE`` (4) such
  judgments (``n_candidates``), for each seed 0-19 a ``numpy.random.default_rng(seed)`` permutes each
  candidate's judgments (candidates in id order, judgments in stored order); the first floor(n/2)
  form one half and the rest the other. The raw estimate of a half is the mean of its scores, the
  z-score estimate the mean of its z-scores (the map back to 0-100 is linear and would not change a
  rank); both estimates use the same permutations. Spearman's rho between the two halves' estimates
  over the candidates, averaged over the 20 splits. For the z-score estimate a candidate whose half
  holds only left-out workers sits that split out. A split whose rho is undefined (fewer than 3
  candidates, or a constant half) is skipped; no defined split gives null. No Spearman-Brown correction.
* Krippendorff's alpha, interval metric, of the raw slider scores: units are the same candidates (all
  of them, any number of judgments; a unit with one value is not pairable), one value per counted
  judgment. Null when fewer than two pairable values or no variation at all.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from .aggregation import CampaignData, worker_scales

MIN_JUDGMENTS_PER_CANDIDATE = 4
SPLIT_SEEDS = tuple(range(20))


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho, None where undefined (fewer than 3 pairs, a constant side)."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = float(spearmanr(a, b)[0])
    return None if math.isnan(rho) else rho


def split_half(
    scores: Sequence[Sequence[float]],
    zscores: Sequence[Sequence[float | None]] | None = None,
    *,
    seeds: Sequence[int] = SPLIT_SEEDS,
) -> dict[str, float | None]:
    """Mean split-half Spearman's rho of the raw estimate (and of the z-score one when ``zscores`` is given:
    the same judgments' z-scores, None for a left-out worker). ``scores`` holds the eligible candidates'
    judgments, in the order the permutations apply to (rules in the module docstring)."""
    raw_rhos, z_rhos = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        raw_a, raw_b, z_a, z_b = [], [], [], []
        for i, values in enumerate(scores):
            n = len(values)
            order = rng.permutation(n)
            first, rest = order[: n // 2], order[n // 2 :]
            raw_a.append(float(np.mean([values[k] for k in first])))
            raw_b.append(float(np.mean([values[k] for k in rest])))
            if zscores is not None:
                za = [zscores[i][k] for k in first if zscores[i][k] is not None]
                zb = [zscores[i][k] for k in rest if zscores[i][k] is not None]
                if za and zb:
                    z_a.append(float(np.mean(za)))
                    z_b.append(float(np.mean(zb)))
        for rhos, a, b in ((raw_rhos, raw_a, raw_b), (z_rhos, z_a, z_b)):
            rho = _spearman(a, b)
            if rho is not None:
                rhos.append(rho)
    result = {"raw": float(np.mean(raw_rhos)) if raw_rhos else None}
    if zscores is not None:
        result["zscore"] = float(np.mean(z_rhos)) if z_rhos else None
    return result


def krippendorff_alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha with the interval metric (squared difference) over units of values; any
    number of values per unit (Krippendorff 2011, "Computing Krippendorff's alpha-reliability").

    Computed from per-unit sums rather than a raters x units matrix, so memory grows with the number of
    judgments, not workers x candidates. (The ``krippendorff`` package computes the same figure and is
    the test suite's oracle; it is GPL-3.0, so the product does not import it.)"""
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


def split_rhos(
    data: CampaignData, *, min_per_candidate: int = MIN_JUDGMENTS_PER_CANDIDATE, seeds: Sequence[int] = SPLIT_SEEDS
) -> dict[str, list[float | None]]:
    """Each split's Spearman's rho, raw and z-score (None where undefined): the spread behind the means of
    ``reliability`` (the dashboard's reliability plot draws them)."""
    _, scores, zscores, _ = _split_inputs(data, min_per_candidate)
    per_seed = [split_half(scores, zscores, seeds=[seed]) for seed in seeds]
    return {"raw": [h["raw"] for h in per_seed], "zscore": [h["zscore"] for h in per_seed]}


def reliability(
    data: CampaignData, *, min_per_candidate: int = MIN_JUDGMENTS_PER_CANDIDATE, seeds: Sequence[int] = SPLIT_SEEDS
) -> dict:
    """The reliability figures of a loaded campaign (rules in the module docstring)."""
    candidates, scores, zscores, workers_sd0 = _split_inputs(data, min_per_candidate)
    halves = split_half(scores, zscores, seeds=seeds)
    return {
        "split_half": {"raw": halves["raw"], "zscore": halves["zscore"]},
        "n_candidates": len(scores),
        "krippendorff_alpha": krippendorff_alpha_interval([c.scores for c in candidates]),
        "workers_sd0": workers_sd0,
        "n_splits": len(seeds),
        "min_judgments_per_candidate": min_per_candidate,
    }
