import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.hits.tokens import item_key
from annotation.models import Assignment, AssignmentStatus, Batch, BatchStatus, Worker
from annotation.providers.local import assignments_expire, local_hit_take
from annotation.tasks import expire_local_assignments

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    return published_batch(campaign, provider="local", attention_rate=0, degraded_rate=0, assignments=2)


def user(name):
    return get_user_model().objects.create_user(name, password="pw")


def token_of(page) -> str:
    text = page.content.decode()
    start = text.index('name="submission-token" content="') + len('name="submission-token" content="')
    return text[start : text.index('"', start)]


def test_next_takes_a_hit_then_resumes_it(batch):
    ann = user("ann")
    first = local_hit_take(user=ann)
    assert first.status == AssignmentStatus.ACCEPTED and first.expires_at > timezone.now()
    assert first.worker == Worker.objects.get(provider="local", user=ann)
    assert local_hit_take(user=ann) == first  # one open assignment at a time


def test_full_hits_and_judged_candidates_are_skipped(batch):
    taken = [local_hit_take(user=user(f"u{n}")) for n in range(5)]
    # 2 HITs x 2 slots: the fifth annotator finds nothing
    assert [a.hit_id for a in taken[:4]].count(taken[0].hit_id) == 2 and taken[4] is None
    # a second batch over the same sample: an annotator who judged a HIT never gets its candidates again
    second = published_batch(batch.campaign, provider="local", attention_rate=0, degraded_rate=0, assignments=2)
    ann = taken[0].worker.user
    Assignment.objects.filter(pk=taken[0].pk).update(status=AssignmentStatus.SUBMITTED)
    from annotation.models import Judgment

    for item in taken[0].hit.items.all():
        Judgment.objects.create(
            assignment=taken[0], candidate=item.candidate, worker=taken[0].worker, score=50, fluency=2
        )
    nxt = local_hit_take(user=ann)
    judged = set(taken[0].hit.items.values_list("candidate_id", flat=True))
    assert nxt.hit.batch_id == second.pk
    assert not judged & set(nxt.hit.items.values_list("candidate_id", flat=True))


def test_drafts_and_mturk_batches_are_not_served():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    hit_batch_create(campaign=campaign, params=BatchParams(provider="local"))  # a draft
    published_batch(campaign, provider="mturk-sandbox")
    assert local_hit_take(user=user("ann")) is None


