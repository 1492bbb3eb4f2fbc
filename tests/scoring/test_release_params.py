"""The export job's parameters (``scoring.releases.params``): one class, from which the command's options, the
export form's fields, the job's stored JSON and the worker's reading are built; jobs stored before a setting
existed still run."""

import dataclasses

import pytest
from django.core.management import load_command_class

from jobs.execution import job_run_inline, job_start
from jobs.models import JobStatus
from jobs.params import field_names, from_values, to_json
from scoring.forms import ExportReleaseForm
from scoring.models import Release
from scoring.releases.checks import ReleaseError
from scoring.releases.job import KIND, export_release_start, job_params
from scoring.releases.params import ReleaseExportParams

from .test_releases import scored  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

# the keys export jobs have always stored, in their order
STORED_KEYS = [
    "resource",
    "version",
    "format",
    "filters",
    "min_score",
    "regressor",
    "entailment_model",
    "license",
    "keep_copies",
    "keep_non_words",
]


def test_the_job_stores_the_keys_it_always_stored(scored):  # noqa: F811
    job = export_release_start(ReleaseExportParams(resource=scored.resource.pk, license="", entailment_model=""))
    assert list(job.params) == STORED_KEYS
    assert job.params == {
        "resource": scored.resource.pk,
        "version": "v1",  # the next free one, fixed when the job starts
        "format": "tsv",
        "filters": "",
        "min_score": None,
        "regressor": None,
        "entailment_model": None,  # empty: none given, as it was stored
        "license": None,
        "keep_copies": False,
        "keep_non_words": False,
    }
    assert job_params(job) == ReleaseExportParams(resource=scored.resource.pk, version="v1")
    assert to_json(job_params(job)) == job.params


@pytest.mark.parametrize(
    "stored",
    [
        {"format": "tsv", "filters": "", "min_score": None, "regressor": None},  # the first export jobs
        {"format": "jsonl", "filters": "top=2", "min_score": None, "regressor": "overlap", "entailment_model": None},
        {"format": None, "filters": None, "min_score": 10.0, "regressor": None, "license": "CC-BY-4.0"},
    ],
)
def test_an_export_job_stored_before_later_settings_still_runs(scored, stored):  # noqa: F811
    """``entailment_model``, ``license``, ``keep_copies`` and ``keep_non_words`` came later: a job without them
    (or with nulls) reads their defaults and runs as it did."""
    job = job_start(kind=KIND, params={"resource": scored.resource.pk, "version": "v1", **stored})
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get(job=job)
    assert release.manifest["pairs_format"] == (stored["format"] or "tsv")
    assert release.manifest["license"] == stored.get("license", "NOASSERTION")
    assert release.manifest["filters"]["keep_copies"] is False
    assert job_params(job).keep_non_words is False


def test_the_command_and_the_form_offer_the_class_settings():
    parser = load_command_class("scoring", "export_release").create_parser("manage.py", "export_release")
    dests = set(vars(parser.parse_args(["res"])))
    assert set(field_names(ReleaseExportParams)) - {"resource"} <= dests
    offered = set(ExportReleaseForm.base_fields)
    assert offered == set(field_names(ReleaseExportParams)) - {"resource", "regressor"}
    options = vars(parser.parse_args(["res", "--filters", "top=2", "len=5-40", "--keep-copies", "--format", "jsonl"]))
    asked = from_values(ReleaseExportParams, options, resource=1)
    assert (asked.filters, asked.keep_copies, asked.keep_non_words, asked.format) == (
        "top=2,len=5-40",
        True,
        False,
        "jsonl",
    )
    assert asked.version is None and asked.license is None


def test_a_setting_that_cannot_work_is_refused_when_made():
    with pytest.raises(ReleaseError, match="starting with a letter or digit"):
        ReleaseExportParams(resource=1, version="../up")
    with pytest.raises(ReleaseError, match="unknown format"):
        ReleaseExportParams(resource=1, format="csv")
    params = ReleaseExportParams(resource=1)
    with pytest.raises(ReleaseError, match="starting with a letter or digit"):
        dataclasses.replace(params, version="")
    with pytest.raises(ValueError, match="needs its resource"):
        export_release_start(ReleaseExportParams())
