"""What a regressor's held-out part says, in the words a release's user needs: the held-out Spearman's rho with
its n and a 95% interval (and a warning when n is small), and a calibration table: for score thresholds, how
often the held-out pairs predicted at or above them were judged similar by people.

Why here: the dataset card, the manifest, the job result pages and the training all state these figures, so
each rule (what "judged similar" means, which thresholds, when n is small, which interval) lives once.

* **Judged similar**: the pair's training target (its mean counted human similarity, 0-100; the bias-corrected
  estimate under ``--target zscore``) is at least ``SIMILAR_AT`` = 60. ParaBank defines no such cut (it reports
  mean similarities, 0-100 slider, 100 = same meaning); 60 sits above the slider's middle, near the STS scale's
  "roughly equivalent" (3 of 5), and below the means of ParaBank's systems (Tab. 4: about 60-80), so it separates
  pairs people found close in meaning from those they did not, not good paraphrases from excellent ones.
* **Calibration**: kept at training time (``scoring.regressor``) as counts, from the model fitted on the train
  part and evaluated once on the held-out references (the same predictions as the held-out rho): per threshold
  in ``CALIBRATION_THRESHOLDS``, the held-out pairs predicted at or above it and how many of them were judged
  similar. Precision is similar / pairs, with a Wilson 95% interval (right for small counts and proportions
  near 0 or 1). The deployed model is refit on every judged pair, so the table describes the recipe, as the
  rho does.
* **Interval of rho**: the bootstrap interval training records (references resampled); for a regressor trained
  before that was recorded, Fisher's z with Bonett and Wright's (2000) standard error for Spearman's rho,
  sqrt((1 + rho^2 / 2) / (n - 3)).
* **Cross-validated rho**: ``train_regressor`` also keeps a nested grouped cross-validation over every reference
  (``spearman_cv``, ``spearman_cv_ci95``, ``n_cv``, ``n_references_cv``, ``cv_folds``: each pair predicted by a
  model whose estimator was chosen and fitted without its reference), stated beside the held-out rho with the
  same interval method (``cv_rho``); absent for a regressor trained before it was kept or with ``--cv-folds 0``.
* **Small n**: fewer than ``SMALL_N`` = 100 held-out pairs: the interval is wide and the figures are a rough
  guide; every place that prints them says so.
* **Too few references**: fewer than ``MIN_INTERVAL_REFERENCES`` = 5 held-out references: no interval is shown
  ("no interval: too few references"). A bootstrap over references resamples 2 references into at most 3
  different sets, so its "95% interval" (0.71 to 1.00 around 0.714) says nothing about how far the figure may
  be off; the recorded bounds stay in the metrics.
* **Calibration or not**: every page that shows the calibration table takes its title and its note from
  ``calibration_title`` and ``calibration_note``, so none implies calibrated scores where there is no map: the
  title then says the table is precision at cuts on the raw prediction, and the note why there is no map.
* **Calibration map** (``calibration_map`` in the metrics, what a release's ``score`` goes through): an isotonic
  regression (increasing, clipped outside its range, 0-100) of the held-out pairs' training target on their
  predicted score, fitted by ``train_regressor`` on the same held-out predictions as the table, kept as plain
  JSON (``x``/``y`` breakpoints, the pairs it was fitted on) and applied by ``calibrate`` (``np.interp``, no
  scikit-learn or Django needed). A calibrated score is the expected mean human similarity of held-out pairs
  predicted like this one, so a release's scores speak the judges' scale rather than the regressor's (a ridge
  shrinks towards the mean: its 80 may be people's 70). Isotonic because it assumes nothing but that a higher
  prediction means no lower similarity, and it keeps the pairs' order. Fewer than ``MIN_CALIBRATION_PAIRS`` =
  20 held-out pairs fit no map (a step function through a handful of points would move scores by noise): the
  record says so (``x`` null) and a release keeps the raw scores. Absent for a regressor trained before the map
  was kept (retrain to get it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

SIMILAR_AT = 60.0
CALIBRATION_THRESHOLDS = (50, 60, 70, 80, 90)
SMALL_N = 100
MIN_INTERVAL_REFERENCES = 5
Z95 = 1.959963984540054
MIN_CALIBRATION_PAIRS = 20
CALIBRATION_METHOD = "isotonic"


def calibration_counts(human: Sequence[float], predicted: Sequence[float]) -> dict[str, Any]:
    """The calibration a regressor keeps in its metrics (counts only, JSON): ``similar_at``, ``pairs`` and
    ``similar`` over the whole held-out part, and per threshold the pairs predicted at or above it and how many
    of them were judged similar."""
    import numpy as np  # loaded when a regressor is trained, not with the app

    human = np.asarray(human, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    similar = human >= SIMILAR_AT
    rows = []
    for threshold in CALIBRATION_THRESHOLDS:
        above = predicted >= threshold
        rows.append({"min_score": threshold, "pairs": int(above.sum()), "similar": int((above & similar).sum())})
    return {"similar_at": SIMILAR_AT, "pairs": int(len(human)), "similar": int(similar.sum()), "rows": rows}


def calibration_map_fit(human: Sequence[float], predicted: Sequence[float]) -> dict[str, Any]:
    """The calibration map a regressor keeps in its metrics (JSON): ``method``, ``pairs`` (the held-out pairs it
    was fitted on), ``min_pairs`` and the breakpoints ``x`` (predicted scores, increasing) and ``y`` (the expected
    target there, non-decreasing, 0-100); ``x`` and ``y`` are null with fewer than ``MIN_CALIBRATION_PAIRS``
    pairs. Deterministic: the same pairs give the same breakpoints."""
    import numpy as np  # loaded when a regressor is trained, not with the app
    from sklearn.isotonic import IsotonicRegression

    human = np.asarray(human, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    kept = {"method": CALIBRATION_METHOD, "pairs": int(len(human)), "min_pairs": MIN_CALIBRATION_PAIRS}
    if len(human) < MIN_CALIBRATION_PAIRS:
        return {**kept, "x": None, "y": None}
    fitted = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=100.0).fit(predicted, human)
    return {**kept, "x": [float(v) for v in fitted.X_thresholds_], "y": [float(v) for v in fitted.y_thresholds_]}


def calibrate(scores: Sequence[float | None], x: Sequence[float], y: Sequence[float]) -> list[float | None]:
    """``scores`` through the map with breakpoints ``x``/``y`` (linear between them, clipped outside: what the
    isotonic regression predicts); a None stays None."""
    import numpy as np  # loaded when a release is written, not with the app

    known = [s for s in scores if s is not None]
    mapped = iter(np.interp(np.asarray(known, dtype=np.float64), x, y).tolist()) if known else iter(())
    return [None if s is None else next(mapped) for s in scores]


@dataclasses.dataclass(frozen=True)
class ScoreCalibration:
    """A regressor's calibration map (``calibration_map_fit``): ``fitted`` when it has breakpoints."""

    pairs: int  # the held-out pairs it was (or would have been) fitted on
    min_pairs: int
    x: tuple[float, ...]
    y: tuple[float, ...]
    method: str = CALIBRATION_METHOD

    @property
    def fitted(self) -> bool:
        return bool(self.x)

    def apply(self, scores: Sequence[float | None]) -> list[float | None]:
        """``scores`` calibrated (``calibrate``); unchanged when no map was fitted."""
        return calibrate(scores, self.x, self.y) if self.fitted else list(scores)


