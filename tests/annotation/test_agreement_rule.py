"""Issue 46: the rule a careful cheater cannot read. A worker who picks out every check (bench/quality.py: a
classifier reading whole pages finds most) passes the attention and degraded rules whatever they give the real
candidates; the agreement rule compares their scores on the real candidates themselves with the other
workers'."""

from __future__ import annotations

import random

import pytest

from annotation.hits.submissions import JudgmentInput, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import Worker
from annotation.quality.workers import agreement_p_value, agreement_test, worker_quality

from .builders import platform_confirms, published_batch, sample_campaign


def test_the_p_value_is_small_for_agreement_and_one_for_scores_that_never_vary():
    rng = random.Random(0)
    truth = [rng.uniform(0, 100) for _ in range(30)]
    agreeing = [(t + rng.gauss(0, 12), t) for t in truth]
    assert agreement_p_value(agreeing) < 1e-4
    assert agreement_p_value([(100.0, t) for t in truth]) == 1.0  # 100 everywhere: says nothing
    assert agreement_p_value([(rng.uniform(0, 100), t) for t in truth]) > 0.01  # random scores
    assert agreement_p_value([(t, 50.0) for t in truth]) is None  # the others never vary: nothing to compare
    assert agreement_test(agreeing[:29], min_items=30) is None  # not yet tested
    assert agreement_test(agreeing, min_items=30) == agreement_p_value(agreeing)


@pytest.mark.django_db
def test_a_worker_who_spots_every_check_and_gives_the_rest_100_is_disqualified_and_careful_ones_are_not():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=10, candidates=4, settings={"min_judgments_per_worker": 1})
    batch = published_batch(campaign, attention_rate=1.0, degraded_rate=0, assignments=4)
    hits = list(batch.hits.order_by("id"))
    truth = {c: random.Random(c).uniform(5, 95) for h in hits for c in h.items.values_list("candidate_id", flat=True)}
    rng = random.Random(1)

    def work(worker: str, score) -> str | None:
        for n, hit in enumerate(hits):
            aid = f"{worker}-{n}"
            judgments = [
                JudgmentInput(candidate=i.candidate_id, score=100 if i.is_attention_check else score(i), fluency=2)
                for i in hit.items.all()
            ]
            token = submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker)
            assignment_submit(hit=hit, assignment_id=aid, worker_id=worker, judgments=judgments, token=token)
            platform_confirms(aid)
            reason = Worker.objects.get(external_id=worker).disqualified_reason
            if reason:
                return reason
        return None

    def careful(item) -> int:
        return round(min(100, max(0, truth[item.candidate_id] + rng.gauss(0, 12))))

    assert work("A1", careful) is None and work("A2", careful) is None
    reason = work("CHEAT", lambda item: 100)  # every attention copy 100, and every real candidate 100
    assert reason and "not following the other workers'" in reason and "p = 1 > 0.05" in reason
    assert "tested from 30 candidates" in reason
    assert work("A3", careful) is None
    quality = worker_quality(worker=Worker.objects.get(external_id="A3"), campaign=campaign)
    assert quality.agreement_items == 40 and quality.agreement_p < 0.001 and quality.agreement > 0.7
