import json
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.hits.tokens import item_key, submission_token_make
from annotation.models import Assignment, AssignmentStatus, Batch, BatchStatus, Hit, Judgment, Worker

from .builders import payload, platform_confirms, published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def hit():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    batch = published_batch(campaign, attention_rate=0)
    return batch.hits.order_by("id").first()


def post(client, hit, body):
    return client.post(f"/api/hits/{hit.pk}/assignments/", data=json.dumps(body), content_type="application/json")


def nothing_saved():
    return Judgment.objects.count() == 0 and not Assignment.objects.filter(status=AssignmentStatus.SUBMITTED).exists()


def test_a_valid_submission_is_saved_and_answered_with_201(client, hit):
    body = payload(hit, comment="fine")
    body["judgments"][0].update(score=None, fluency=0)
    response = post(client, hit, body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["assignment_id"] == "A1" and data["worker_id"] == "W1" and data["hit"] == hit.pk
    assert data["status"] == "submitted" and data["comment"] == "fine"
    assert data["judgments"] == [
        {"item": j["item"], "score": j["score"], "fluency": j["fluency"]} for j in body["judgments"]
    ]
    assignment = Assignment.objects.get(external_assignment_id="A1")
    assert assignment.accepted_at is not None and assignment.submitted_at >= assignment.accepted_at
    assert assignment.worker == Worker.objects.get(provider="mturk", external_id="W1")
    assert Judgment.objects.filter(assignment=assignment).count() == 5


def test_the_same_assignment_again_is_200_and_duplicates_nothing(client, hit):
    assert post(client, hit, payload(hit)).status_code == 201
    again = post(client, hit, payload(hit))
    assert again.status_code == 200 and again.json()["assignment_id"] == "A1"
    assert Assignment.objects.count() == 1 and Judgment.objects.count() == 5


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"score": 101}, "score"),
        ({"score": -1}, "score"),
        ({"score": 50.5}, "score"),
        ({"score": "50"}, "score"),
        ({"score": True}, "score"),
        ({"score": None, "fluency": 2}, "null"),
        ({"score": None, "fluency": 1}, "null"),
        ({"fluency": 3}, "fluency"),
        ({"fluency": None}, "fluency"),
        ({"item": 7}, "item"),
        ({"item": None}, "item"),
    ],
)
def test_malformed_judgments_are_400_and_save_nothing(client, hit, change, needle):
    body = payload(hit)
    body["judgments"][2].update(change)
    response = post(client, hit, body)
    assert response.status_code == 400
    assert needle in json.dumps(response.json())
    assert nothing_saved()


def test_candidates_must_be_exactly_those_of_the_hit(client, hit):
    other = Hit.objects.exclude(pk=hit.pk).first()
    foreign = item_key(hit_id=other.pk, candidate_id=other.items.first().candidate_id)
    body = payload(hit)
    body["judgments"][0]["item"] = foreign
    response = post(client, hit, body)
    assert response.status_code == 400 and "not a sentence of this HIT" in response.json()["detail"]
    body = payload(hit)
    body["judgments"].pop()
    response = post(client, hit, body)
    assert response.status_code == 400 and "missing" in response.json()["detail"]
    body = payload(hit)
    body["judgments"].append(dict(body["judgments"][0]))
    response = post(client, hit, body)
    assert response.status_code == 400 and "twice" in response.json()["detail"]
    body = payload(hit)
    body["judgments"].append({"item": foreign, "score": 1, "fluency": 2})
    assert post(client, hit, body).status_code == 400
    body = payload(hit)  # a candidate id is no way to name a sentence (ids tell checks from real candidates)
    body["judgments"][0] = {"candidate": hit.items.order_by("position").first().candidate_id, "score": 1, "fluency": 2}
    assert post(client, hit, body).status_code == 400
    response = post(client, hit, payload(hit, judgments=[]))
    assert response.status_code == 400
    assert nothing_saved()


def test_bad_forged_or_foreign_tokens_are_403(client, hit):
    for token in (
        "",
        "nonsense",
        submission_token_make(hit_id=hit.pk, assignment_id="A1", worker_id="W2"),
        submission_token_make(hit_id=hit.pk + 1, assignment_id="A1", worker_id="W1"),
        submission_token_make(hit_id=hit.pk, assignment_id="A9", worker_id="W1"),
    ):
        response = post(client, hit, payload(hit, token=token))
        assert response.status_code in (400, 403), token
        assert response.status_code == 400 or "token" in response.json()["detail"]
    assert nothing_saved()


def test_a_disqualified_worker_is_refused(client, hit):
    Worker.objects.create(provider="mturk", external_id="W1", disqualified=True)
    response = post(client, hit, payload(hit))
    assert response.status_code == 403 and "disqualified" in response.json()["detail"]
    assert nothing_saved()


