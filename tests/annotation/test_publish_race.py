"""One draft batch becomes at most one Prolific study / one set of MTurk HITs, whatever the concurrency.

Four simultaneous publishes of one draft once made four funded studies (issue 36). Here real threads publish
at the same moment through every way in -- the API, the admin's Publish, ``crowd publish`` -- each with its
own database connection against the real database (SQLite: one writer at a time; PostgreSQL: the row lock
behind the claim's conditional UPDATE), Prolific through its checked stub (a study's creation is made slow so
that the others arrive while it is under way), MTurk through botocore's Stubber."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.test import Client
from django.utils import timezone

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import Batch, BatchStatus, Campaign, Candidate, Hit, HitItem, Reference
from annotation.providers.mturk import client as mturk_client_module
from annotation.providers.prolific import gateway
from annotation.publishing import PublishInProgress, batch_publish

from .builders import sample_campaign
from .prolific_stub import TOKEN, ProlificStub, serve

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = "https://paraforge.example.org"
BLOCK_NAME = "Paraforge: failed attention checks"


class SlowStudyStub(ProlificStub):
    """Prolific, with a study's creation taking ``create_s`` seconds (the window the race needs)."""

    create_s: float = 1.0

    def _create_study(self, body, **kwargs):
        time.sleep(self.create_s)
        return super()._create_study(body, **kwargs)


@pytest.fixture
def stub(settings):
    stub = SlowStudyStub()
    server = serve(stub)
    settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = stub.url, TOKEN
    settings.PARAFORGE_PUBLIC_URL = PUBLIC
    settings.PROLIFIC_MAX_ATTEMPTS = 1
    yield stub
    server.shutdown()
    server.server_close()
    assert stub.errors == [], f"requests that break Prolific's API description: {stub.errors}"


def race(*calls) -> list:
    """Run the calls in threads released at the same moment; each one's result or exception."""
    start = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(n, call):
        start.wait()
        try:
            results[n] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            results[n] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n, c)) for n, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def logged_in_clients(n: int) -> list[Client]:
    """``n`` browser sessions of one researcher (one per thread: a test Client is not shared)."""
    user = get_user_model().objects.create_superuser("researcher", "r@example.org", "pw")
    clients = [Client() for _ in range(n)]
    for client in clients:
        client.force_login(user)
    return clients


def prolific_draft() -> Batch:
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=4)
    return hit_batch_create(
        campaign=campaign,
        params=BatchParams(
            provider="prolific",
            assignments=2,
            attention_rate=0,
            degraded_rate=0,
            settings={"hits_per_session": 2, "reward_per_session": "1.20", "first_languages": ["English"]},
        ),
    )


def test_simultaneous_publishes_of_one_prolific_draft_make_one_study_and_expire_stops_it(stub):
    batch = prolific_draft()
    clients = logged_in_clients(5)
    url = f"/api/batches/{batch.pk}/publish/"
    for client in clients[:3]:  # warm (the first request of a process loads the URLs and views)
        assert client.get(f"/api/batches/{batch.pk}/hits/").status_code == 200
    assert clients[3].get("/admin/annotation/batch/").status_code == 200

    def api(n):
        return lambda: clients[n].post(url)

    def admin():
        return clients[3].post(
            "/admin/annotation/batch/",
            {"action": "publish_batches", "_selected_action": [batch.pk], "confirm": "yes"},
            follow=True,
        )

    def cli():
        out = io.StringIO()
        call_command("crowd", "publish", str(batch.pk), stdout=out)
        return json.loads(out.getvalue())

    api_one, api_two, api_three, by_admin, by_cli = race(api(0), api(1), api(2), admin, cli)

    assert len(stub.studies) == 1, f"{len(stub.studies)} studies made from one draft"
    (study_id,) = stub.studies
    assert stub.studies[study_id]["status"] == "ACTIVE"
    assert len(stub.calls_to("POST", "/transition/")) == 1  # published (and paid for) once
    batch.refresh_from_db()
    assert batch.status == BatchStatus.PUBLISHED and batch.provider_state["studies"] == {"0": study_id}
    assert batch.publish_claim == "" and batch.publish_claimed_until is None  # the claim was given back
    # the losers were told why, and were sent nothing
    answers = [api_one, api_two, api_three]
    assert all(a.status_code in (200, 409) for a in answers), [a.content for a in answers]
    won = [a for a in answers if a.status_code == 200] + ([by_cli] if isinstance(by_cli, dict) else [])
    refused = [a.json() for a in answers if a.status_code == 409]
    assert all(r["code"] == "publish_in_progress" and "another request" in r["detail"] for r in refused)
    assert all((w.json()["report"] if hasattr(w, "json") else w)["study"] == study_id for w in won)
    if not isinstance(by_cli, dict):
        assert isinstance(by_cli, CommandError) and "being published by another request" in str(by_cli)
    assert by_admin.status_code == 200
    assert refused, "no publish overlapped the one that created the study"

    # publishing again later is the already-published result, and expire stops the one study there is
    again = clients[4].post(url)
    assert again.status_code == 200 and again.json()["report"]["study"] == study_id and len(stub.studies) == 1
    call_command("crowd", "expire", str(batch.pk), stdout=io.StringIO())
    assert [s["status"] for s in stub.studies.values()] == ["AWAITING REVIEW"]