def score_calibration_of(metrics: Mapping[str, Any] | None) -> ScoreCalibration | None:
    """The regressor's calibration map; None for a regressor trained before it was kept (retrain to get it)."""
    kept = (metrics or {}).get("calibration_map")
    if not kept:
        return None
    return ScoreCalibration(
        pairs=int(kept["pairs"]),
        min_pairs=int(kept.get("min_pairs") or MIN_CALIBRATION_PAIRS),
        x=tuple(float(v) for v in kept.get("x") or ()),
        y=tuple(float(v) for v in kept.get("y") or ()),
        method=kept.get("method") or CALIBRATION_METHOD,
    )


def wilson_interval(k: int, n: int) -> tuple[float, float] | None:
    """95% Wilson score interval of the proportion k / n; None when n is 0."""
    if n <= 0:
        return None
    p = k / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


@dataclasses.dataclass(frozen=True)
class CalibrationRow:
    min_score: float
    pairs: int
    similar: int
    precision: float | None  # similar / pairs
    interval: tuple[float, float] | None  # Wilson 95% of the precision
    recall: float | None  # the share of all held-out similar pairs that are at or above the threshold


@dataclasses.dataclass(frozen=True)
class Calibration:
    similar_at: float
    pairs: int
    similar: int
    rows: list[CalibrationRow]

    @property
    def base_rate(self) -> float | None:
        """The share of held-out pairs judged similar: the precision of keeping every pair."""
        return self.similar / self.pairs if self.pairs else None


