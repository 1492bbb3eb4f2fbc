"""Tiny evaluation samples and HIT batches built in code, for the annotation tests."""

from __future__ import annotations

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.hits.tokens import item_key, submission_token_make
from annotation.models import Batch, BatchStatus, Campaign, Candidate, CandidateSystem, Hit, Reference


def sample_campaign(
    name: str = "sample",
    *,
    buckets=(5, 10),
    refs_per_bucket: int = 3,
    candidates: int = 7,
    settings: dict | None = None,
    job=None,
) -> Campaign:
    """``refs_per_bucket`` references per bucket, each with ``candidates`` system outputs (systems 1..n)."""
    campaign = Campaign.objects.create(name=name, job=job, **({"settings": settings} if settings else {}))
    for bucket in buckets:
        for r in range(refs_per_bucket):
            ref = Reference.objects.create(
                campaign=campaign,
                ref_id=f"{bucket}-{r}",
                length_bucket=bucket,
                text=f"Reference {r} of bucket {bucket} is here.",
            )
            for c in range(candidates):
                cand = Candidate.objects.create(reference=ref, text=f"Paraphrase {c} of reference {bucket}-{r}.")
                CandidateSystem.objects.create(candidate=cand, system=str(c + 1))
    return campaign


def published_batch(campaign: Campaign, *, provider: str = "mturk-sandbox", **kw) -> Batch:
    """A batch marked published without calling MTurk (the API does not care how it got published)."""
    batch = hit_batch_create(campaign=campaign, params=BatchParams(provider=provider, **kw))
    Batch.objects.filter(pk=batch.pk).update(status=BatchStatus.PUBLISHED)
    batch.refresh_from_db()
    return batch


def payload(
    hit: Hit,
    *,
    assignment_id: str = "A1",
    worker_id: str = "W1",
    score: int | None = 70,
    fluency: int = 2,
    token: str | None = None,
    **extra,
) -> dict:
    """A valid submission for every candidate of the HIT (same score and fluency for each)."""
    body = {
        "assignment_id": assignment_id,
        "worker_id": worker_id,
        "token": token
        if token is not None
        else submission_token_make(hit_id=hit.pk, assignment_id=assignment_id, worker_id=worker_id),
        "judgments": [
            {"item": item_key(hit_id=hit.pk, candidate_id=item.candidate_id), "score": score, "fluency": fluency}
            for item in hit.items.order_by("position")
        ],
        "comment": "",
    }
    body.update(extra)
    return body


def items_by_key(hit: Hit) -> dict:
    """The HIT's items by the key its page and the submission API name them with (``tokens.item_key``)."""
    return {item_key(hit_id=hit.pk, candidate_id=item.candidate_id): item for item in hit.items.all()}


def platform_confirms(*external_ids: str):
    """What a provider's ``sync`` does when the platform confirms these assignments (same worker, same HIT):
    the shared verification step with a platform that says yes. (MTurk's own ``confirm`` is tested against
    botocore's Stubber in test_mturk.py.)"""
    from datetime import timedelta

    from annotation.models import Assignment
    from annotation.quality.verification import Confirmation, submissions_verify

    assignments = (
        Assignment.objects.filter(external_assignment_id__in=external_ids)
        .select_related("worker", "campaign", "hit")
        .order_by("id")
    )
    return submissions_verify(
        assignments=assignments, confirm=lambda a: Confirmation("confirmed"), deadline=timedelta(hours=1)
    )
