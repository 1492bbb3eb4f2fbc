from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F

from annotation.hits.submissions import JudgmentInput, SubmissionError, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import Assignment, Judgment, Worker
from annotation.providers.local import WorkerBarred, local_hit_take
from annotation.quality.workers import worker_disqualify, worker_quality, worker_reinstate
from scoring.aggregation import counted_workers

from .builders import platform_confirms, published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def hits():
    """Six HITs of six references, each with an attention check (the reference's copy)."""
    campaign = sample_campaign(
        buckets=(5,),
        refs_per_bucket=6,
        candidates=4,
        settings={
            "min_judgments_per_worker": 1,
            "min_attention_checks": 5,
            "max_attention_failure_rate": 0.1,
            "attention_pass_mark": 100,
        },
    )
    # ParaBank's exact pass mark, stated with the batch (the campaign's is only for batches without one)
    batch = published_batch(
        campaign, attention_rate=1.0, degraded_rate=0, assignments=3, settings={"attention_pass_mark": 100}
    )
    hits = list(batch.hits.order_by("id"))
    assert len(hits) == 6 and all(h.items.filter(is_attention_check=True).count() == 1 for h in hits)
    return hits


def submit(hit, worker, n, check_score):
    aid = f"{worker}-{n}"
    judgments = [
        JudgmentInput(candidate=i.candidate_id, score=check_score if i.is_attention_check else 40, fluency=2)
        for i in hit.items.all()
    ]
    assignment_submit(
        hit=hit,
        assignment_id=aid,
        worker_id=worker,
        judgments=judgments,
        token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker),
    )
    platform_confirms(aid)  # the rules run on what MTurk confirmed
    return Worker.objects.get(external_id=worker).disqualified_reason or None


def test_failing_more_than_a_tenth_of_five_checks_disqualifies(hits):
    assert submit(hits[0], "W1", 0, 99) is None  # 1 of 1 failed, but fewer than 5 checks
    for n in (1, 2, 3):
        assert submit(hits[n], "W1", n, 100) is None
    reason = submit(hits[4], "W1", 4, 100)  # 1 of 5 failed = 20% > 10%
    assert "failed 1 of 5 attention checks" in reason
    worker = Worker.objects.get(external_id="W1")
    assert worker.disqualified and worker.disqualified_at and "20%" in worker.disqualified_reason
    # further work is refused; the stored judgments stay but no aggregate counts them
    with pytest.raises(SubmissionError, match="disqualified"):
        submit(hits[5], "W1", 5, 100)
    assert Judgment.objects.filter(worker=worker).count() == 25
    submit(hits[0], "W2", 0, 100)
    campaign = hits[0].batch.campaign
    assert counted_workers(campaign) == {Worker.objects.get(external_id="W2").pk}


def test_attentive_workers_stay_and_figures_are_computed(hits):
    for n in range(5):
        submit(hits[n], "W1", n, 100)
        submit(hits[n], "W2", n, 100)
    Assignment.objects.filter(worker__external_id="W1").update(accepted_at=None)
    Assignment.objects.filter(worker__external_id="W2").update(accepted_at=F("submitted_at") - timedelta(seconds=42))
    q1 = worker_quality(worker=Worker.objects.get(external_id="W1"))
    q2 = worker_quality(worker=Worker.objects.get(external_id="W2"))
    assert (q1.judgments, q1.attention_passed, q1.attention_failed, q1.failure_rate) == (25, 5, 0, 0.0)
    assert q1.seconds_per_hit is None and q2.seconds_per_hit == pytest.approx(42, abs=1)
    # both gave 100 to checks and 40 elsewhere: agreement is over real candidates only, where nothing varies
    # (the copies' shared 100s no longer make any two workers look in agreement)
    assert q1.agreement is None
    assert not Worker.objects.filter(disqualified=True).exists()


def test_a_disqualified_local_account_is_barred_and_can_be_reinstated(hits):
    user = get_user_model().objects.create_user("ann", password="pw")
    worker = Worker.objects.create(provider="local", external_id=f"user-{user.pk}", user=user)
    worker_disqualify(worker=worker, reason="by hand")
    with pytest.raises(WorkerBarred, match="quality standards"):
        local_hit_take(user=user)
    worker_reinstate(worker=worker)
    assert not Worker.objects.get(pk=worker.pk).disqualified


def test_admin_lists_figures_and_disqualifies_by_hand(admin_client, hits):
    for n in range(2):
        submit(hits[n], "W1", n, 100)
    worker = Worker.objects.get(external_id="W1")
    page = admin_client.get("/admin/annotation/worker/")
    assert page.status_code == 200
    text = page.content.decode().lower()
    assert "checks failed" in text and "agreement" in text and "w1" in text
    response = admin_client.post("/admin/annotation/worker/", {"action": "disqualify", "_selected_action": [worker.pk]})
    assert response.status_code == 302
    assert Worker.objects.get(pk=worker.pk).disqualified
    admin_client.post("/admin/annotation/worker/", {"action": "reinstate", "_selected_action": [worker.pk]})
    assert not Worker.objects.get(pk=worker.pk).disqualified
