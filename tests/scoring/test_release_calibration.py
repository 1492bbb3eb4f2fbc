"""Issue 41, the release's last item: the scores a release carries are calibrated on the campaign's held-out
judgments. Training fits a monotone (isotonic) map of the held-out pairs' human similarity on their predicted
score; a release's ``score`` is the regressor's prediction through it and ``raw_score`` the prediction itself
(format ``paraforge-release/4``); a regressor without a map (trained before it was kept, or on too few held-out
pairs) exports raw scores and the card and the manifest say so and how to get calibrated ones."""

import gzip
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from sklearn.isotonic import IsotonicRegression

from scoring.regressor import RegressorTrainOptions, regressor_train
from scoring.regressor.held_out import (
    MIN_CALIBRATION_PAIRS,
    calibrate,
    calibration_counts,
    calibration_map_fit,
    score_calibration_of,
)
from scoring.releases.columns import PAIR_COLUMNS, PARABANK2_FILE
from scoring.releases.export import release_write
from scoring.releases.filters import parse_filters

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with
from .test_regressor import build_campaign
from .test_release_layout import cells

pytestmark = pytest.mark.django_db

# a map with a flat step (60-80 -> 40): the calibrated score ties there, the raw one does not
MAP = {"method": "isotonic", "pairs": 40, "min_pairs": MIN_CALIBRATION_PAIRS, "x": [20.0, 60.0, 80.0, 100.0]}
MAP["y"] = [5.0, 40.0, 40.0, 95.0]
KNOWN = ("How often do earthquakes occur in this region?", "How frequently do earthquakes happen in this area?")


def calibrated_regressor(name="calibrated", calibration_map=MAP):
    regressor = make_regressor(name)
    regressor.metrics = {
        **regressor.metrics,
        "n_test": calibration_map["pairs"],
        "n_references_test": 10,
        "target": "raw",
        "calibration": calibration_counts([80, 70, 30, 65, 20, 90], [85, 75, 72, 40, 20, 95]),
        "calibration_map": calibration_map,
    }
    regressor.signature = {**regressor.signature, "campaign": "judged-41"}
    regressor.save()
    return regressor


def pairs_tsv(path):
    rows = cells(path)
    assert tuple(rows[0]) == PAIR_COLUMNS
    return [dict(zip(PAIR_COLUMNS, r)) for r in rows[1:]]


def raw_of(reference, paraphrase):
    return float(OverlapScorer().predict([{"reference": reference, "paraphrase": paraphrase}])[0])


@pytest.fixture
def calibrated(storage_dir):
    return score_with(build_resource(), calibrated_regressor(), OverlapScorer(max_words=10))


@pytest.fixture
def uncalibrated(storage_dir):
    return score_with(build_resource(), make_regressor(), OverlapScorer(max_words=10))


# --- the map -------------------------------------------------------------------------------------------------


def test_the_map_is_monotone_plain_json_and_applied_without_scikit_learn():
    rng = np.random.default_rng(3)
    predicted = rng.uniform(0, 100, 60)
    human = np.clip(0.6 * predicted + 30 + rng.normal(0, 12, 60), 0, 100)
    kept = calibration_map_fit(human, predicted)
    assert json.loads(json.dumps(kept)) == kept and kept["pairs"] == 60 and kept["method"] == "isotonic"
    x, y = kept["x"], kept["y"]
    assert all(a < b for a, b in zip(x, x[1:])) and all(a <= b for a, b in zip(y, y[1:]))
    assert 0 <= y[0] and y[-1] <= 100 and len(x) < 60  # flat steps keep only their ends
    assert calibration_map_fit(human, predicted) == kept  # deterministic
    isotonic = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=100).fit(predicted, human)
    probe = [-5.0, 0.0, 12.5, 50.0, 77.7, 99.0, 130.0]
    assert calibrate(probe, x, y) == pytest.approx(isotonic.predict(probe).tolist())
    assert calibrate([None, 50.0, None], x, y)[::2] == [None, None]  # a caveat's null score stays null
    # a ridge's shrunken predictions (60 -> people's 66): the map moves them onto the judges' scale
    assert score_calibration_of({"calibration_map": kept}).apply([60.0]) == pytest.approx(isotonic.predict([60.0]))


def test_too_few_held_out_pairs_fit_no_map():
    few = calibration_map_fit([70.0] * (MIN_CALIBRATION_PAIRS - 1), list(range(MIN_CALIBRATION_PAIRS - 1)))
    assert few["x"] is None and few["y"] is None and few["pairs"] == MIN_CALIBRATION_PAIRS - 1
    found = score_calibration_of({"calibration_map": few})
    assert not found.fitted and found.apply([12.0, None]) == [12.0, None]
    assert score_calibration_of({"spearman_test": 0.5}) is None  # trained before maps were kept


