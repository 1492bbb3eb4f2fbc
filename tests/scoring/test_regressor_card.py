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
