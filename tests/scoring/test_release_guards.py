"""Issue 27 (Low), releases: a version is a safe folder name wherever it is typed, one export per version,
and the export form's entailment model field says nothing about folders outside the model roots."""

import html
import json
import re

import pytest
from django.contrib.auth import get_user_model

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Release
from scoring.releases.checks import ReleaseError
from scoring.releases.export import release_export
from scoring.releases.filters import FilterError, parse_filters
from scoring.releases.job import export_release_start
from scoring.releases.params import ReleaseExportParams

from .test_releases import export, scored  # noqa: F401  (scored is a fixture)

pytestmark = pytest.mark.django_db

BAD_VERSIONS = ["../../x", "/tmp/x", "..", ".", "v\n1", "v1\u200f", "-v1", ".v1", "v 1", "v1/x", "v1\\x", "١"]


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def exports():
    return Job.objects.filter(kind="export_release")


def export_url(scored):  # noqa: F811
    return f"/admin/scoring/scoredresource/{scored.pk}/export/"


def errors_of(response) -> list[str]:
    """The form's error messages, unescaped."""
    return [
        html.unescape(re.sub(r"<[^>]+>", "", m))
        for m in re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    ]


# --- the version -----------------------------------------------------------------------------------------


def test_the_export_form_refuses_an_unsafe_version_before_queuing(boss, scored):  # noqa: F811
    for version in BAD_VERSIONS:
        response = boss.post(export_url(scored), {"version": version, "format": "tsv"})
        assert response.status_code == 200, version
        assert any("starting with a letter or digit" in e for e in errors_of(response)), (version, errors_of(response))
    assert not exports().exists() and not Release.objects.exists()
    # what a researcher types still works
    assert boss.post(export_url(scored), {"version": "2024.1_rc-2", "format": "tsv"}).status_code == 302
    assert exports().get().params["version"] == "2024.1_rc-2"


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_the_job_and_the_command_refuse_an_unsafe_version(scored, tmp_path, version):  # noqa: F811
    with pytest.raises(ReleaseError, match="starting with a letter or digit"):
        export_release_start(ReleaseExportParams(resource=scored.resource.pk, version=version))
    assert not exports().exists()
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="starting with a letter or digit") as err:
        export("res", "--out", str(tmp_path / "out"), f"--version={version}")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists() and not Release.objects.exists()


# --- one export per version ----------------------------------------------------------------------------------


def test_a_second_export_of_a_version_being_exported_is_refused(boss, scored):  # noqa: F811
    assert boss.post(export_url(scored), {"version": "v1", "format": "tsv"}).status_code == 302
    first = exports().get()
    second = boss.post(export_url(scored), {"version": "v1", "format": "jsonl"})
    assert second.status_code == 200
    assert errors_of(second) == [
        f"release 'v1' of 'res' is already being exported in job {first.pk}: wait for it, or choose another version"
    ]
    assert exports().count() == 1
    # the default-export action asks for the next version, which is the same one: refused the same way
    boss.post("/admin/scoring/scoredresource/", {"action": "export_default_release", "_selected_action": [scored.pk]})
    assert exports().count() == 1
    assert job_run_inline(job_id=first.pk).status == JobStatus.SUCCEEDED
    again = boss.post(export_url(scored), {"version": "v1", "format": "tsv"})
    assert any("'v1' of 'res' already exists" in e for e in errors_of(again)) and exports().count() == 1
    # a failed or cancelled export does not hold its version
    assert boss.post(export_url(scored), {"version": "v2", "format": "tsv"}).status_code == 302
    exports().filter(params__version="v2").update(status=JobStatus.CANCELLED)
    assert boss.post(export_url(scored), {"version": "v2", "format": "tsv"}).status_code == 302


def test_an_export_job_does_not_pass_off_another_exports_release_as_its_own(boss, scored, tmp_path):  # noqa: F811
    assert boss.post(export_url(scored), {"version": "v1", "format": "tsv"}).status_code == 302
    job = exports().get()
    mine = export("res", "--out", str(tmp_path / "cli"), "--version", "v1")  # meanwhile, on the command line
    manifest = (tmp_path / "cli" / "manifest.json").read_bytes()
    finished = job_run_inline(job_id=job.pk)
    assert finished.status == JobStatus.FAILED
    assert "'v1' of 'res' was made meanwhile by another export" in finished.error
    release = Release.objects.get()
    assert release.pk == mine["release"] and release.job is None and release.location == str(tmp_path / "cli")
    assert (tmp_path / "cli" / "manifest.json").read_bytes() == manifest
    # the job's own release, found by a chunk that runs again, is still its result
    assert boss.post(export_url(scored), {"version": "v2", "format": "tsv"}).status_code == 302
    job = exports().latest("pk")
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED
    made = Release.objects.get(version="v2")
    assert made.job_id == job.pk
    from scoring.releases.job import _run_chunk

    assert _run_chunk(job, job.chunks.get(), lambda done, total: None)["release"] == made.pk