def test_training_fits_the_map_on_the_held_out_pairs_only(tmp_path, storage_dir):
    campaign = build_campaign(tmp_path, n_refs=20)
    row = regressor_train(
        campaign=campaign.name, name="cal", options=RegressorTrainOptions(with_embeddings=False, test_fraction=0.3)
    )
    kept = row.metrics["calibration_map"]
    # the same held-out pairs as the calibration table and the rho, not the pairs the final model was refit on
    assert kept["pairs"] == row.metrics["n_test"] == row.metrics["calibration"]["pairs"] >= MIN_CALIBRATION_PAIRS
    assert kept["pairs"] < row.metrics["n_fit_final"]
    assert all(a < b for a, b in zip(kept["x"], kept["x"][1:]))
    assert all(a <= b for a, b in zip(kept["y"], kept["y"][1:])) and 0 <= kept["y"][0] <= kept["y"][-1] <= 100
    # the synthetic judges score 100 - 22k (k words changed): a higher prediction means a higher similarity
    assert kept["y"][-1] - kept["y"][0] > 30

    # end to end: a resource scored with it (by a stand-in scorer) is released with the trained map applied
    scored = score_with(build_resource(name="trained"), row, OverlapScorer(max_words=10))
    manifest = release_write(scored=scored, out_dir=tmp_path / "rel", version="v1")
    assert manifest["calibration"]["applied"] and manifest["calibration"]["campaign"] == campaign.name
    rows = [r for r in pairs_tsv(tmp_path / "rel" / "pairs.tsv.gz") if r["score"]]
    assert rows and all(
        float(r["score"]) == pytest.approx(calibrate([float(r["raw_score"])], kept["x"], kept["y"])[0]) for r in rows
    )


# --- the release -----------------------------------------------------------------------------------------------


def test_a_release_carries_the_calibrated_score_and_the_raw_one(calibrated, tmp_path):
    manifest = release_write(scored=calibrated, out_dir=tmp_path / "t", version="v1")
    rows = pairs_tsv(tmp_path / "t" / "pairs.tsv.gz")
    known = next(r for r in rows if (r["reference"], r["paraphrase"]) == KNOWN)
    raw = raw_of(*KNOWN)
    assert float(known["raw_score"]) == pytest.approx(raw)
    assert float(known["score"]) == pytest.approx(np.interp(raw, MAP["x"], MAP["y"])) != pytest.approx(raw)
    for r in rows:
        if r["caveat"]:  # no honest score: neither is given
            assert r["score"] == r["raw_score"] == ""
        else:
            assert float(r["score"]) == pytest.approx(np.interp(float(r["raw_score"]), MAP["x"], MAP["y"]))
    assert any(r["caveat"] == "unscored" for r in rows)
    assert manifest["format"] == "paraforge-release/4"
    assert manifest["calibration"] == {
        "applied": True,
        "status": "calibrated",
        "method": "isotonic",
        "pairs": 40,
        "n_references": 10,
        "min_pairs": MIN_CALIBRATION_PAIRS,
        "campaign": "judged-41",
        "target": "raw",
        "note": "score is raw_score through an isotonic map fitted on 40 held-out pairs of campaign judged-41: the "
        "expected mean human similarity of held-out pairs predicted like this one",
    }
    assert manifest["regressor"]["metrics"]["calibration_map"] == MAP  # the breakpoints, to apply elsewhere
    assert "raw_score" in manifest["columns"]["pairs.tsv.gz"]
    card = (tmp_path / "t" / "README.md").read_text()
    assert (
        "**Calibrated scores.**" in card
        and "fitted on 40 held-out pairs (10 references) of campaign `judged-41`" in card
    )
    assert "expected mean human similarity" in card and "not calibrated" not in card
    assert "| raw_score >= | score there |" in card and "| 70 | 40.0 | 4 | 3 |" in card  # the table's cuts mapped
    assert "| `raw_score` |" in card

    release_write(scored=calibrated, out_dir=tmp_path / "j", version="v1", fmt="jsonl")
    with gzip.open(tmp_path / "j" / "pairs.jsonl.gz", "rt") as fh:
        first = json.loads(fh.readline())["paraphrases"][0]
    assert first["raw_score"] == pytest.approx(raw) and first["score"] == pytest.approx(float(known["score"]))
    release_write(scored=calibrated, out_dir=tmp_path / "p", version="v1", fmt="parquet")
    table = pq.read_table(tmp_path / "p" / "pairs.parquet").to_pylist()
    assert [(r["score"], r["raw_score"]) for r in table] == [
        (float(r["score"]) if r["score"] else None, float(r["raw_score"]) if r["raw_score"] else None) for r in rows
    ]


