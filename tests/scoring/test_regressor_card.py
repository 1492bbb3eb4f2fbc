"""The release card states the regressor's nested cross-validated rho beside its held-out rho (issue 32), with
the same n, interval and wording rules (``scoring.regressor.held_out``)."""

import io
import json

import pytest
from django.core.management import call_command

from scoring.regressor.held_out import cv_rho

from .resource_data import OverlapScorer, build_resource, make_regressor, record, score_with

pytestmark = pytest.mark.django_db


def card(tmp_path, name: str) -> str:
    out = io.StringIO()
    call_command("export_release", "res", "--out", str(tmp_path / name), stdout=out, stderr=io.StringIO())
    assert json.loads(out.getvalue())
    return (tmp_path / name / "README.md").read_text()


def test_the_card_states_the_nested_cv_rho_when_the_regressor_kept_it(storage_dir, tmp_path):
    resource = build_resource(name="res", shards=[[record(0, "The cat sat on the mat.", ["A cat sat on a mat."])]])
    regressor = make_regressor()
    scored = score_with(resource, regressor, OverlapScorer())
    assert "nested cross-validation" not in card(tmp_path, "before")  # trained before it was kept
    regressor.metrics |= {
        "spearman_cv": 0.58,
        "spearman_cv_ci95": [0.53, 0.62],
        "cv_folds": 5,
        "n_cv": 2000,
        "n_references_cv": 300,
    }
    regressor.save()
    assert scored.regressor.pk == regressor.pk
    text = card(tmp_path, "after")
    assert "by nested cross-validation (5 folds by reference" in text
    assert "**0.580 (n = 2,000 held-out pairs of 300 references; 95% interval 0.53 to 0.62, bootstrap" in text
    assert cv_rho({"spearman_cv": None, "cv_folds": None}) is None  # --cv-folds 0


def test_with_few_held_out_references_the_card_shows_no_interval_and_the_cv_rho_in_its_headline(storage_dir, tmp_path):
    """Issue 48: a "95% interval 0.71 to 1.00" bootstrapped over 2 references is no interval; the card's headline
    says so and puts the cross-validated rho beside the held-out one, and its table is not called a calibration
    when there is no calibration map."""
    resource = build_resource(name="res", shards=[[record(0, "The cat sat on the mat.", ["A cat sat on a mat."])]])
    regressor = make_regressor()
    score_with(resource, regressor, OverlapScorer())
    regressor.metrics |= {
        "spearman_test": 0.714,
        "n_test": 6,
        "n_references_test": 2,
        "spearman_test_ci95": [0.71, 1.0],
        "spearman_cv": 0.43,
        "spearman_cv_ci95": [0.08, 0.76],
        "cv_folds": 5,
        "n_cv": 40,
        "n_references_cv": 10,
        "calibration": {"similar_at": 60.0, "pairs": 6, "similar": 3, "rows": []},
        "calibration_map": {"method": "isotonic", "pairs": 6, "min_pairs": 20, "x": None, "y": None},
    }
    regressor.save()
    text = card(tmp_path, "few")
    headline = next(line for line in text.splitlines() if line.startswith("`score` is predicted"))
    assert "**0.714 (n = 6 held-out pairs of 2 references; no interval: too few references, fewer than 5)**" in headline
    assert "0.71 to 1.00" not in text
    assert "by nested cross-validation (5 folds by reference" in headline
    assert "**0.430 (n = 40 held-out pairs of 10 references; 95% interval 0.08 to 0.76, bootstrap" in headline
    assert "**Precision at cuts on the raw score, held-out pairs (no calibration map: score = raw_score).**" in text
    assert "This table is not a calibration" in text and "**Calibration.**" not in text
