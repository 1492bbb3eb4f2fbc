"""How well a recipe generalises to references it never saw: rank correlation, intervals over references, and
the nested grouped cross-validation in which every choice is made inside the training folds.

* ``spearman``; ``bootstrap_interval``: 95% percentile interval of rho, resampling whole references (a
  reference's candidates share words and a judge's mood, so they are not independent);
  ``paired_difference``: the same resamples applied to two predictions of the same pairs, giving an interval
  of (rho of one - rho of the other): the rule for "better than base".
* ``group_split``: the single held-out split (``GroupShuffleSplit`` by reference).
* ``select_estimator``: the recipe's candidate with the best mean ``GroupKFold`` rho (3 folds) on the data it
  is given, which is always a training part.
* ``nested_cv``: outer ``GroupKFold`` by reference (shuffled, seeded); inside each outer training set
  ``select_estimator`` chooses the estimator (RidgeCV's penalty is chosen inside its own fit), the choice is
  fitted on that set and predicts the outer fold. The out-of-fold predictions, pooled, give the rho reported
  with its interval: nothing of an outer fold took part in choosing or fitting what predicted it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from scoring.regressor.recipes import candidate_estimators, one_thread

BOOTSTRAP_RESAMPLES = 1000
INNER_FOLDS = 3


def spearman(y: np.ndarray, pred: np.ndarray) -> float | None:
    """Spearman's rho, None when undefined (constant input, fewer than 3 items)."""
    if len(y) < 3 or np.ptp(y) == 0 or np.ptp(pred) == 0:
        return None
    rho = float(spearmanr(y, pred)[0])
    return None if math.isnan(rho) else rho


def _reference_members(groups: np.ndarray) -> list[np.ndarray]:
    uniq, inverse = np.unique(groups, return_inverse=True)
    return [np.flatnonzero(inverse == g) for g in range(len(uniq))]


def _resamples(groups: np.ndarray, *, seed: int, resamples: int):
    """Row indices of each bootstrap resample of whole references (seeded)."""
    members = _reference_members(groups)
    rng = np.random.default_rng(seed)
    for _ in range(resamples):
        yield np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])


