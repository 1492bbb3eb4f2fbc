"""Issue 36, item 5: export filters are bounded, finite numbers written in digits 0-9 (a clear error on the
API, in the admin and on the command line, never a 500), and an export that fails leaves nothing behind.
Item 7 (part): the entailment model's refusal names no path of the server."""

from __future__ import annotations

import json
import math

import pytest
from django.core.management import CommandError

from jobs.execution import job_run_inline
from jobs.models import JobStatus
from scoring.models import Release
from scoring.releases.checks import ReleaseError
from scoring.releases.export import release_export, release_write
from scoring.releases.filters import FilterError, ReleaseFilters, parse_filters
from scoring.releases.params import ReleaseExportParams

from .test_release_guards import boss, errors_of, export_url, exports, fake_model  # noqa: F401  (boss: fixture)
from .test_releases import export, scored  # noqa: F401  (scored is a fixture)

pytestmark = pytest.mark.django_db

HUGE_TOP = "top=" + "9" * 4301  # int() of more than 4,300 digits raises: the 500 of issue 36
INFINITE = [
    "len=0-" + "9" * 400,  # float() of 400 digits is inf
    "plen=" + "9" * 400 + "-",
    "bleu=0-1e999",
    "overlap=0-" + "1" * 400,
    "score=1e999",
    "score=" + "9" * 400,
]
NOT_ASCII = ["len=\u0665-\u0664\u0660", "top=\u0665", "score=6_0", "entailment=0.7_5", "len=1_0-20", "top=1_0"]


