"""Issue 30, the release a downloader gets: no paraphrase that is its reference again (unless asked for, counted
either way), one column vocabulary in every file, files others can read, an explicit SPDX licence, provenance by
name (never a path of the exporting machine), a card with Limitations, the held-out rho with its n and interval
(warned when n is small), and a calibration table from the regressor's held-out part."""

import gzip
import io
import json
import os
import stat

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from django.conf import settings
from django.core.management import CommandError, call_command

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Release
from scoring.regressor import RegressorTrainOptions, regressor_train
from scoring.regressor.held_out import SIMILAR_AT, calibration_counts, calibration_of, fisher_interval, wilson_interval
from scoring.releases.card import license_check, local_name
from scoring.releases.columns import JSONL_PARAPHRASE_KEYS, JUDGMENT_COLUMNS, PAIR_COLUMNS
from scoring.releases.filters import NEAR_COPY, FilterError, copy_kind, is_copy, parse_filters
from scoring.releases.job import export_release_start
from scoring.releases.params import ReleaseExportParams

from .resource_data import SETTINGS, OverlapScorer, build_resource, make_regressor, record, score_with
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db

REFERENCE = "How often do earthquakes occur in this region?"
PARAPHRASES = [
    "How frequently do earthquakes happen in this area?",
    REFERENCE,  # the reference itself
    "  how OFTEN do earthquakes   occur in this region?",  # the same but for case and spacing: a copy
    "How often do earthquakes occur in this region",  # no question mark: not a copy
    "How often do earthquakes occurs in this region?",  # one character from it: a near-copy
    "How often do earthquakes strike in this region?",  # a word changed: kept
]


def export(*args, stderr=None):
    out = io.StringIO()
    call_command("export_release", *args, stdout=out, stderr=stderr or io.StringIO())
    return json.loads(out.getvalue())


def tsv(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh]
    return [dict(zip(rows[0], r)) for r in rows[1:]], rows[0]


@pytest.fixture
def copies(storage_dir):
    """One reference with a paraphrase, its copy, a case-and-spacing copy and a punctuation variant."""
    resource = build_resource(name="copies", shards=[[record(0, REFERENCE, PARAPHRASES)]])
    return score_with(resource, make_regressor(), OverlapScorer())


def test_paraphrases_identical_to_their_reference_are_left_out_and_counted(copies, tmp_path):
    result = export("copies", "--out", str(tmp_path / "a"))
    rows, _ = tsv(tmp_path / "a" / "pairs.tsv.gz")
    assert [r["paraphrase"] for r in rows] == [PARAPHRASES[0], PARAPHRASES[5]]
    assert result["counts"]["copies_read"] == 2 and result["counts"]["copies"] == 0
    assert result["counts"]["near_copies_read"] == 2 and result["counts"]["near_copies"] == 0
    assert result["counts"]["pairs_read"] == 6 and result["counts"]["pairs"] == 2
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["filters"]["keep_copies"] is False and "case folding" in manifest["copy_rule"]
    assert "punctuation" in manifest["near_copy_rule"] and manifest["screen"]["near_copy_rule"]
    card = (tmp_path / "a" / "README.md").read_text()
    assert "| paraphrases identical to their reference | 2 | 0 |" in card and "were left out" in card
    assert "| near-copies of their reference | 2 | 0 |" in card and "2 near-copies" in card
    assert "Slips the non-word screen cannot see stay in" in card

    kept = export("copies", "--out", str(tmp_path / "b"), "--keep-copies")
    rows, _ = tsv(tmp_path / "b" / "pairs.tsv.gz")
    assert [r["paraphrase"] for r in rows] == PARAPHRASES
    assert kept["counts"]["copies_read"] == 2 and kept["counts"]["copies"] == 2
    assert kept["counts"]["near_copies"] == 2
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["filters"]["keep_copies"] is True


