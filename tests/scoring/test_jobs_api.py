"""The researcher's scoring path over HTTP (issue 30): train, score, export as JSON calls that start the
admin's jobs through the admin's forms (their start checks, their permissions), followed at /api/jobs/<id>/."""

import json

import pytest
from django.contrib.auth import get_user_model

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Regressor, Release, ScoredResource

from .resource_data import build_resource
from .test_admin_jobs import grant
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def run(client, answer) -> dict:
    """Run the started job here (no worker in this test) and read it back as the API shows it."""
    assert answer.status_code == 202, answer.content
    started = answer.json()
    assert job_run_inline(job_id=started["job"]).status == JobStatus.SUCCEEDED, Job.objects.get(pk=started["job"]).error
    return client.get(started["url"]).json()


def test_the_whole_scoring_path_over_http(client, tmp_path, storage_dir):
    campaign = build_campaign(tmp_path, n_refs=20)
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    trained = run(client, post(client, "/api/regressors/", {"campaign": campaign.pk, "name": "api-reg"}))
    assert trained["status"] == "succeeded" and Regressor.objects.filter(name="api-reg").exists()
    regressor = Regressor.objects.get(name="api-reg")
    resource = build_resource()
    scored = run(client, post(client, "/api/scored-resources/", {"resource": resource.pk, "regressor": regressor.pk}))
    assert scored["kind"] == "score_resource" and scored["status"] == "succeeded"
    row = ScoredResource.objects.get(resource=resource, regressor=regressor)
    url = f"/api/scored-resources/{row.pk}/releases/"
    released = run(client, post(client, url, {"version": "v1", "format": "tsv", "license": "cc-by-4.0"}))
    assert released["status"] == "succeeded" and Release.objects.get().version == "v1"
    again = post(client, url, {"version": "v1", "format": "tsv"})  # the version exists
    assert again.status_code in (400, 409) and again.json()["detail"]


@pytest.mark.parametrize(
    "body,where",
    [
        ({"campaign": None, "name": "x"}, "campaign"),
        ({"campaign": 999999, "name": "x"}, "campaign"),
        ({"name": "../etc"}, "name"),
        ({"name": "x", "test_fraction": 1.5}, "test"),
        ({"name": "x", "test_fraction": "0.2"}, "test_fraction"),  # a JSON number, not text
    ],
)
def test_a_training_that_cannot_succeed_is_refused_before_any_job(client, tmp_path, storage_dir, body, where):
    campaign = build_campaign(tmp_path, n_refs=20)
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    refused = post(client, "/api/regressors/", {"campaign": campaign.pk, **body})
    assert refused.status_code == 400 and refused.json()["code"] == "invalid" and where in json.dumps(refused.json())
    assert not Job.objects.exists()


def test_the_admins_permissions_hold_over_http(client, tmp_path, storage_dir):
    campaign = build_campaign(tmp_path, n_refs=20)
    body = {"campaign": campaign.pk, "name": "api-reg"}
    assert post(client, "/api/regressors/", body).status_code == 403  # anonymous
    user = get_user_model().objects.create_user("analyst", password="pw", is_staff=True)
    grant(client, user, "jobs.view_job")  # may follow jobs, not train
    assert post(client, "/api/regressors/", body).json()["code"] == "permission_denied"
    grant(client, user, "scoring.add_regressor")
    assert post(client, "/api/regressors/", body).status_code == 202
    Regressor.objects.create(name="taken", key="regressors/taken.joblib", signature={}, metrics={})
    replace = post(client, "/api/regressors/", {**body, "name": "taken", "replace": True})
    assert replace.status_code == 403 and "change_regressor" in replace.json()["detail"]
