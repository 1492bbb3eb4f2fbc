"""The researcher's batch path over HTTP (issue 30): create a draft, publish, sync, approve, expire -- the
admin's permissions and the same services, every refusal JSON with ``detail`` and ``code``."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from annotation.models import Batch, BatchStatus

from .builders import sample_campaign
from .prolific_stub import TOKEN, ProlificStub, serve

pytestmark = pytest.mark.django_db

BATCH = {"provider": "local", "per_length": 2, "lengths": [5], "assignments": 2, "attention_rate": 0, "seed": 3}


def staff(client, *perms: str):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__in=[p.split(".")[1] for p in perms], content_type__app_label="annotation")
    )
    client.force_login(user)
    return client


def post(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


ALL = (
    "annotation.view_campaign",
    "annotation.add_batch",
    "annotation.view_batch",
    *(f"annotation.{op}_batch" for op in ("publish", "sync", "approve", "expire")),
)


def test_a_researcher_creates_and_publishes_a_local_batch(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    researcher = staff(client, *ALL)
    made = post(researcher, f"/api/campaigns/{campaign.pk}/batches/", BATCH)
    assert made.status_code == 201, made.content
    batch = made.json()["batch"]
    assert batch["status"] == "draft" and batch["hits"] == 2 and made.json()["cost_estimate_usd"] is None
    published = post(researcher, f"/api/batches/{batch['id']}/publish/")
    assert published.status_code == 200 and published.json()["provider"] == "local"
    assert Batch.objects.get(pk=batch["id"]).status == BatchStatus.PUBLISHED
    assert post(researcher, f"/api/batches/{batch['id']}/expire/").status_code == 200


@pytest.mark.parametrize(
    "change,where",
    [
        ({"settings": {"reward_usd": "-1"}}, "reward_usd"),
        ({"settings": {"nope": 1}}, "nope"),
        ({"assignments": 0}, "assignments"),
        ({"provider": "elsewhere"}, "provider"),
        ({"lengths": [7]}, "7"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_made(client, change, where):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    refused = post(staff(client, *ALL), f"/api/campaigns/{campaign.pk}/batches/", {**BATCH, **change})
    assert refused.status_code == 400 and where in json.dumps(refused.json()) and refused.json()["code"] == "invalid"
    assert not Batch.objects.exists()


def test_the_admins_permissions_hold(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    url = f"/api/campaigns/{campaign.pk}/batches/"
    assert post(client, url, BATCH).status_code == 403  # anonymous
    viewer = staff(client, "annotation.view_campaign", "annotation.view_batch")  # may look, not act
    answer = post(viewer, url, BATCH)
    assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"
    assert post(viewer, "/api/campaigns/999999/batches/", BATCH).status_code == 403
    assert not Batch.objects.exists()


def test_a_platform_that_refuses_is_a_409_and_prolific_reports_what_approval_paid(client, settings):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    researcher = staff(client, *ALL)
    mturk = post(researcher, f"/api/campaigns/{campaign.pk}/batches/", {**BATCH, "provider": "mturk-sandbox"})
    refused = post(researcher, f"/api/batches/{mturk.json()['batch']['id']}/publish/")
    assert refused.status_code == 409 and refused.json()["code"] == "provider_refused"  # no credentials, no https URL

    stub = ProlificStub()
    server = serve(stub)
    try:
        settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = stub.url, TOKEN
        settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
        prolific = post(
            researcher,
            f"/api/campaigns/{campaign.pk}/batches/",
            {**BATCH, "provider": "prolific", "settings": {"hits_per_session": 1, "reward_per_session": "1.00"}},
        )
        batch = prolific.json()["batch"]["id"]
        assert prolific.json()["cost_estimate_usd"] is not None
        published = post(researcher, f"/api/batches/{batch}/publish/")
        assert published.status_code == 200 and published.json()["report"]["study_status"] == "ACTIVE"
        assert post(researcher, f"/api/batches/{batch}/sync/").json()["report"]["verified"] == 0
        approved = post(researcher, f"/api/batches/{batch}/approve/").json()["report"]
        assert (approved["approved"], approved["skipped_incomplete"]) == (0, 0)
    finally:
        server.shutdown()
        server.server_close()
    assert stub.errors == []
