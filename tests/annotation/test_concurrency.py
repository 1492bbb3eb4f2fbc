"""Concurrent submissions to one HIT never exceed its cap (real threads, real connections).

On PostgreSQL the HIT row lock serialises them, so exactly R succeed; SQLite has no row locks but one
writer at a time, so a loser may instead get "database is locked" — either way nothing beyond R is saved.
The service-level cap is also tested deterministically in test_submissions.py."""
import threading

import pytest
from django.db import OperationalError, connection, connections

from annotation.models import Assignment, Judgment
from annotation.submissions import JudgmentInput, SubmissionError, assignment_submit
from annotation.tokens import submission_token_make

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_submissions_never_exceed_the_cap():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    hit = published_batch(campaign, attention_rate=0, assignments=2).hits.get()
    ids = list(hit.items.values_list("candidate_id", flat=True))
    outcomes, start = [], threading.Barrier(6)

    def worker(n):
        try:
            start.wait()
            aid, wid = f"A{n}", f"W{n}"
            assignment_submit(hit=hit, assignment_id=aid, worker_id=wid,
                              token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=wid),
                              judgments=[JudgmentInput(candidate=c, score=60, fluency=2) for c in ids])
            outcomes.append("saved")
        except SubmissionError as exc:
            outcomes.append(exc.code)
        except OperationalError:
            outcomes.append("locked")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(outcomes) == 6 and set(outcomes) <= {"saved", "hit_full", "locked"}
    saved = Assignment.objects.filter(hit=hit).count()
    assert 1 <= saved <= 2 and outcomes.count("saved") == saved
    assert Judgment.objects.count() == 5 * saved
    if connection.vendor == "postgresql":
        assert saved == 2 and outcomes.count("hit_full") == 4