def leftovers(folder):
    """Everything under ``folder``, as relative names."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("spec", [HUGE_TOP, *INFINITE, *NOT_ASCII])
def test_every_bound_is_a_bounded_finite_ascii_number_with_a_short_clear_error(spec):
    with pytest.raises(FilterError) as err:
        parse_filters(spec)
    message = str(err.value)
    assert "digits 0-9" in message or "between 0 and" in message or "run from 0 to 100" in message, message
    assert len(message) < 300 and "\n" not in message and "Exceeds the limit" not in message


def test_in_range_bounds_still_parse_and_stay_finite():
    parsed = parse_filters("len=5-40,plen=-1000000,bleu=10.5-70,overlap=0.2-0.8,score=60,top=1000000")
    assert parsed.length == (5.0, 40.0) and parsed.paraphrase_length == (None, 1_000_000.0)
    assert parsed.top == 1_000_000 and parsed.min_score == 60.0
    json.dumps(parsed.as_dict(), allow_nan=False)  # the manifest's record is strict JSON
    with pytest.raises(FilterError, match="between 0 and 1000000"):
        parse_filters("len=0-1000001")
    with pytest.raises(FilterError, match="positive integer"):
        parse_filters("top=1000001")


def test_the_api_answers_a_huge_or_infinite_bound_with_a_json_400(admin_client, scored):  # noqa: F811
    url = f"/api/scored-resources/{scored.pk}/releases/"
    for spec in (HUGE_TOP, "len=0-" + "9" * 400, "score=6_0"):
        response = admin_client.post(url, {"version": "v1", "format": "tsv", "filters": spec}, "application/json")
        assert response.status_code == 400, (spec, response.status_code)
        body = response.json()
        said = json.dumps(body, ensure_ascii=False)
        assert body["code"] and body["detail"] and ("digits 0-9" in said or "between 0 and" in said), body
        assert len(said) < 2000  # the 4,301 digits are not echoed back
    assert not exports().exists() and not Release.objects.exists()


def test_the_admin_form_shows_a_form_error_for_a_huge_or_infinite_bound(boss, scored):  # noqa: F811
    for spec in (HUGE_TOP, "len=0-" + "9" * 400, "bleu=0-1e999"):
        response = boss.post(export_url(scored), {"version": "v1", "format": "tsv", "filters": spec})
        assert response.status_code == 200, spec
        errors = " ".join(errors_of(response))
        assert "digits 0-9" in errors or "between 0 and" in errors, errors
    assert not exports().exists()


@pytest.mark.parametrize("spec", [HUGE_TOP, "len=0-" + "9" * 400, "bleu=0-1e999"])
def test_the_command_line_refuses_a_huge_or_infinite_bound_and_writes_nothing(scored, tmp_path, spec):  # noqa: F811
    with pytest.raises(CommandError) as err:
        export("res", "--out", str(tmp_path / "rel"), "--filters", spec)
    assert len(str(err.value)) < 300 and "another export" not in str(err.value)
    assert not (tmp_path / "rel").exists() and not Release.objects.exists()
    with pytest.raises(CommandError, match="digits 0-9"):
        export("res", "--out", str(tmp_path / "rel"), "--min-score", "\u0666\u0660")
    assert not (tmp_path / "rel").exists()


def test_a_manifest_is_strict_json_or_nothing_is_written(scored, tmp_path):  # noqa: F811
    tmp_path = tmp_path / "exports"  # (the storage and the imported campaign lie beside it)
    tmp_path.mkdir()
    out = tmp_path / "deep" / "rel"
    with pytest.raises(ReleaseError, match="JSON cannot write"):  # filters made in code, past parse_filters
        release_write(scored=scored, out_dir=out, version="v1", filters=ReleaseFilters(length=(0.0, math.inf)))
    assert leftovers(tmp_path) == []  # no files, no staging folder, not even the folders made for it


def test_an_export_that_fails_while_writing_leaves_nothing_behind(scored, tmp_path, monkeypatch):  # noqa: F811
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("scoring.releases.manifest.write_judgments", broken)  # after pairs.tsv.gz is written
    tmp_path = tmp_path / "exports"
    (tmp_path / "given").mkdir(parents=True)  # a folder the user made stays, empty
    for out in (tmp_path / "given", tmp_path / "new" / "rel"):
        with pytest.raises(OSError, match="disk full"):
            release_export(ReleaseExportParams(resource=scored.resource.pk, version="v1"), out_dir=out)
    assert leftovers(tmp_path) == ["given"] and not Release.objects.exists()


def test_an_export_whose_release_cannot_be_recorded_removes_its_files_and_upload(scored, tmp_path, monkeypatch):  # noqa: F811
    def refused(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(Release.objects, "create", refused)
    tmp_path = tmp_path / "exports"
    with pytest.raises(RuntimeError, match="database gone"):
        release_export(
            ReleaseExportParams(resource=scored.resource.pk, version="v1"),
            out_dir=tmp_path / "rel",
            upload=f"file://{tmp_path}/up",
        )
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [] and not (tmp_path / "rel").exists()
    assert not Release.objects.exists()


def test_a_failed_export_job_leaves_no_files_in_storage(boss, scored, storage_dir, monkeypatch):  # noqa: F811
    assert boss.post(export_url(scored), {"version": "v1", "format": "tsv"}).status_code == 302

    def refused(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(Release.objects, "create", refused)  # after the files were uploaded to storage
    assert job_run_inline(job_id=exports().get().pk).status == JobStatus.FAILED
    assert [p for p in (storage_dir / "releases").rglob("*") if p.is_file()] == []


def test_the_exported_release_is_complete_and_no_staging_folder_stays(scored, tmp_path):  # noqa: F811
    tmp_path = tmp_path / "exports"
    export("res", "--out", str(tmp_path / "rel"), "--filters", "len=0-1000000,top=3")
    assert leftovers(tmp_path) == [
        "rel",
        "rel/README.md",
        "rel/judgments.tsv.gz",
        "rel/manifest.json",
        "rel/pairs.tsv.gz",
    ]
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text(), parse_constant=pytest.fail)
    assert manifest["filters"]["length"] == {"min": 0.0, "max": 1_000_000.0} and manifest["filters"]["top"] == 3


# --- item 7: the entailment model's refusal names no path of the server -----------------------------------


def test_the_entailment_model_refusal_names_no_server_path(tmp_path, settings):
    root = tmp_path / "srv-models"
    fake_model(root / "nli")
    (root / "broken").mkdir()
    settings.PARAFORGE_MODEL_ROOTS = [str(root)]
    for typed in ("/etc", "../elsewhere", "missing-model"):
        with pytest.raises(FilterError) as err:
            parse_filters("entailment=argmax", entailment_model=typed, load_model=False, confined=True)
        message = str(err.value)
        assert str(tmp_path) not in message and "srv-models" not in message, message
        assert "PARAFORGE_MODEL_ROOTS" in message or "no such folder" in message, message
    with pytest.raises(FilterError) as err:  # under a root, but no checkpoint: named as typed
        parse_filters("entailment=argmax", entailment_model="broken", load_model=False, confined=True)
    assert "broken: no config.json" in str(err.value) and str(tmp_path) not in str(err.value)
    settings.PARAFORGE_MODEL_ROOTS = []
    with pytest.raises(FilterError, match="not enabled on this server") as err:
        parse_filters("entailment=argmax", entailment_model="nli", load_model=False, confined=True)
    assert str(tmp_path) not in str(err.value)
