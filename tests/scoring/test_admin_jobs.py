"""The admin's whole scoring path: train a regressor on a campaign, score a resource with it, export a
release; each a form (permissions, CSRF, clear errors) that starts a job and shows its progress bar."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Regressor, Release, ScoredResource

from .resource_data import OverlapScorer, build_resource
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db

TRAIN = "/admin/scoring/regressor/train/"
SCORE = "/admin/scoring/scoredresource/score/"


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path, n_refs=20)


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def grant(client, user, *perms):
    """Give ``user`` these permissions and log ``client`` in as the user (fresh: permissions are cached)."""
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    user = get_user_model().objects.get(pk=user.pk)
    client.force_login(user)
    return user


def bar_of(html: str) -> str:
    return re.search(r'<progress class="job-progress" data-job="(\d+)"', html)[1]


def train_form(of, **changes):
    return {
        "campaign": of.pk,
        "name": "admin-reg",
        "test_fraction": "0.2",
        "seed": "0",
        "min_judgments": "",
        "target": "raw",
        "recipe": "base",
        **changes,
    }  # with_embeddings unticked (absent from a POST)


def test_the_whole_path_from_the_admin(boss, campaign):
    page = boss.get("/admin/scoring/regressor/").content.decode()
    assert f'href="{TRAIN}"' in page and "Train a regressor" in page

    # 1. train a regressor on the campaign
    form = boss.get(TRAIN)
    assert form.status_code == 200 and "csrfmiddlewaretoken" in form.content.decode()
    response = boss.post(TRAIN, train_form(campaign))
    job = Job.objects.get(kind="train_regressor")
    assert response.status_code == 302 and response["Location"] == f"{TRAIN}{job.pk}/"
    assert job.params["train"] == {
        "campaign": "synthetic",
        "name": "admin-reg",
        "test_fraction": 0.2,
        "seed": 0,
        "with_embeddings": False,
        "replace": False,
        "min_judgments": None,
        "target": "raw",
    }
    waiting = boss.get(response["Location"]).content.decode()
    assert bar_of(waiting) == str(job.pk) and f'data-reload-when-done="{job.pk}"' in waiting
    assert "job-progress.js" in waiting and "Waiting for a worker" in waiting
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED
    regressor = Regressor.objects.get(name="admin-reg")
    done = boss.get(response["Location"]).content.decode()
    assert "data-reload-when-done" not in done and f"/admin/scoring/regressor/{regressor.pk}/change/" in done
    assert f"{SCORE}?regressor={regressor.pk}" in done and "succeeded 100%" in done

    # 2. score a resource with it (the regressor's link preselects it)
    resource = build_resource()
    form = boss.get(f"{SCORE}?regressor={regressor.pk}").content.decode()
    assert f'<option value="{regressor.pk}" selected>' in form
    assert f'<option value="{resource.pk}" selected>' in form  # the only resource: preselected (issue 48)
    response = boss.post(SCORE, {"resource": resource.pk, "regressor": regressor.pk, "batch_size": "4"})
    job = Job.objects.get(kind="score_resource")
    assert response.status_code == 302 and response["Location"] == f"{SCORE}{job.pk}/"
    assert job.params["batch_size"] == 4 and job.params["regressor"] == "admin-reg"
    assert bar_of(boss.get(response["Location"]).content.decode()) == str(job.pk)
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED
    scored = ScoredResource.objects.get(resource=resource, regressor=regressor)
    done = boss.get(response["Location"]).content.decode()
    assert f"/admin/scoring/scoredresource/{scored.pk}/change/" in done and "(18 pairs)" in done
    export_url = f"/admin/scoring/scoredresource/{scored.pk}/export/"
    assert export_url in done

    # 3. export a release (its licence an SPDX id, written into every format's card)
    refused = boss.post(export_url, {"version": "v1", "format": "tsv", "license": "CC BY 4.0"})
    assert refused.status_code == 200 and "not an SPDX id" in refused.content.decode()
    assert not Job.objects.filter(kind="export_release").exists()
    response = boss.post(export_url, {"version": "v1", "format": "tsv"})
    job = Job.objects.get(kind="export_release")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/scoring/scoredresource/export/{job.pk}/"
    assert bar_of(boss.get(response["Location"]).content.decode()) == str(job.pk)
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, Job.objects.get(pk=job.pk).error
    release = Release.objects.get()
    done = boss.get(response["Location"]).content.decode()
    assert f"/admin/scoring/release/{release.pk}/change/" in done and "release v1 of res" in done


def test_bad_input_is_a_clear_error_and_starts_nothing(boss, campaign, monkeypatch):
    cases = [
        (train_form(campaign, test_fraction="1.5"), "less than or equal to 1"),
        (train_form(campaign, test_fraction="nan"), "Enter a number written in digits 0-9"),
        (train_form(campaign, campaign="999999"), "Select a valid choice"),
        (train_form(campaign, campaign="x"), "Select a valid choice"),
        (train_form(campaign, name="../etc"), "invalid regressor name"),
        (train_form(campaign, name=""), "This field is required."),
        (train_form(campaign, seed="-1"), "greater than or equal to 0"),
        (train_form(campaign, seed="99999999999999999999"), "less than or equal to"),
        (train_form(campaign, min_judgments="-2"), "greater than or equal to 0"),
        (train_form(campaign, target="median"), "Select a valid choice"),
        (train_form(campaign, recipe="v9"), "Select a valid choice"),
    ]
    for data, message in cases:
        response = boss.post(TRAIN, data)
        assert response.status_code == 200 and message in response.content.decode(), (data, message)
    Regressor.objects.create(name="taken", key="regressors/taken.joblib", signature={}, metrics={})
    response = boss.post(TRAIN, train_form(campaign, name="taken"))
    assert "exists (use --replace to overwrite it)" in response.content.decode()
    assert not Job.objects.exists()
    # a second training of one name while the first is unfinished
    assert boss.post(TRAIN, train_form(campaign)).status_code == 302
    response = boss.post(TRAIN, train_form(campaign))
    first = Job.objects.get()
    assert response.status_code == 200 and f"already being trained in job {first.pk}" in response.content.decode()
    assert boss.post(TRAIN, train_form(campaign, name="with-v3", recipe="v3")).status_code == 302
    assert Job.objects.latest("pk").params["train"]["recipe"] == "v3" and "recipe" not in first.params["train"]

    resource = build_resource()
    empty = build_resource(name="empty", shards=[])
    for data, message in (
        ({"resource": empty.pk, "regressor": 1, "batch_size": "4"}, "Select a valid choice"),
        ({"resource": resource.pk, "regressor": 999, "batch_size": "4"}, "Select a valid choice"),
        ({"resource": resource.pk, "batch_size": "0"}, "This field is required."),
        ({"resource": "x", "regressor": "y", "batch_size": "z"}, "Enter a whole number written in digits 0-9."),
    ):
        response = boss.post(SCORE, data)
        assert response.status_code == 200 and message in response.content.decode(), (data, message)
    regressor = Regressor.objects.get(name="taken")
    response = boss.post(SCORE, {"resource": resource.pk, "regressor": regressor.pk, "batch_size": "4"})
    assert "regressor &#x27;taken&#x27;: its model file is missing" in response.content.decode()  # (a bare row)
    assert not Job.objects.filter(kind="score_resource").exists()
    monkeypatch.setattr("scoring.regressor.regressor_load", lambda name: OverlapScorer())  # as if its file were there
    assert boss.post(SCORE, {"resource": resource.pk, "regressor": regressor.pk, "batch_size": "4"}).status_code == 302
    response = boss.post(SCORE, {"resource": resource.pk, "regressor": regressor.pk, "batch_size": "4"})
    assert response.status_code == 200 and "already being scored" in response.content.decode()
    assert Job.objects.filter(kind="score_resource").count() == 1
    # a progress page of another kind's job, or of none, is a 404, not a 500
    assert boss.get(f"{TRAIN}{Job.objects.get(kind='score_resource').pk}/").status_code == 404
    assert boss.get(f"{SCORE}99999999/").status_code == 404
    assert boss.get(f"{SCORE}?regressor=abc&resource=").status_code == 200


def test_permissions_and_csrf(client, campaign):
    resource = build_resource()
    user = grant(client, get_user_model().objects.create_user("staff", password="pw", is_staff=True))
    for url in (TRAIN, SCORE):  # staff, but no permission
        assert client.get(url).status_code == 403 and client.post(url, {}).status_code == 403
    assert client.post(TRAIN, train_form(campaign)).status_code == 403 and not Job.objects.exists()

    user = grant(client, user, "scoring.add_regressor")  # without jobs.view_job no bar could follow the job
    assert client.get(TRAIN).status_code == 403
    user = grant(client, user, "jobs.view_job", "scoring.view_regressor")
    assert client.get(TRAIN).status_code == 200
    assert client.get(SCORE).status_code == 403  # training does not grant scoring
    listing = client.get("/admin/scoring/regressor/").content.decode()
    assert "Train a regressor" in listing and "score a resource…" not in listing
    # replacing an existing regressor also needs the change permission
    Regressor.objects.create(name="admin-reg", key="regressors/admin-reg.joblib", signature={}, metrics={})
    response = client.post(TRAIN, train_form(campaign, replace="on"))
    assert response.status_code == 200 and "you may not replace a regressor" in response.content.decode()
    assert not Job.objects.exists()

    # the form needs its CSRF token
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(TRAIN, train_form(campaign, name="other")).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', strict.get(TRAIN).content.decode())[1]
    response = strict.post(TRAIN, {**train_form(campaign, name="other"), "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and Job.objects.filter(kind="train_regressor").count() == 1

    # exporting needs scoring.add_release: the form and the list's action
    scored = ScoredResource.objects.create(resource=resource, regressor=Regressor.objects.get(name="admin-reg"))
    user = grant(client, user, "scoring.view_scoredresource")
    assert client.get(f"/admin/scoring/scoredresource/{scored.pk}/export/").status_code == 403
    listing = client.get("/admin/scoring/scoredresource/").content.decode()
    assert "export_default_release" not in listing and "Score a resource" not in listing
    grant(client, user, "scoring.add_release", "scoring.add_scoredresource")
    assert client.get(f"/admin/scoring/scoredresource/{scored.pk}/export/").status_code == 200
    listing = client.get("/admin/scoring/scoredresource/").content.decode()
    assert "export_default_release" in listing and f'href="{SCORE}"' in listing