def calibration_of(metrics: Mapping[str, Any] | None) -> Calibration | None:
    """The regressor's calibration with its precisions and intervals; None for a regressor trained before it was
    kept (retrain to get it)."""
    kept = (metrics or {}).get("calibration")
    if not kept:
        return None
    rows = []
    for r in kept["rows"]:
        pairs, similar = int(r["pairs"]), int(r["similar"])
        rows.append(
            CalibrationRow(
                min_score=r["min_score"],
                pairs=pairs,
                similar=similar,
                precision=similar / pairs if pairs else None,
                interval=wilson_interval(similar, pairs),
                recall=similar / kept["similar"] if kept["similar"] else None,
            )
        )
    return Calibration(similar_at=kept["similar_at"], pairs=int(kept["pairs"]), similar=int(kept["similar"]), rows=rows)


@dataclasses.dataclass(frozen=True)
class HeldOutRho:
    rho: float | None
    n: int | None  # held-out pairs
    n_references: int | None
    interval: tuple[float, float] | None
    interval_method: str | None  # "bootstrap" (references resampled) or "Fisher z"

    @property
    def too_few_references(self) -> bool:
        """Fewer than ``MIN_INTERVAL_REFERENCES`` references: an interval would be meaningless, none is shown."""
        return self.n_references is not None and self.n_references < MIN_INTERVAL_REFERENCES

    @property
    def small(self) -> bool:
        """Fewer than ``SMALL_N`` held-out pairs (or an unknown n): a rough figure."""
        return self.n is None or self.n < SMALL_N

    def text(self) -> str:
        """``0.531 (n = 1,110 held-out pairs of 80 references; 95% interval 0.48 to 0.58, bootstrap)``."""
        if self.rho is None:
            return "not defined (constant predictions or targets)" if self.n else "not recorded"
        refs = f" of {self.n_references:,} references" if self.n_references else ""
        n = f"n = {self.n:,} held-out pairs{refs}" if self.n is not None else "n not recorded"
        if self.too_few_references:
            ci = f"; no interval: too few references, fewer than {MIN_INTERVAL_REFERENCES}"
        elif self.interval:
            ci = f"; 95% interval {self.interval[0]:.2f} to {self.interval[1]:.2f}, {self.interval_method}"
        else:
            ci = "; no interval"
        return f"{self.rho:.3f} ({n}{ci})"

    def warning(self) -> str | None:
        """What to say when n is small, else None."""
        if not self.small:
            return None
        n = "an unknown number of" if self.n is None else f"only {self.n:,}"
        return (
            f"The held-out part has {n} pairs (fewer than {SMALL_N}): the rho and the calibration are rough "
            "estimates with wide intervals. Judge more pairs and retrain for firmer figures."
            + (
                f" With {self.n_references} held-out reference(s) no interval is shown: any would be meaningless."
                if self.too_few_references
                else ""
            )
        )

    def as_dict(self) -> dict[str, Any]:
        """The manifest's record."""
        return {
            "rho": self.rho,
            "n": self.n,
            "n_references": self.n_references,
            "ci95": list(self.interval) if self.interval else None,
            "interval_method": self.interval_method,
            "small_n": self.small,
            "too_few_references": self.too_few_references,
        }


def fisher_interval(rho: float, n: int) -> tuple[float, float] | None:
    """95% interval of Spearman's rho by Fisher's z with Bonett and Wright's standard error; None for n <= 3."""
    if n <= 3 or not -1 < rho < 1:
        return None
    z = math.atanh(rho)
    se = math.sqrt((1 + rho * rho / 2) / (n - 3))
    return math.tanh(z - Z95 * se), math.tanh(z + Z95 * se)


def held_out_rho(metrics: Mapping[str, Any] | None) -> HeldOutRho:
    """The held-out rho of a regressor's metrics with its n and interval (see the module docstring)."""
    m = metrics or {}
    rho, n = m.get("spearman_test"), m.get("n_test")
    interval, method = None, None
    if m.get("spearman_test_ci95"):
        interval, method = tuple(m["spearman_test_ci95"]), "bootstrap over references"
    elif rho is not None and n:
        interval = fisher_interval(float(rho), int(n))
        method = "Fisher z" if interval else None
    return HeldOutRho(
        rho=None if rho is None else float(rho),
        n=None if n is None else int(n),
        n_references=m.get("n_references_test"),
        interval=interval,
        interval_method=method,
    )