def bootstrap_interval(
    y: np.ndarray, pred: np.ndarray, groups: np.ndarray, *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[float] | None:
    """95% percentile interval of Spearman's rho, resampling whole references with replacement."""
    values = []
    for idx in _resamples(groups, seed=seed, resamples=resamples):
        rho = spearman(y[idx], pred[idx])
        if rho is not None:
            values.append(rho)
    if len(values) < resamples // 2:
        return None
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


@dataclasses.dataclass(frozen=True)
class Difference:
    """rho of a prediction minus rho of a baseline's on the same pairs, with a paired 95% interval."""

    rho: float | None
    baseline_rho: float | None
    difference: float | None
    interval: list[float] | None

    @property
    def better(self) -> bool:
        """The rule for a recipe to count as better: the interval's lower end above zero."""
        return self.interval is not None and self.interval[0] > 0


def paired_difference(
    y: np.ndarray,
    pred: np.ndarray,
    baseline: np.ndarray,
    groups: np.ndarray,
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Difference:
    """(rho of ``pred`` - rho of ``baseline``) with a 95% percentile interval from resampling whole references,
    the same resample for both (paired: the references' difficulty cancels out)."""
    rho, base = spearman(y, pred), spearman(y, baseline)
    values = []
    for idx in _resamples(groups, seed=seed, resamples=resamples):
        a, b = spearman(y[idx], pred[idx]), spearman(y[idx], baseline[idx])
        if a is not None and b is not None:
            values.append(a - b)
    interval = (
        [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]
        if len(values) >= resamples // 2
        else None
    )
    difference = None if rho is None or base is None else rho - base
    return Difference(rho, base, difference, interval)


def group_split(groups: np.ndarray, *, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test row indices; every group (reference) lies wholly on one side."""
    from sklearn.model_selection import GroupShuffleSplit

    splitter = GroupShuffleSplit(n_splits=1, test_size=test_fraction, random_state=seed)
    train, test = next(splitter.split(np.zeros(len(groups)), groups=groups))
    return np.sort(train), np.sort(test)


def select_estimator(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, *, seed: int, recipe: str = "base", folds: int = INNER_FOLDS
) -> tuple[str, dict[str, float]]:
    """The candidate estimator with the best mean grouped-CV Spearman's rho on the training part."""
    from sklearn.base import clone
    from sklearn.model_selection import GroupKFold

    folds = min(folds, len(np.unique(groups)))
    scores: dict[str, float] = {}
    for name, estimator in candidate_estimators(len(y), seed, recipe).items():
        rhos = []
        for tr, va in GroupKFold(n_splits=folds).split(X, y, groups):
            with one_thread():
                model = clone(estimator).fit(X[tr], y[tr])
                rho = spearman(y[va], model.predict(X[va]))
            rhos.append(-1.0 if rho is None else rho)
        scores[name] = float(np.mean(rhos))
    best = max(scores, key=lambda k: scores[k])
    return best, scores


@dataclasses.dataclass(frozen=True)
class CrossValidation:
    """The nested grouped CV's settings: outer folds (by reference, shuffled with ``seed``), inner folds of each
    outer training set (``select_estimator``) and the bootstrap's resamples."""

    outer_folds: int = 5
    inner_folds: int = INNER_FOLDS
    seed: int = 0
    resamples: int = BOOTSTRAP_RESAMPLES


def outer_folds(groups: np.ndarray, *, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) rows of each outer fold: ``GroupKFold`` by reference, shuffled with ``seed``."""
    from sklearn.model_selection import GroupKFold

    n = min(folds, len(np.unique(groups)))
    splitter = GroupKFold(n_splits=n, shuffle=True, random_state=seed)
    return [(np.sort(tr), np.sort(te)) for tr, te in splitter.split(np.zeros(len(groups)), groups=groups)]


@dataclasses.dataclass
class NestedResult:
    """Out-of-fold predictions of a nested grouped CV and what was chosen in each outer fold."""

    predictions: np.ndarray  # every row, predicted by the model of the outer fold that held it out
    fold: np.ndarray  # each row's outer fold
    chosen: list[str]  # the estimator chosen inside each outer training set
    inner_scores: list[dict[str, float]]  # each candidate's inner-CV rho, per outer fold
    fold_rhos: list[float | None]
    rho: float | None  # pooled over all rows
    interval: list[float] | None  # bootstrap over references
    n_references: int

    def metrics(self, cv: CrossValidation) -> dict[str, Any]:
        """The keys a regressor's metrics and ``train_regressor``'s output carry."""
        return {
            "spearman_cv": self.rho,
            "spearman_cv_ci95": self.interval,
            "cv_folds": len(self.chosen),
            "cv_inner_folds": cv.inner_folds,
            "cv_fold_spearman": self.fold_rhos,
            "cv_estimators": self.chosen,
            "n_cv": int(len(self.predictions)),
            "n_references_cv": self.n_references,
        }


def nested_cv(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    *,
    recipe: str,
    cv: CrossValidation,
    progress: Callable[[int, int], None] | None = None,
    folds: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> NestedResult:
    """Nested grouped CV of a recipe (module docstring); predictions clipped to 0-100 as ``predict`` does.
    ``progress(done, outer folds)`` after each outer fold; ``folds``: the outer folds, if already made."""
    from sklearn.base import clone

    folds = list(folds) if folds is not None else outer_folds(groups, folds=cv.outer_folds, seed=cv.seed)
    pred = np.full(len(y), np.nan)
    fold = np.full(len(y), -1, dtype=np.int64)
    chosen, inner, rhos = [], [], []
    for k, (tr, te) in enumerate(folds):
        name, scores = select_estimator(X[tr], y[tr], groups[tr], seed=cv.seed, recipe=recipe, folds=cv.inner_folds)
        with one_thread():
            model = clone(candidate_estimators(len(tr), cv.seed, recipe)[name]).fit(X[tr], y[tr])
            pred[te] = np.clip(model.predict(X[te]), 0.0, 100.0)
        fold[te] = k
        chosen.append(name)
        inner.append(scores)
        rhos.append(spearman(y[te], pred[te]))
        if progress is not None:
            progress(k + 1, len(folds))
    rho = spearman(y, pred)
    interval = bootstrap_interval(y, pred, groups, seed=cv.seed, resamples=cv.resamples) if rho is not None else None
    return NestedResult(pred, fold, chosen, inner, rhos, rho, interval, int(len(np.unique(groups))))