def test_near_copies_are_a_slip_or_punctuation_from_their_reference():
    assert copy_kind("The cat sat.", "The cat sat") == NEAR_COPY  # punctuation only
    assert copy_kind("A woman is eating.", "A Women is eating.") == NEAR_COPY  # one character: a slip
    assert copy_kind("RBA delivers another rate cut", "RBA delivers another rate cuts") == NEAR_COPY
    assert copy_kind("The cat sat.", "the cat sat.") != NEAR_COPY  # a copy, counted as one
    assert copy_kind("A man is eating.", "A woman is eating.") is None  # two characters
    assert copy_kind("Ryanair chief praises report findings.", "Ryanair president hails report findings") is None


def test_the_copy_rule_forgives_case_and_spacing_only():
    assert is_copy("The cat sat.", " the  CAT\tsat. ")
    assert is_copy("Ｔｈｅ cat", "The cat")  # Unicode compatibility forms (NFKC)
    assert not is_copy("The cat sat.", "The cat sat")
    assert not is_copy("Let's eat, Grandma.", "Let's eat Grandma.")
    assert parse_filters("copies=keep").keep_copies and not parse_filters("").keep_copies
    with pytest.raises(FilterError, match="copies='maybe': one of drop, keep"):
        parse_filters("copies=maybe")
    with pytest.raises(FilterError, match="disagree"):
        parse_filters("copies=drop", keep_copies=True)


def test_the_admin_form_and_the_job_keep_copies_when_asked(client, copies, tmp_path):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    url = f"/admin/scoring/scoredresource/{copies.pk}/export/"
    assert 'name="keep_copies"' in client.get(url).content.decode()
    response = client.post(url, {"version": "v1", "format": "tsv", "filters": "top=9", "keep_copies": "on"})
    assert response.status_code == 302
    job = Job.objects.get(kind="export_release")
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    assert Release.objects.get().manifest["counts"]["copies"] == 2
    job = export_release_start(ReleaseExportParams(resource=copies.resource.pk, version="v2", keep_copies=False))
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    counts = Release.objects.get(version="v2").manifest["counts"]
    assert counts["copies_read"] == 2 and counts["copies"] == 0 and counts["pairs"] == 2
    assert counts["near_copies_read"] == 2 and counts["near_copies"] == 0


# --- one vocabulary ----------------------------------------------------------------------------------------


@pytest.fixture
def scored(storage_dir, tmp_path):
    from annotation.models import Campaign
    from tests.annotation.parabank_data import import_contract

    job = Job.objects.create(kind="generate", status=JobStatus.SUCCEEDED)
    import_contract(tmp_path)
    Campaign.objects.filter(name="contract").update(job=job)
    return score_with(build_resource(job=job), make_regressor(), OverlapScorer(max_words=10))


def test_the_same_thing_has_the_same_column_name_in_every_file(scored, tmp_path):
    export("res", "--out", str(tmp_path / "t"))
    export("res", "--out", str(tmp_path / "j"), "--format", "jsonl")
    export("res", "--out", str(tmp_path / "p"), "--format", "parquet")
    _, pairs_header = tsv(tmp_path / "t" / "pairs.tsv.gz")
    judgments, judgments_header = tsv(tmp_path / "t" / "judgments.tsv.gz")
    shared = {"reference", "paraphrase", "systems", "nll"}
    assert shared <= set(pairs_header) and shared <= set(judgments_header)
    assert not {"ref_sent", "candidate", "sys_id", "NLL", "ref_len", "text"} & set(pairs_header + judgments_header)
    assert {r["paraphrase"] for r in judgments} >= {"It is fine now.", "He left very soon."}
    with gzip.open(tmp_path / "j" / "pairs.jsonl.gz", "rt") as fh:
        first = json.loads(fh.readline())
    assert set(first["paraphrases"][0]) == set(JSONL_PARAPHRASE_KEYS)  # (pinned literally in test_releases)
    assert pq.read_schema(tmp_path / "p" / "pairs.parquet").names == list(PAIR_COLUMNS)
    assert pq.read_schema(tmp_path / "p" / "judgments.parquet").names == list(JUDGMENT_COLUMNS) == judgments_header
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert manifest["format"] == "paraforge-release/4"  # 3: the caveat column; 4: raw_score (issue 41)