def cv_rho(metrics: Mapping[str, Any] | None) -> HeldOutRho | None:
    """The nested grouped cross-validation's rho with its n and interval; None when it was not kept."""
    m = metrics or {}
    if m.get("spearman_cv") is None:
        return None
    interval = tuple(m["spearman_cv_ci95"]) if m.get("spearman_cv_ci95") else None
    return HeldOutRho(
        rho=float(m["spearman_cv"]),
        n=None if m.get("n_cv") is None else int(m["n_cv"]),
        n_references=m.get("n_references_cv"),
        interval=interval,
        interval_method="bootstrap over references" if interval else None,
    )


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def calibration_rows_text(calibration: Calibration) -> list[tuple[str, str, str, str, str]]:
    """The table's cells, the same on the card and the result pages: ``(score >=, pairs, judged similar,
    precision (95% interval), share of similar pairs kept)``."""

    def precision(k: int, n: int) -> str:
        interval = wilson_interval(k, n)
        return percent(k / n if n else None) + (f" ({percent(interval[0])}-{percent(interval[1])})" if interval else "")

    everything = CalibrationRow(
        0, calibration.pairs, calibration.similar, None, None, 1.0 if calibration.similar else None
    )
    return [
        (
            "any" if r is everything else f"{r.min_score:g}",
            f"{r.pairs:,}",
            f"{r.similar:,}",
            precision(r.similar, r.pairs),
            percent(r.recall),
        )
        for r in [everything, *calibration.rows]
    ]


def calibration_table_cells(
    calibration: Calibration, score_map: ScoreCalibration | None
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The calibration table's header and cells, the same on the card and the result pages. With a fitted
    ``score_map`` the cuts are on the regressor's own prediction (``raw_score``) and a column shows the
    calibrated ``score`` each cut maps to: the value a release shows and its filters act on."""
    rows = calibration_rows_text(calibration)
    tail = ("held-out pairs", "judged similar", "precision (95% interval)", "similar pairs kept")
    if score_map is None or not score_map.fitted:
        return ("score >=", *tail), rows
    cuts = [None, *score_map.apply([r.min_score for r in calibration.rows])]
    cells = [(row[0], "–" if cut is None else f"{cut:.1f}", *row[1:]) for row, cut in zip(rows, cuts)]
    return ("raw_score >=", "score there", *tail), cells


def calibration_title(score_map: ScoreCalibration | None) -> str:
    """The calibration table's title: what the table is, so a page without a map implies no calibration."""
    if score_map is not None and score_map.fitted:
        return "Calibration on the held-out pairs (raw_score cuts and the calibrated score there)"
    return "Precision at cuts on the raw score, held-out pairs (no calibration map: score = raw_score)"


def calibration_status(score_map: ScoreCalibration | None) -> str:
    """In a few words, what a release's ``score`` will be: calibrated through a map, or the raw prediction and
    why (the figure a page without the table shows)."""
    if score_map is not None and score_map.fitted:
        return f"calibrated: an isotonic map fitted on {score_map.pairs:,} held-out pairs"
    return f"none: score = raw_score ({_no_map_reason(score_map)})"


def _no_map_reason(score_map: ScoreCalibration | None) -> str:
    if score_map is None:
        return "the regressor was trained before Paraforge kept one"
    return f"its {score_map.pairs:,} held-out pairs are fewer than the {score_map.min_pairs} a map needs"


def calibration_note(calibration: Calibration, score_map: ScoreCalibration | None) -> str:
    """What the calibration table's rows promise, beside the table on every page: with a map, about that
    precision at a cut; without one, that there is no map, why, and that the scores are the raw predictions."""
    judged = f"Judged similar: a mean human similarity of at least {calibration.similar_at:g} of 100."
    if score_map is not None and score_map.fitted:
        return (
            f"{judged} Keeping the pairs with raw_score at or above a cut (score at or above the value beside it) "
            f"gave about that precision on {calibration.pairs:,} held-out pairs (Wilson 95% interval)."
        )
    why = _no_map_reason(score_map)
    rough = " With so few pairs the rows are a rough guide, not a promise." if calibration.pairs < SMALL_N else ""
    return (
        f"There is no calibration map ({why}): a release's score is the regressor's raw prediction (score equals "
        f"raw_score), not an estimate of human similarity. {judged} Each row counts the held-out pairs predicted "
        f"at or above the cut and how many of them people judged similar.{rough}"
    )