def test_of_two_exports_that_both_passed_the_checks_the_second_fails_clearly(scored, tmp_path, monkeypatch):  # noqa: F811
    release_export(ReleaseExportParams(resource=scored.resource.pk, version="v1"), out_dir=tmp_path / "a")
    monkeypatch.setattr(
        "scoring.releases.export.release_version_free", lambda resource, version: None
    )  # checked too early
    with pytest.raises(ReleaseError, match="'v1' of 'res' was made by another export meanwhile"):
        release_export(ReleaseExportParams(resource=scored.resource.pk, version="v1"), out_dir=tmp_path / "b")
    assert Release.objects.count() == 1


# --- the entailment model field ------------------------------------------------------------------------------


def fake_model(folder):
    """What the request checks of an NLI model folder (config.json and a weight file); never loaded here."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"id2label": {"0": "entailment"}}))
    (folder / "model.safetensors").write_bytes(b"\0" * 8)
    return folder


@pytest.fixture
def roots(tmp_path, settings):
    root = tmp_path / "models"
    fake_model(root / "nli")
    settings.PARAFORGE_MODEL_ROOTS = [str(root)]
    outside = fake_model(tmp_path / "elsewhere" / "nli")  # a good model, but not under the roots
    (root / "escape").symlink_to(outside)
    return root, outside


def outside_values(tmp_path, outside):
    return {
        "exists": str(outside),
        "missing": str(tmp_path / "elsewhere" / "nothing"),
        "a file": str(outside / "config.json"),
        "system": "/etc",
        "dotdot": "../elsewhere/nli",
        "dotdot missing": "../elsewhere/nothing",
        "link out": "escape",
        "nul": "a\0b",
        "root parent": "..",
        "through a file": str(outside / "config.json") + "/../../../models/../elsewhere/nli",
    }


def test_the_model_field_answers_alike_for_every_folder_outside_the_roots(tmp_path, roots):
    root, outside = roots
    messages = {}
    for label, value in outside_values(tmp_path, outside).items():
        with pytest.raises(FilterError) as err:
            parse_filters("entailment=argmax", entailment_model=value, load_model=False, confined=True)
        messages[label] = str(err.value).replace(repr(value), "VALUE")
    assert len(set(messages.values())) == 1, messages
    assert "not an allowed model folder" in messages["exists"] and str(tmp_path) not in messages["exists"]
    # under the roots: named relative to a root, or by its full path
    for value in ("nli", str(root / "nli"), str(root / "nli" / ".." / "nli")):
        assert parse_filters("entailment=argmax", entailment_model=value, load_model=False, confined=True)
    with pytest.raises(FilterError, match="no such folder"):  # inside the roots, the details are the owner's
        parse_filters("entailment=argmax", entailment_model="nothing", load_model=False, confined=True)
    # the command line takes any folder, as before (its user has the server's shell)
    assert parse_filters("entailment=argmax", entailment_model=str(outside), load_model=False)


def test_the_export_form_does_not_say_whether_a_server_folder_exists(boss, scored, tmp_path, roots):  # noqa: F811
    root, outside = roots
    seen = set()
    for value in outside_values(tmp_path, outside).values():
        if "\0" in value:
            continue  # (a form field refuses a NUL byte itself: "Null characters are not allowed.")
        response = boss.post(
            export_url(scored),
            {"version": "v1", "format": "tsv", "filters": "entailment=argmax", "entailment_model": value},
        )
        assert response.status_code == 200, value
        seen.add(tuple(e.replace(repr(value), "VALUE") for e in errors_of(response)))
    assert len(seen) == 1 and "not an allowed model folder" in next(iter(seen))[0], seen
    assert not exports().exists()
    response = boss.post(
        export_url(scored),
        {"version": "v1", "format": "tsv", "filters": "entailment=argmax", "entailment_model": "nli"},
    )
    assert response.status_code == 302 and exports().get().params["entailment_model"] == "nli"
    # the job's own check at its start says the same for a folder outside
    with pytest.raises(FilterError, match="not an allowed model folder"):
        export_release_start(
            ReleaseExportParams(
                resource=scored.resource.pk, version="v2", filters="entailment=argmax", entailment_model=str(outside)
            )
        )
    assert exports().count() == 1
