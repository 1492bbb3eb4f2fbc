"""A crowd worker's identity is what the platform confirms, not what a page URL says.

The attack these tests replay: an MTurk batch's slider page signs a submission token for whatever
``assignmentId`` and ``workerId`` its URL carries, so anyone can submit under a real worker's id. Those
submissions are stored (nothing lost) but count for nothing until ``sync`` confirms them with MTurk
(botocore's Stubber checks every request against MTurk's own API description; a call nobody queued
fails the test, so "MTurk was not called" is asserted too)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from urllib.parse import urlencode

import boto3
import pytest
from botocore.stub import Stubber
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.batches.exports import batch_results_csv
from annotation.hits.tokens import item_key
from annotation.models import Assignment, Hit, Judgment, Verification, Worker
from annotation.providers import mturk as mturk_module
from annotation.providers.local import local_hit_take
from annotation.providers.mturk import MTurkProvider
from annotation.providers.retry import RetryPolicy
from scoring.aggregation import counted_workers

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db

VICTIM = "A2VICTIMWORKER0000001"


@pytest.fixture
def mturk(monkeypatch):
    """A stubbed MTurk client that every provider made in this test uses."""
    client = boto3.client("mturk", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    monkeypatch.setattr(mturk_module.client, "mturk_client", lambda sandbox: client)
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


@pytest.fixture
def batch():
    """Six MTurk HITs, each with an attention check (the reference's copy), published."""
    campaign = sample_campaign(
        buckets=(5,),
        refs_per_bucket=6,
        candidates=4,
        settings={"min_judgments_per_worker": 1, "min_attention_checks": 5},
    )
    batch = published_batch(campaign, attention_rate=1.0, assignments=3)
    for n, hit in enumerate(batch.hits.order_by("id")):
        Hit.objects.filter(pk=hit.pk).update(external_hit_id=f"3HIT{n:026d}")
    return batch


def forge(client, hit: Hit, assignment_id: str, worker_id: str, check_score: int):
    """What an attacker does with plain HTTP: open the page with a chosen worker id, post its token."""
    return post(client, hit, forged_body(client, hit, assignment_id, worker_id, check_score))


def post(client, hit: Hit, body: dict):
    return client.post(f"/api/hits/{hit.pk}/assignments/", json.dumps(body), content_type="application/json")


def forged_body(client, hit: Hit, assignment_id: str, worker_id: str, check_score: int) -> dict:
    query = urlencode({"assignmentId": assignment_id, "hitId": hit.external_hit_id, "workerId": worker_id})
    page = client.get(f"/hits/{hit.pk}/?{query}").content.decode()
    start = page.index('name="submission-token" content="') + len('name="submission-token" content="')
    token = page[start : page.index('"', start)]
    body = {
        "assignment_id": assignment_id,
        "worker_id": worker_id,
        "token": token,
        "comment": "",
        "judgments": [
            {
                "item": item_key(hit_id=i.hit_id, candidate_id=i.candidate_id),
                "score": check_score if i.is_attention_check else 50,
                "fluency": 2,
            }
            for i in hit.items.all()
        ],
    }
    return body


def test_forged_submissions_under_a_real_workers_id_count_for_nothing(client, mturk, batch):
    hits = list(batch.hits.order_by("id"))
    for n, hit in enumerate(hits[:5]):  # five failed attention checks under the victim's id
        assert forge(client, hit, f"FORGED{n}", VICTIM, check_score=0).status_code == 201  # stored: nothing lost
    for n in range(3):  # and the first HIT's three slots filled with fake assignments
        assert forge(client, hits[0], f"FILLER{n}", f"FAKE{n}", check_score=100).status_code == 201
    assert set(Assignment.objects.values_list("verification", flat=True)) == {Verification.UNVERIFIED}
    victim = Worker.objects.get(external_id=VICTIM)
    assert not victim.disqualified  # and MTurk was not asked to block anyone (the Stubber has nothing queued)
    assert counted_workers(batch.campaign) == set()

    # the real worker is neither "already judged" nor refused a full HIT
    page = client.get(f"/hits/{hits[0].pk}/?assignmentId=REAL0&hitId={hits[0].external_hit_id}&workerId={VICTIM}")
    assert page.status_code == 200 and 'id="submit"' in page.content.decode()
    assert "already judged" not in page.content.decode()
    assert forge(client, hits[0], "REAL0", VICTIM, check_score=100).status_code == 201

    # sync: MTurk knows REAL0 (by the victim), FILLER0 by someone else, and nothing of the others
    real = {
        "AssignmentId": "REAL0",
        "WorkerId": VICTIM,
        "HITId": hits[0].external_hit_id,
        "AssignmentStatus": "Submitted",
    }
    for n, hit in enumerate(hits):
        mturk.add_response(
            "list_assignments_for_hit",
            {"Assignments": [real] if n == 0 else []},
            {
                "HITId": hit.external_hit_id,
                "MaxResults": 100,
                "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
            },
        )
    for hit in hits:
        for a in Assignment.objects.filter(hit=hit).order_by("id"):
            if a.external_assignment_id == "REAL0":
                mturk.add_response("get_assignment", {"Assignment": real}, {"AssignmentId": "REAL0"})
            elif a.external_assignment_id == "FILLER0":
                mturk.add_response(
                    "get_assignment",
                    {
                        "Assignment": {
                            "AssignmentId": "FILLER0",
                            "WorkerId": "A3SOMEONEELSE",
                            "HITId": hit.external_hit_id,
                        }
                    },
                    {"AssignmentId": "FILLER0"},
                )
            else:
                mturk.add_client_error(
                    "get_assignment",
                    service_error_code="RequestError",
                    service_message="Assignment does not exist",
                    expected_params={"AssignmentId": a.external_assignment_id},
                )
    # the forged ones were stored more than the assignment's time ago: MTurk can no longer receive them
    Assignment.objects.exclude(external_assignment_id="REAL0").update(submitted_at=timezone.now() - timedelta(hours=2))
    report = MTurkProvider(sandbox=True, retry=RetryPolicy(max_attempts=1)).sync(batch=batch)
    assert report["verified"] == 1 and report["flagged"] == 8 and report["unconfirmed"] == 0
    assert report["flagged_ids"]["FILLER0"]["mturk_worker"] == "A3SOMEONEELSE"
    assert "never submitted" in report["flagged_ids"]["FORGED1"]["reason"]
    real = Assignment.objects.get(external_assignment_id="REAL0")
    assert real.verification == Verification.VERIFIED
    victim.refresh_from_db()
    assert not victim.disqualified and counted_workers(batch.campaign) == {victim.pk}
    assert set(Judgment.objects.counted().values_list("assignment__external_assignment_id", flat=True)) == {"REAL0"}
    # the raw results file keeps every row (nothing lost) and says which ones count
    out = io.StringIO()
    batch_results_csv(batch=batch, out=out)
    marks = {row["AssignmentId"]: row["Verification"] for row in csv.DictReader(io.StringIO(out.getvalue()))}
    assert len(marks) == 9 and marks["REAL0"] == "verified" and marks["FILLER0"] == "flagged"


def test_a_worker_mturk_confirms_is_disqualified_by_their_own_failed_checks(client, mturk, batch):
    hits = list(batch.hits.order_by("id"))
    for n, hit in enumerate(hits[:5]):
        assert forge(client, hit, f"REAL{n}", VICTIM, check_score=0).status_code == 201
    mine = [
        [
            {
                "AssignmentId": f"REAL{n}",
                "WorkerId": VICTIM,
                "HITId": hit.external_hit_id,
                "AssignmentStatus": "Submitted",
            }
        ]
        if n < 5
        else []
        for n, hit in enumerate(hits)
    ]
    for hit, listing in zip(hits, mine):
        mturk.add_response(
            "list_assignments_for_hit",
            {"Assignments": listing},
            {
                "HITId": hit.external_hit_id,
                "MaxResults": 100,
                "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
            },
        )
    for n, listing in enumerate(mine[:5]):
        mturk.add_response("get_assignment", {"Assignment": listing[0]}, {"AssignmentId": f"REAL{n}"})
    # verified, the rule applies, and now MTurk is asked to block the worker
    mturk.add_response(
        "list_qualification_types",
        {
            "NumResults": 1,
            "QualificationTypes": [
                {"QualificationTypeId": "3BLOCK0000000000000000000000X", "Name": "Paraforge: failed attention checks"}
            ],
        },
        {
            "Query": "Paraforge: failed attention checks",
            "MustBeRequestable": False,
            "MustBeOwnedByCaller": True,
            "MaxResults": 100,
        },
    )
    mturk.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": "3BLOCK0000000000000000000000X",
            "WorkerId": VICTIM,
            "IntegerValue": 1,
            "SendNotification": False,
        },
    )
    assert MTurkProvider(sandbox=True, retry=RetryPolicy(max_attempts=1)).sync(batch=batch)["verified"] == 5
    victim = Worker.objects.get(external_id=VICTIM)
    assert victim.disqualified and "failed 5 of 5 attention checks" in victim.disqualified_reason