def test_an_expired_hit_is_refused(client, hit):
    Hit.objects.filter(pk=hit.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = post(client, hit, payload(hit))
    assert response.status_code == 410 and "expired" in response.json()["detail"]
    assert nothing_saved()


def test_a_draft_batch_takes_no_submissions(client, hit):
    Batch.objects.filter(pk=hit.batch_id).update(status=BatchStatus.DRAFT)
    response = post(client, hit, payload(hit))
    assert response.status_code == 409 and "not published" in response.json()["detail"]


def test_a_full_hit_is_refused(client, hit):
    Hit.objects.filter(pk=hit.pk).update(max_assignments=2)
    assert post(client, hit, payload(hit, assignment_id="A1", worker_id="W1")).status_code == 201
    assert post(client, hit, payload(hit, assignment_id="A2", worker_id="W2")).status_code == 201
    platform_confirms("A1", "A2")  # until MTurk confirms them, they take no slot
    response = post(client, hit, payload(hit, assignment_id="A3", worker_id="W3"))
    assert response.status_code == 409 and "already has its 2 assignments" in response.json()["detail"]
    assert Assignment.objects.filter(hit=hit).count() == 2 and Judgment.objects.count() == 10


def test_an_assignment_bound_to_another_worker_is_refused(client, hit):
    assert post(client, hit, payload(hit, assignment_id="A1", worker_id="W1")).status_code == 201
    response = post(client, hit, payload(hit, assignment_id="A1", worker_id="W2"))
    assert response.status_code == 403 and "another worker" in response.json()["detail"]
    other = Hit.objects.exclude(pk=hit.pk).first()
    response = post(client, other, payload(other, assignment_id="A1", worker_id="W1"))
    assert response.status_code == 409 and "another HIT" in response.json()["detail"]
    assert Judgment.objects.count() == 5


def test_a_worker_never_judges_a_candidate_twice(client, hit):
    # a second batch over the same sample shows the same candidates again
    second = published_batch(hit.batch.campaign, attention_rate=0)
    twin = next(
        h
        for h in second.hits.all()
        if set(h.items.values_list("candidate_id", flat=True)) & set(hit.items.values_list("candidate_id", flat=True))
    )
    assert post(client, hit, payload(hit, assignment_id="A1", worker_id="W1")).status_code == 201
    platform_confirms("A1")  # until MTurk confirms them, unverified judgments bar nobody
    response = post(client, twin, payload(twin, assignment_id="A2", worker_id="W1"))
    assert response.status_code == 409 and "already judged" in response.json()["detail"]
    assert post(client, twin, payload(twin, assignment_id="A3", worker_id="W2")).status_code == 201
    assert Judgment.objects.count() == 10


def test_unknown_hit_is_404(client, hit):
    assert post(client, Hit(pk=hit.pk + 1000), payload(hit)).status_code == 404


def test_submissions_are_rate_limited_per_worker_and_ip(client, hit, settings):
    settings.ANNOTATION_SUBMISSION_RATE = "2/min"
    for _ in range(2):
        assert post(client, hit, payload(hit)).status_code in (200, 201)
    assert post(client, hit, payload(hit)).status_code == 429
    assert post(client, hit, payload(hit, worker_id="W2", assignment_id="A2")).status_code == 201


def test_batch_hits_is_staff_only_and_has_the_documented_shape(client, admin_client, hit):
    url = f"/api/batches/{hit.batch_id}/hits/"
    assert client.get(url).status_code == 403
    data = admin_client.get(url).json()
    assert len(data) == hit.batch.hits.count()
    first = next(h for h in data if h["id"] == hit.pk)
    assert set(first) == {"id", "reference", "candidates"} and first["reference"] == hit.reference.text
    assert first["candidates"] == [
        {"id": i.candidate_id, "text": i.candidate.text} for i in hit.items.order_by("position")
    ]
    assert admin_client.get("/api/batches/99999/hits/").status_code == 404


@pytest.mark.parametrize("worker_id", ["W\x00", "W\u200b1", "W\u04301", "W 1", "W1\n", "W1\x07", "A" * 65])
def test_ids_no_platform_gives_are_refused_and_stored_rows_show_escaped(client, admin_client, hit, worker_id):
    response = post(
        client,
        hit,
        payload(
            hit,
            worker_id=worker_id,
            token=submission_token_make(hit_id=hit.pk, assignment_id="A1", worker_id=worker_id),
        ),
    )
    assert response.status_code in (400, 403)  # refused (by the serializer, the id rule or the token)
    assert nothing_saved() and not Worker.objects.exists()  # (a NUL is no text PostgreSQL can even look up)
    if worker_id == worker_id.strip():  # (the page and the API strip surrounding whitespace first)
        page = client.get(f"/hits/{hit.pk}/", {"assignmentId": "A1", "workerId": worker_id})
        assert page.status_code == 400 and b'content=""' in page.content  # no token for such an id
    # a row stored before ids were checked reads as escapes in the admin and in results.csv, never raw
    raw = Worker.objects.create(provider="mturk", external_id="W\u200b\u04301")
    Assignment.objects.create(
        campaign=hit.batch.campaign,
        hit=hit,
        worker=raw,
        provider="mturk",
        external_assignment_id="A\u200b9",
        status=AssignmentStatus.SUBMITTED,
    )
    admin_client.user = None
    listing = admin_client.get("/admin/annotation/worker/").content.decode()
    results = admin_client.get(f"/api/batches/{hit.batch_id}/results.csv", HTTP_ACCEPT="text/csv").content.decode()
    for text in (listing, results):
        assert "\u200b" not in text and "\u0430" not in text and "W\\u200b\\u04301" in text