def test_a_study_a_dead_publish_created_is_found_by_its_recorded_name_not_made_twice(stub, monkeypatch):
    batch = prolific_draft()
    stub.create_s = 0
    recorded = gateway.provider_state_save

    def killed_once_created(b, **updates):
        if "studies" in updates:  # Prolific made the study; the worker is killed before it is recorded
            raise RuntimeError("the worker was killed")
        return recorded(b, **updates)

    monkeypatch.setattr(gateway, "provider_state_save", killed_once_created)
    with pytest.raises(RuntimeError):
        batch_publish(batch=batch)
    monkeypatch.setattr(gateway, "provider_state_save", recorded)
    # a killed process gives nothing back: its claim stays until its lease runs out
    Batch.objects.filter(pk=batch.pk).update(
        publish_claim="a-dead-request", publish_claimed_until=timezone.now() + timedelta(minutes=5)
    )
    (study_id,) = stub.studies
    batch.refresh_from_db()
    assert "studies" not in batch.provider_state and batch.provider_state["study_requests"]["0"]
    with pytest.raises(PublishInProgress):  # while the lease runs, nothing is sent
        batch_publish(batch=batch)
    assert len(stub.studies) == 1 and not stub.calls_to("POST", "/transition/")

    Batch.objects.filter(pk=batch.pk).update(publish_claimed_until=timezone.now() - timedelta(seconds=1))
    report = batch_publish(batch=batch)  # taken over: the dead request's study is found, not made again
    assert report["study"] == study_id and len(stub.studies) == 1
    assert stub.studies[study_id]["status"] == "ACTIVE"
    assert len(stub.calls_to("POST", "/api/v1/studies/")) - len(stub.calls_to("POST", "/transition/")) == 1


# --- MTurk -------------------------------------------------------------------------------------------


class SlowHits:
    """A stubbed MTurk client whose HIT creation takes a moment (the window the race needs)."""

    def __init__(self, client):
        self.client = client

    def __getattr__(self, name):
        call = getattr(self.client, name)
        if name != "create_hit_with_hit_type":
            return call

        def slow(**params):
            time.sleep(0.5)
            return call(**params)

        return slow


def mturk_draft(hits: int = 2) -> Batch:
    campaign = Campaign.objects.create(name="mturk race")
    batch = Batch.objects.create(
        campaign=campaign, provider="mturk", settings={"sandbox": True, "public_url": PUBLIC, "reward_usd": "0.50"}
    )
    for r in range(hits):
        ref = Reference.objects.create(campaign=campaign, ref_id=str(r), text=f"Reference {r} here.", length_bucket=5)
        hit = Hit.objects.create(batch=batch, reference=ref, max_assignments=3)
        for p in range(5):
            HitItem.objects.create(
                hit=hit, candidate=Candidate.objects.create(reference=ref, text=f"Candidate {p} of {r}."), position=p
            )
    return batch


def test_simultaneous_publishes_of_one_mturk_draft_create_each_hit_once(monkeypatch, settings):
    settings.PARAFORGE_PUBLIC_URL = PUBLIC
    batch = mturk_draft(hits=2)
    client = boto3.client("mturk", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    monkeypatch.setattr(mturk_client_module, "mturk_client", lambda sandbox: SlowHits(client))
    with Stubber(client) as stub:
        # exactly one publish's calls: any second balance check, HIT type or HIT would break the Stubber
        stub.add_response("get_account_balance", {"AvailableBalance": "100.00"}, {})
        stub.add_response(
            "list_qualification_types",
            {"NumResults": 1, "QualificationTypes": [{"QualificationTypeId": "3BLOCK", "Name": BLOCK_NAME}]},
        )
        stub.add_response("create_hit_type", {"HITTypeId": "3HITTYPE"})
        for n, hit in enumerate(batch.hits.order_by("id")):
            stub.add_response(
                "create_hit_with_hit_type",
                {"HIT": {"HITId": f"3HIT{n:026d}", "HITTypeId": "3HITTYPE"}},
                {
                    "HITTypeId": "3HITTYPE",
                    "MaxAssignments": 3,
                    "LifetimeInSeconds": ANY,
                    "Question": ANY,
                    "RequesterAnnotation": f"paraforge batch {batch.pk} hit {hit.pk}",
                    "UniqueRequestToken": ANY,
                },
            )
        results = race(*[lambda: batch_publish(batch=Batch.objects.get(pk=batch.pk))] * 4)
        stub.assert_no_pending_responses()
    reports = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if not isinstance(r, dict)]
    assert len(reports) == 1 and reports[0]["published"] == 2
    assert len(refused) == 3 and all(isinstance(r, PublishInProgress) for r in refused), refused
    batch.refresh_from_db()
    assert batch.status == BatchStatus.PUBLISHED and batch.publish_claim == ""
    assert sorted(batch.hits.values_list("external_hit_id", flat=True)) == [f"3HIT{n:026d}" for n in range(2)]