def test_expired_assignments_return_to_the_pool_via_the_beat_task(batch):
    Batch.objects.filter(pk=batch.pk).update(settings={**batch.settings, "assignment_duration_s": 60})
    taken = [local_hit_take(user=user(f"u{n}")) for n in range(4)]
    late = user("late")
    assert local_hit_take(user=late) is None
    Assignment.objects.filter(pk=taken[0].pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_local_assignments.apply().get() == 1
    assert expire_local_assignments.apply().get() == 0  # idempotent
    assert Assignment.objects.get(pk=taken[0].pk).status == AssignmentStatus.EXPIRED
    again = local_hit_take(user=late)
    assert again is not None and again.hit_id == taken[0].hit_id
    assert assignments_expire(now=timezone.now() + timedelta(seconds=120)) == 4


def test_the_annotator_path_login_next_page_submit(client, batch):
    ann = user("ann")
    response = client.get("/annotate/next/")
    assert response.status_code == 302 and response["Location"].startswith("/annotate/login/")
    assert client.get("/annotate/login/").status_code == 200
    logged_in = client.post("/annotate/login/", {"username": "ann", "password": "pw"})
    assert logged_in.status_code == 302 and logged_in["Location"] == "/annotate/next/"
    client.force_login(ann)
    offer = client.get("/annotate/next/")  # no open HIT: a page to take one (taking is a POST)
    assert offer.status_code == 200 and 'id="take"' in offer.content.decode() and not Assignment.objects.exists()
    response = client.post("/annotate/next/")
    assert response.status_code == 302
    assert client.get("/annotate/next/")["Location"] == response["Location"]  # a GET goes back to it
    url = urlsplit(response["Location"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    page = client.get(response["Location"])
    assert page.status_code == 200 and 'id="submit"' in page.content.decode()
    assignment = Assignment.objects.get(external_assignment_id=query["assignmentId"])
    body = {
        "assignment_id": query["assignmentId"],
        "worker_id": query["workerId"],
        "token": token_of(page),
        "judgments": [
            {"item": item_key(hit_id=i.hit_id, candidate_id=i.candidate_id), "score": 80, "fluency": 2}
            for i in assignment.hit.items.all()
        ],
        "comment": "",
    }
    saved = client.post(
        f"/api/hits/{assignment.hit_id}/assignments/", json.dumps(body), content_type="application/json"
    )
    assert saved.status_code == 201, saved.content
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.judgments.count() == 5
    # the next HIT is another one
    nxt = client.post("/annotate/next/")
    assert f"hits/{assignment.hit_id}/" not in nxt["Location"]


def test_another_user_cannot_open_or_submit_an_assignment(client, batch):
    owner, intruder = user("owner"), user("intruder")
    assignment = local_hit_take(user=owner)
    url = (
        f"/hits/{assignment.hit_id}/?assignmentId={assignment.external_assignment_id}"
        f"&hitId={assignment.hit_id}&workerId={assignment.worker.external_id}"
    )
    assert client.get(url)["Location"].startswith("/annotate/login/?next=")
    client.force_login(intruder)
    page = client.get(url)
    assert page.status_code == 403 and 'content=""' in page.content.decode()


def take_from_the_page(client, name: str) -> tuple[Assignment, dict]:
    """A logged-in annotator takes their next HIT; returns it and the submission its page would post."""
    client.force_login(user(name))
    location = client.post("/annotate/next/")["Location"]
    page = client.get(location)
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assignment = Assignment.objects.get(external_assignment_id=query["assignmentId"])
    body = {
        "assignment_id": query["assignmentId"],
        "worker_id": query["workerId"],
        "token": token_of(page),
        "judgments": [
            {"item": item_key(hit_id=i.hit_id, candidate_id=i.candidate_id), "score": 80, "fluency": 2}
            for i in assignment.hit.items.all()
        ],
    }
    return assignment, body


def submit_body(client, assignment, body):
    return client.post(f"/api/hits/{assignment.hit_id}/assignments/", json.dumps(body), content_type="application/json")


def test_an_expired_local_assignment_cannot_be_submitted(client, batch):
    assignment, body = take_from_the_page(client, "ann")
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = submit_body(client, assignment, body)
    assert response.status_code == 410 and "ran out" in response.json()["detail"]
    assert not assignment.judgments.exists()


def test_a_barred_annotator_gets_no_hit(client, batch):
    ann = user("ann")
    Worker.objects.create(
        provider="local",
        external_id=f"user-{ann.pk}",
        user=ann,
        disqualified=True,
        disqualified_reason="failed 3 of 5 attention checks",
    )
    client.force_login(ann)
    response = client.post("/annotate/next/")
    text = response.content.decode()
    assert response.status_code == 403 and "quality standards" in text and "failed 3 of 5" not in text
    assert client.get("/annotate/next/").status_code == 403
    assert not Assignment.objects.exists()
    assert BatchStatus.PUBLISHED == Batch.objects.get(pk=batch.pk).status


def test_a_returned_assignment_cannot_be_submitted_with_the_token_of_its_page(client, batch):
    assignment, body = take_from_the_page(client, "ann")
    assert client.post("/annotate/return/", {"assignment": body["assignment_id"]}).status_code == 302
    response = submit_body(client, assignment, body)
    assert response.status_code == 410 and response.json()["code"] == "assignment_returned"
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.RETURNED and not assignment.judgments.exists()