# --- local annotators: the logged-in annotator is the token's worker -----------------------------------


@pytest.fixture
def local_batch():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    return published_batch(campaign, provider="local", attention_rate=0, assignments=2)


def _local_body(client, assignment) -> dict:
    page = client.get(
        f"/hits/{assignment.hit_id}/?assignmentId={assignment.external_assignment_id}"
        f"&hitId={assignment.hit_id}&workerId={assignment.worker.external_id}"
    ).content.decode()
    start = page.index('name="submission-token" content="') + len('name="submission-token" content="')
    return {
        "assignment_id": assignment.external_assignment_id,
        "worker_id": assignment.worker.external_id,
        "token": page[start : page.index('"', start)],
        "comment": "",
        "judgments": [
            {"item": item_key(hit_id=i.hit_id, candidate_id=i.candidate_id), "score": 70, "fluency": 2}
            for i in assignment.hit.items.all()
        ],
    }


def test_a_local_token_is_refused_from_another_annotators_session(client, local_batch):
    owner = get_user_model().objects.create_user("owner", password="pw")
    intruder = get_user_model().objects.create_user("intruder", password="pw")
    assignment = local_hit_take(user=owner)
    client.force_login(owner)
    body = _local_body(client, assignment)
    url = f"/api/hits/{assignment.hit_id}/assignments/"
    client.force_login(intruder)
    refused = client.post(url, json.dumps(body), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "assignment_mismatch"
    client.logout()
    anonymous = client.post(url, json.dumps(body), content_type="application/json")
    assert anonymous.status_code == 403 and not Judgment.objects.exists()
    client.force_login(owner)
    assert client.post(url, json.dumps(body), content_type="application/json").status_code == 201


def test_a_disqualified_annotator_gets_403_disqualified(client, local_batch):
    from annotation.quality.workers import worker_disqualify

    ann = get_user_model().objects.create_user("ann", password="pw")
    assignment = local_hit_take(user=ann)
    client.force_login(ann)
    body = _local_body(client, assignment)
    worker_disqualify(worker=assignment.worker, reason="disqualified by the project's staff")
    response = client.post(
        f"/api/hits/{assignment.hit_id}/assignments/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 403 and response.json()["code"] == "disqualified"
    assert not Judgment.objects.exists()


def test_the_admin_does_not_tell_a_disqualified_annotator_who_disqualified_them(admin_client, client, local_batch):
    ann = get_user_model().objects.create_user("ann", password="pw")
    assignment = local_hit_take(user=ann)
    admin_client.post("/admin/annotation/worker/", {"action": "disqualify", "_selected_action": [assignment.worker_id]})
    client.force_login(ann)
    barred = client.get("/annotate/next/")
    assert barred.status_code == 403 and "admin" not in barred.content.decode()  # the superuser's name


# --- what a page shows before anyone accepted it ------------------------------------------------------


def test_a_preview_shows_only_published_crowd_hits(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    published = published_batch(campaign, attention_rate=0).hits.get()
    local = published_batch(campaign, provider="local", attention_rate=0).hits.get()
    from annotation.batches.making import hit_batch_create
    from annotation.batches.params import BatchParams

    draft = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="mturk-sandbox", attention_rate=0)
    ).hits.get()
    sentence = published.reference.text
    shown = client.get(f"/hits/{published.pk}/")  # the task's form on an example, not this HIT's sentences
    assert shown.status_code == 200 and "Preview" in shown.content.decode() and sentence not in shown.content.decode()
    for hidden in (local, draft):
        for query in ("", "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"):
            response = client.get(f"/hits/{hidden.pk}/{query}")
            assert response.status_code == 404 and sentence not in response.content.decode()
    # a made-up assignment id on a draft HIT: blocked, and its sentences not shown either
    guessed = client.get(f"/hits/{draft.pk}/?assignmentId=X&workerId=Y")
    assert sentence not in guessed.content.decode()


def test_another_annotator_opening_a_local_hit_sees_no_sentence(client, local_batch):
    owner = get_user_model().objects.create_user("owner", password="pw")
    assignment = local_hit_take(user=owner)
    client.force_login(get_user_model().objects.create_user("intruder", password="pw"))
    page = client.get(
        f"/hits/{assignment.hit_id}/?assignmentId={assignment.external_assignment_id}"
        f"&hitId={assignment.hit_id}&workerId={assignment.worker.external_id}"
    )
    assert page.status_code == 403 and assignment.hit.reference.text not in page.content.decode()


# --- taking and returning HITs ------------------------------------------------------------------------


def test_taking_is_a_post_and_an_annotator_can_return_a_hit(client, local_batch):
    ann = get_user_model().objects.create_user("ann", password="pw")
    client.force_login(ann)
    for _ in range(3):  # a prefetch, a reload: a GET takes nothing
        assert client.get("/annotate/next/").status_code == 200
    assert not Assignment.objects.exists()
    first = client.post("/annotate/next/")["Location"]
    taken = Assignment.objects.get()
    assert client.post("/annotate/next/")["Location"] == first  # a double click: the same HIT
    page = client.get(first).content.decode()
    assert 'id="return"' in page
    returned = client.post("/annotate/return/", {"assignment": taken.external_assignment_id})
    assert returned.status_code == 302
    taken.refresh_from_db()
    assert taken.status == "returned"
    second = client.post("/annotate/next/")["Location"]
    assert f"/hits/{taken.hit_id}/" not in second  # not offered the returned HIT again
    # the returned slot is back in the pool for others
    other = local_hit_take(user=get_user_model().objects.create_user("bob", password="pw"))
    assert other is not None


def test_a_conflicting_replay_is_409_and_keeps_the_first(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    hit = published_batch(campaign, attention_rate=0).hits.get()
    body = forged_body(client, hit, "A1", "W1", check_score=100)
    assert post(client, hit, body).status_code == 201
    assert post(client, hit, body).status_code == 200  # a retry of the same submission
    body["judgments"][0]["score"] = 3
    other = post(client, hit, body)
    assert other.status_code == 409 and other.json()["code"] == "conflicting_replay"
    assert sorted(Judgment.objects.values_list("score", flat=True)) == sorted(
        100 if i.is_attention_check else 50 for i in hit.items.all()
    )