# --- files others can read -----------------------------------------------------------------------------------


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_release_files_are_readable_by_others_whatever_the_umask(scored, tmp_path, storage_dir):
    old = os.umask(0o077)
    try:
        export("res", "--out", str(tmp_path / "out"))
        job = export_release_start(ReleaseExportParams(resource=scored.resource.pk, version="v9"))
        assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    finally:
        os.umask(old)
    for folder in (tmp_path / "out", storage_dir / "releases" / scored.resource.name / "v9"):
        assert _mode(folder) == 0o755, folder
        names = sorted(p.name for p in folder.iterdir())
        assert names == ["README.md", "judgments.tsv.gz", "manifest.json", "pairs.tsv.gz"]
        assert {_mode(folder / n) for n in names} == {0o644}, folder
    assert _mode(storage_dir / "releases") == 0o755 and _mode(storage_dir / "releases" / scored.resource.name) == 0o755


# --- licence -------------------------------------------------------------------------------------------------


def test_no_licence_is_stated_as_such_never_silently(scored, tmp_path):
    err = io.StringIO()
    result = export("res", "--out", str(tmp_path / "n"), stderr=err)
    assert result["license"] == "NOASSERTION" and "no --license given" in err.getvalue()
    card = (tmp_path / "n" / "README.md").read_text()
    assert "## Licence" in card and "**No licence was given**" in card and "NOASSERTION" in card


def test_a_licence_is_an_spdx_id_for_every_format(scored, tmp_path):
    result = export("res", "--out", str(tmp_path / "c"), "--license", "cc-by-4.0")
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert result["license"] == manifest["license"] == "CC-BY-4.0"
    card = (tmp_path / "c" / "README.md").read_text()
    assert yaml.safe_load(card.split("---\n")[1])["license"] == "cc-by-4.0" and "**CC-BY-4.0** (SPDX" in card
    export("res", "--out", str(tmp_path / "r"), "--format", "parquet", "--license", "LicenseRef-lab-terms")
    header = yaml.safe_load((tmp_path / "r" / "README.md").read_text().split("---\n")[1])
    assert header["license"] == "other" and header["license_name"] == "lab-terms"
    for bad, hint in (("none", "NOASSERTION states"), ("other", "LicenseRef-NAME"), ("CC BY 4.0", "SPDX")):
        with pytest.raises(CommandError, match=hint):
            export("res", "--out", str(tmp_path / "bad"), "--license", bad)
    assert not (tmp_path / "bad").exists() and Release.objects.count() == 2
    assert license_check("odbl") == "ODbL-1.0" and license_check(None) == "NOASSERTION"


# --- provenance by name --------------------------------------------------------------------------------------


def test_provenance_names_the_corpus_and_model_and_never_a_local_path(storage_dir, tmp_path):
    from generation.models import Corpus, CorpusStatus

    snapshot = "/home/me/.cache/huggingface/hub/models--Helsinki-NLP--opus-mt-cs-en/snapshots/0123abcd4567"
    corpus = Corpus.objects.create(
        name="wiki", format="mono", status=CorpusStatus.READY, source_name=str(tmp_path / "data" / "wiki.txt")
    )
    resource = build_resource(name="prov", corpus=corpus)
    resource.settings = {**SETTINGS, "model": snapshot, "ppdb": str(tmp_path / "ppdb-2.0-s-lexical")}
    resource.save()
    score_with(resource, make_regressor(), OverlapScorer())
    export("prov", "--out", str(tmp_path / "rel"))
    text = (tmp_path / "rel" / "manifest.json").read_text() + (tmp_path / "rel" / "README.md").read_text()
    assert str(tmp_path) not in text and "/home/me" not in text
    provenance = json.loads((tmp_path / "rel" / "manifest.json").read_text())["provenance"]
    assert provenance["corpus"] == {
        "name": "wiki",
        "source": "wiki.txt",
        "format": "mono",
        "references": 0,
        "origin": None,  # import_corpus --source (tests/generation/test_corpus_licence.py)
        "license": "NOASSERTION",
        "terms": None,
    }
    assert provenance["model"] == {"name": "Helsinki-NLP/opus-mt-cs-en@0123abcd4567", "weights_sha256": "abc"}
    assert provenance["ppdb"] == "ppdb-2.0-s-lexical"
    assert "| paraphrase model | `Helsinki-NLP/opus-mt-cs-en@0123abcd4567` | weights SHA-256 `abc` |" in text
    assert local_name(str(settings.BASE_DIR / "generation" / "demo" / "model")) == "generation/demo/model"
    assert local_name("Helsinki-NLP/opus-mt-cs-en") == "Helsinki-NLP/opus-mt-cs-en"
    assert local_name("C:\\Users\\me\\model") == "model" and local_name("../elsewhere/model") == "model"