def test_min_score_and_rerank_act_on_the_calibrated_score(calibrated, tmp_path):
    """``--min-score`` cuts the score the file shows (the calibrated one), ``rerank=score`` orders by it."""
    release_write(scored=calibrated, out_dir=tmp_path / "all", version="v1")
    everything = pairs_tsv(tmp_path / "all" / "pairs.tsv.gz")
    filters = parse_filters("rerank=score", min_score=40)
    manifest = release_write(scored=calibrated, out_dir=tmp_path / "f", version="v1", filters=filters)
    rows = pairs_tsv(tmp_path / "f" / "pairs.tsv.gz")
    expected = {(r["reference"], r["paraphrase"]) for r in everything if r["score"] and float(r["score"]) >= 40}
    assert rows and {(r["reference"], r["paraphrase"]) for r in rows} == expected
    # a raw score of 40-60 passes a cut at 40 on the raw scale, but its calibrated score (under 40) does not
    assert any(r["score"] and 40 <= float(r["raw_score"]) < 60 for r in everything)
    assert all(float(r["score"]) >= 40 for r in rows) and manifest["filters"]["min_score"] == 40
    by_reference: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        by_reference.setdefault(r["reference"], []).append((float(r["score"]), float(r["raw_score"])))
    for pairs in by_reference.values():  # highest score first, a step's ties by raw score
        assert pairs == sorted(pairs, reverse=True)


def test_a_regressor_without_a_map_exports_raw_scores_and_says_so(uncalibrated, tmp_path):
    manifest = release_write(scored=uncalibrated, out_dir=tmp_path / "old", version="v1")
    rows = pairs_tsv(tmp_path / "old" / "pairs.tsv.gz")
    known = next(r for r in rows if (r["reference"], r["paraphrase"]) == KNOWN)
    assert float(known["score"]) == pytest.approx(raw_of(*KNOWN))
    assert all(r["score"] == r["raw_score"] for r in rows)
    assert manifest["format"] == "paraforge-release/4"
    calibration = manifest["calibration"]
    assert calibration["applied"] is False and calibration["status"] == "not_kept" and calibration["pairs"] is None
    assert "train_regressor" in calibration["note"] and "--replace" in calibration["note"]
    card = (tmp_path / "old" / "README.md").read_text()
    assert "**The scores are not calibrated.**" in card
    assert "trained before Paraforge kept a calibration map" in card
    assert (
        "`train_regressor CAMPAIGN --name overlap --replace`" in card
        and "`score_resource res --regressor overlap --wait`" in card
    )


def test_too_few_held_out_pairs_are_said_on_the_card(storage_dir, tmp_path):
    few = calibration_map_fit([70.0, 20.0, 90.0] * 4, [65.0, 30.0, 80.0] * 4)  # 12 pairs
    scored = score_with(build_resource(), calibrated_regressor("few", few), OverlapScorer(max_words=10))
    manifest = release_write(scored=scored, out_dir=tmp_path / "few", version="v1")
    assert manifest["calibration"]["status"] == "too_few_pairs" and manifest["calibration"]["pairs"] == 12
    assert all(r["score"] == r["raw_score"] for r in pairs_tsv(tmp_path / "few" / "pairs.tsv.gz"))
    card = (tmp_path / "few" / "README.md").read_text()
    assert "**The scores are not calibrated.**" in card
    assert f"held-out part had only 12 pairs, fewer than the {MIN_CALIBRATION_PAIRS} a calibration map needs" in card


def test_the_parabank2_layout_carries_the_calibrated_score_in_the_paraforge_order(calibrated, tmp_path):
    release_write(scored=calibrated, out_dir=tmp_path / "pf", version="v1")
    release_write(scored=calibrated, out_dir=tmp_path / "pb2", version="v1", layout="parabank2")
    pairs: dict[str, list[dict]] = {}
    for r in pairs_tsv(tmp_path / "pf" / "pairs.tsv.gz"):
        pairs.setdefault(r["reference"], []).append(r)
    lines = cells(tmp_path / "pb2" / PARABANK2_FILE)
    assert [line[1] for line in lines] == list(pairs)
    for score, reference, *paraphrases in lines:
        best = sorted(
            pairs[reference],
            key=lambda r: (r["score"] == "", -float(r["score"] or 0), -float(r["raw_score"] or 0)),
        )[:5]
        assert paraphrases == [r["paraphrase"] for r in best]
        assert score == best[0]["score"]  # the calibrated score, as the paraforge layout's score cell
        if score:
            assert float(score) == pytest.approx(np.interp(float(best[0]["raw_score"]), MAP["x"], MAP["y"]))
    card = (tmp_path / "pb2" / "README.md").read_text()
    assert "**Calibrated scores.**" in card


def export_stderr(out) -> str:
    err = io.StringIO()
    call_command("export_release", "res", "--out", str(out), "--license", "CC-BY-4.0", stdout=io.StringIO(), stderr=err)
    return err.getvalue()


def test_the_command_warns_when_the_scores_are_not_calibrated(uncalibrated, tmp_path):
    """``export_release`` says so on stderr, with the note's commands, before anyone publishes raw scores."""
    err = export_stderr(tmp_path / "raw")
    assert "warning: not calibrated: the regressor " in err and "--replace" in err
    assert "not calibrated: not calibrated" not in err  # said once


def test_the_command_says_nothing_of_calibration_when_the_scores_are(calibrated, tmp_path):
    assert "calibrated" not in export_stderr(tmp_path / "cal")
