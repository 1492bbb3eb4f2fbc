"""Honest selection (issue 32): the nested grouped CV chooses the estimator without the references it scores, and
a recipe counts as better than base only when the paired interval of the difference lies above zero."""

import numpy as np
import pytest

from scoring.regressor import CrossValidation, evaluation, nested_cv, outer_folds, paired_difference, spearman


def _data(n_refs: int = 20, per_ref: int = 3, seed: int = 0):
    """Pairs whose target follows the first feature, with a reference-level offset (as in real judgments)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_refs), per_ref)
    X = rng.normal(size=(len(groups), 4))
    y = np.clip(50 + 15 * X[:, 0] + rng.normal(0, 8, n_refs)[groups] + rng.normal(0, 4, len(groups)), 0, 100)
    return X, y, groups


def test_outer_folds_partition_the_references():
    _, _, groups = _data()
    folds = outer_folds(groups, folds=5, seed=0)
    assert len(folds) == 5
    tested = np.concatenate([te for _, te in folds])
    assert sorted(tested.tolist()) == list(range(len(groups)))
    for tr, te in folds:
        assert not set(groups[tr]) & set(groups[te])
    assert len(outer_folds(groups[:6], folds=5, seed=0)) == 2  # never more folds than references


@pytest.mark.slow
def test_nested_cv_never_lets_an_outer_fold_take_part_in_the_choice(monkeypatch):
    X, y, groups = _data()
    seen = []
    real = evaluation.select_estimator

    def recording(X_part, y_part, groups_part, **kwargs):
        seen.append(set(groups_part.tolist()))
        return real(X_part, y_part, groups_part, **kwargs)

    monkeypatch.setattr(evaluation, "select_estimator", recording)
    steps = []
    cv = CrossValidation(outer_folds=4, seed=1, resamples=200)
    result = nested_cv(X, y, groups, recipe="base", cv=cv, progress=lambda done, of: steps.append((done, of)))
    folds = outer_folds(groups, folds=4, seed=1)
    assert len(seen) == 4 and steps[-1] == (4, 4)
    for chosen_on, (_, te) in zip(seen, folds):
        assert not chosen_on & set(groups[te].tolist())  # the fold's references were not there
    assert np.isfinite(result.predictions).all() and ((0 <= result.predictions) & (result.predictions <= 100)).all()
    assert result.rho == spearman(y, result.predictions) and result.rho > 0.5
    lo, hi = result.interval
    assert lo <= result.rho <= hi
    metrics = result.metrics(cv)
    assert metrics["cv_folds"] == 4 and metrics["n_cv"] == len(y) and metrics["n_references_cv"] == 20
    assert len(metrics["cv_estimators"]) == 4 and len(metrics["cv_fold_spearman"]) == 4


def test_a_recipe_no_different_from_base_does_not_count_as_better():
    _, y, groups = _data(n_refs=60)
    pred = y + np.random.default_rng(1).normal(0, 10, len(y))
    same = paired_difference(y, pred, pred.copy(), groups, seed=0, resamples=300)
    assert same.difference == 0 and same.interval == [0.0, 0.0] and not same.better
    other = y + np.random.default_rng(2).normal(0, 10, len(y))  # as good, its errors elsewhere
    close = paired_difference(y, other, pred, groups, seed=0, resamples=300)
    assert close.interval[0] < 0 < close.interval[1] and not close.better


def test_a_clearly_better_recipe_counts_as_better_and_a_worse_one_does_not():
    _, y, groups = _data(n_refs=60)
    rng = np.random.default_rng(3)
    base = y + rng.normal(0, 25, len(y))
    good = y + rng.normal(0, 5, len(y))
    better = paired_difference(y, good, base, groups, seed=0, resamples=300)
    assert (
        better.better
        and better.interval[0] > 0
        and better.difference == pytest.approx(better.rho - better.baseline_rho)
    )
    worse = paired_difference(y, base, good, groups, seed=0, resamples=300)
    assert not worse.better and worse.interval[1] < 0