# --- the card: limitations, rho with n, calibration -------------------------------------------------------------


def test_the_card_has_limitations_and_the_held_out_rho_with_its_n_interval_and_a_small_n_warning(scored, tmp_path):
    err = io.StringIO()
    export("res", "--out", str(tmp_path / "small"), stderr=err)
    card = (tmp_path / "small" / "README.md").read_text()
    assert "## Limitations" in card and "The scores are predictions, not judgments" in card
    # the stand-in regressor: rho 0.71 on 20 held-out pairs, no recorded interval (Fisher z instead)
    lo, hi = fisher_interval(0.71, 20)
    assert f"**0.710 (n = 20 held-out pairs; 95% interval {lo:.2f} to {hi:.2f}, Fisher z)**" in card
    assert "> **Warning.** The held-out part has only 20 pairs (fewer than 100)" in card
    assert "fewer than 100" in err.getvalue()
    assert "was not kept for this regressor" in card  # trained before the calibration was kept

    big = make_regressor("big", rho=0.55)
    big.metrics = {
        **big.metrics,
        "n_test": 400,
        "n_references_test": 90,
        "spearman_test_ci95": [0.48, 0.61],
        "calibration": calibration_counts([80, 70, 30, 65, 20, 90], [85, 75, 72, 40, 20, 95]),
    }
    big.save()
    score_with(scored.resource, big, OverlapScorer(max_words=10))
    export("res", "--out", str(tmp_path / "big"), "--regressor", "big")
    card = (tmp_path / "big" / "README.md").read_text()
    assert "**0.550 (n = 400 held-out pairs of 90 references; 95% interval 0.48 to 0.61, bootstrap" in card
    assert "Warning" not in card
    assert f"at least {SIMILAR_AT:g} of 100" in card
    assert "| any | 6 | 4 | 67% (30%-90%) | 100% |" in card
    assert "| 70 | 4 | 3 | 75% (30%-95%) | 75% |" in card  # predicted 75, 72, 85, 95; judged 70, 30, 80, 90
    assert "| 90 | 1 | 1 | 100% (21%-100%) | 25% |" in card


def test_training_keeps_the_held_out_calibration(tmp_path, storage_dir):
    campaign = build_campaign(tmp_path, n_refs=20)
    row = regressor_train(
        campaign=campaign.name,
        name="cal",
        options=RegressorTrainOptions(with_embeddings=False, test_fraction=0.3),
    )
    kept = row.metrics["calibration"]
    assert kept["pairs"] == row.metrics["n_test"] and kept["similar_at"] == SIMILAR_AT
    assert [r["min_score"] for r in kept["rows"]] == [50, 60, 70, 80, 90]
    pairs = [r["pairs"] for r in kept["rows"]]
    assert pairs == sorted(pairs, reverse=True) and all(r["similar"] <= r["pairs"] for r in kept["rows"])
    calibration = calibration_of(row.metrics)
    # the synthetic judges score 100 - 22k + noise for k words changed: the regressor separates them, so the
    # precision above 60 beats the base rate
    above = next(r for r in calibration.rows if r.min_score == 60)
    assert above.precision > calibration.base_rate


def test_the_interval_rules():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 0) is None
    lo, hi = fisher_interval(0.5, 103)
    assert lo < 0.5 < hi and hi - lo == pytest.approx(0.31, abs=0.02)
    counts = calibration_counts(np.array([60.0, 59.9]), np.array([50.0, 95.0]))
    assert counts["similar"] == 1 and counts["rows"][0] == {"min_score": 50, "pairs": 2, "similar": 1}
