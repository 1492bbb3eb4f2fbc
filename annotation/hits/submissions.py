"""Saving one worker's judgments of one HIT: every rule checked before anything is written.

``assignment_submit`` is the one way judgments of a HIT reach the database (the API calls it; so can a
provider's sync). It refuses, with a ``SubmissionError`` carrying an HTTP status and a clear message:
malformed judgments (score not an integer in 0-100 or null; null score with fluency != 0; fluency not
0/1/2), sentences not in the HIT, missing or repeated (named by their place on the page, never by
candidate id); a bad or forged token; an assignment bound to
another HIT or worker (for local batches: to another logged-in annotator than ``user``); a disqualified
worker; a HIT that expired, whose batch is not open, or that already has its ``max_assignments``; a
worker who already judged one of its candidates. The same assignment submitted again with the same
judgments returns the stored one (nothing duplicated); with other judgments it is a 409
``conflicting_replay``. The HIT row is locked (``select_for_update``) so that concurrent submissions
never exceed the cap, the worker row so that one worker's concurrent submissions never judge a
candidate twice.

Identity: a crowd page's worker id comes from its URL, which anyone can forge. So a crowd submission is
stored at once (nothing lost) as ``unverified`` and counts for nothing -- not for the cap, "already
judged", the quality rules or any aggregate -- until the provider's ``sync`` confirms the assignment
(``annotation.quality.verification``). A real worker is therefore never refused because of unverified rows
(the platform caps its own assignments). A local annotator is logged in, so their submission is
``verified`` at once and the quality rule runs immediately.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.hits.taking import live_assignments_q
from annotation.hits.tokens import TokenError, item_key, submission_token_verify
from annotation.models import (
    ASSIGNMENT_ID,
    SUBMITTED_STATUSES,
    WORKER_ID,
    Assignment,
    AssignmentStatus,
    BatchStatus,
    Hit,
    Judgment,
    Provider,
    Verification,
    Worker,
    judgment_value_error,
)
from annotation.quality.workers import worker_quality_apply

log = logging.getLogger(__name__)

MAX_COMMENT = 5000


class SubmissionError(Exception):
    """A refused submission: ``status`` is the HTTP status the API answers with."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid"):
        super().__init__(message)
        self.message, self.status, self.code = message, status, code


@dataclasses.dataclass(frozen=True)
class JudgmentInput:
    """One judgment as submitted: the sentence by its key on the HIT page (``item``, what the API takes) or,
    from code, by candidate id (``candidate``)."""

    candidate: Any = None
    score: Any = None
    fluency: Any = None
    item: Any = None
    moved: Any = None  # whether the worker moved the slider (None: the page did not say)


@dataclasses.dataclass
class SubmissionResult:
    assignment: Assignment
    created: bool
    disqualified: str | None = None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def judgments_check(judgments: list[JudgmentInput], hit_candidates: list[int], *, hit_id: int) -> list[JudgmentInput]:
    """Every judgment well formed, and exactly one per sentence of the HIT (``hit_candidates``: its candidate
    ids in page order); returns them with the candidate ids filled in. Messages name a sentence by its place
    on the page ("sentence 3"), never by its candidate id: a refused submission saves nothing, so a worker
    could probe with it, and ids tell quality-check copies from real candidates (``tokens.item_key``)."""
    if not judgments:
        raise SubmissionError("no judgments submitted")
    place = {cid: n for n, cid in enumerate(hit_candidates, 1)}
    by_key = {item_key(hit_id=hit_id, candidate_id=cid): cid for cid in hit_candidates}
    seen: set[int] = set()
    resolved = []
    for i, j in enumerate(judgments):
        where = f"judgments[{i}]"
        if j.item is not None:
            if not isinstance(j.item, str) or j.item not in by_key:
                raise SubmissionError(f"{where}.item is not a sentence of this HIT")
            candidate = by_key[j.item]
        elif not _is_int(j.candidate) or j.candidate not in place:
            raise SubmissionError(f"{where}.candidate is not a sentence of this HIT")
        else:
            candidate = j.candidate
        if candidate in seen:
            raise SubmissionError(f"{where}: sentence {place[candidate]} is judged twice")
        seen.add(candidate)
        problem = judgment_value_error(j.score, j.fluency)
        if problem:
            raise SubmissionError(f"{where}.{problem}")
        if j.moved not in (None, True, False):
            raise SubmissionError(f"{where}.moved must be true, false or null")
        resolved.append(dataclasses.replace(j, candidate=candidate, item=None))
    missing = [place[cid] for cid in hit_candidates if cid not in seen]
    if missing:
        raise SubmissionError(f"missing judgments for sentence(s) {', '.join(map(str, missing))}")
    return resolved


def hit_closed(*, batch_status: str, expires_at: dt.datetime | None, now: dt.datetime) -> SubmissionError | None:
    """The one rule of when a HIT takes work, for the slider page and the API alike: its batch is published
    and the HIT has not expired. Returns why not (the API's answer), or None."""
    if batch_status == BatchStatus.DRAFT:
        return SubmissionError("This HIT is not open yet: its batch is not published.", status=409, code="not_open")
    if batch_status in (BatchStatus.CANCELLED, BatchStatus.COMPLETED):
        return SubmissionError(f"This batch is closed ({batch_status}).", status=410, code="not_open")
    if expires_at is not None and expires_at <= now:
        return SubmissionError("This HIT has expired.", status=410, code="hit_expired")
    return None


def _same_judgments(assignment: Assignment, judgments: list[JudgmentInput]) -> bool:
    stored = {(j.candidate_id, j.score, j.fluency) for j in assignment.judgments.all()}
    by_key = {item_key(hit_id=assignment.hit_id, candidate_id=cid): cid for cid, _, _ in stored}
    given = {(by_key.get(j.item) if j.item is not None else j.candidate, j.score, j.fluency) for j in judgments}
    return stored == given


def _existing_checked(
    existing: Assignment, hit: Hit, worker_id: str, now: dt.datetime, judgments: list[JudgmentInput], user
) -> bool:
    """True when ``existing`` is already submitted with these judgments (idempotent replay); raises when it
    may not be used."""
    if existing.hit_id != hit.pk:
        raise SubmissionError(
            f"assignment {existing.external_assignment_id} belongs to another HIT",
            status=409,
            code="assignment_mismatch",
        )
    if existing.worker.external_id != worker_id:
        raise SubmissionError(
            f"assignment {existing.external_assignment_id} is bound to another worker",
            status=403,
            code="assignment_mismatch",
        )
    if existing.provider == Provider.LOCAL and (user is None or existing.worker.user_id != user.pk):
        raise SubmissionError(
            "this assignment belongs to another annotator: log in as its annotator",
            status=403,
            code="assignment_mismatch",
        )
    if existing.worker.disqualified and existing.status not in SUBMITTED_STATUSES:
        raise SubmissionError("this worker is disqualified from these HITs", status=403, code="disqualified")
    if existing.status in SUBMITTED_STATUSES:
        if not _same_judgments(existing, judgments):
            raise SubmissionError(
                f"assignment {existing.external_assignment_id} was already submitted with other judgments",
                status=409,
                code="conflicting_replay",
            )
        return True
    if existing.status == AssignmentStatus.RETURNED:
        raise SubmissionError(
            "this assignment was given back; take your next HIT", status=410, code="assignment_returned"
        )
    if existing.status == AssignmentStatus.EXPIRED or (existing.expires_at and existing.expires_at <= now):
        raise SubmissionError(
            "the time allotted to this assignment ran out; take the next HIT", status=410, code="assignment_expired"
        )
    return False


def assignment_submit(
    *,
    hit: Hit,
    assignment_id: str,
    worker_id: str,
    token: str,
    judgments: list[JudgmentInput],
    comment: str = "",
    user=None,
    now: dt.datetime | None = None,
) -> SubmissionResult:
    """Store one assignment's judgments (see the module docstring); then, once it is verified (local
    annotators: at once), apply the quality rule. ``user``: the logged-in user of the request, if any."""
    now = now or timezone.now()
    assignment_id, worker_id = str(assignment_id or "").strip(), str(worker_id or "").strip()
    if not assignment_id or not worker_id:
        raise SubmissionError("assignment_id and worker_id are required")
    if not WORKER_ID.match(worker_id) or not ASSIGNMENT_ID.match(assignment_id):
        raise SubmissionError(
            "worker_id and assignment_id must be a platform's ids (letters, digits, '-', '_'; ':' in an assignment id)"
        )
    if len(comment or "") > MAX_COMMENT:
        raise SubmissionError(f"the comment is longer than {MAX_COMMENT} characters")
    try:
        issued_at = submission_token_verify(
            token=token, hit_id=hit.pk, assignment_id=assignment_id, worker_id=worker_id
        )
    except TokenError as exc:
        raise SubmissionError(str(exc), status=403, code="bad_token") from exc

    with transaction.atomic():
        hit = Hit.objects.select_for_update().select_related("batch__campaign").get(pk=hit.pk)
        batch = hit.batch
        hit_candidates = list(hit.items.order_by("position").values_list("candidate_id", flat=True))
        existing = (
            Assignment.objects.select_related("worker")
            .filter(provider=batch.provider, external_assignment_id=assignment_id)
            .first()
        )
        if existing is not None and _existing_checked(existing, hit, worker_id, now, judgments, user):
            return SubmissionResult(assignment=existing, created=False)
        if existing is None and batch.provider == Provider.LOCAL:
            raise SubmissionError(
                "no such local assignment: take HITs at /annotate/next/", status=403, code="assignment_mismatch"
            )
        if existing is None and batch.provider == Provider.PROLIFIC:
            raise SubmissionError(
                "no such Prolific assignment: open the study from Prolific", status=403, code="assignment_mismatch"
            )
        closed = hit_closed(batch_status=batch.status, expires_at=hit.expires_at, now=now)
        if closed is not None:
            raise closed
        worker, _ = Worker.objects.get_or_create(provider=batch.provider, external_id=worker_id)
        worker = Worker.objects.select_for_update().get(pk=worker.pk)
        if worker.disqualified:
            raise SubmissionError("this worker is disqualified from these HITs", status=403, code="disqualified")
        taken = hit.assignments.filter(live_assignments_q(now))  # verified ones only
        if existing is not None:
            taken = taken.exclude(pk=existing.pk)
        if taken.count() >= hit.max_assignments:
            raise SubmissionError(
                f"this HIT already has its {hit.max_assignments} assignments", status=409, code="hit_full"
            )
        judgments = judgments_check(judgments, hit_candidates, hit_id=hit.pk)
        judged = set(
            Judgment.objects.counted()
            .filter(worker=worker, candidate_id__in=hit_candidates)
            .values_list("candidate_id", flat=True)
        )
        if judged:
            places = [n for n, cid in enumerate(hit_candidates, 1) if cid in judged]
            raise SubmissionError(
                f"this worker already judged sentence(s) {', '.join(map(str, places))} of this HIT in another HIT",
                status=409,
                code="already_judged",
            )
        if existing is None:
            accepted = dt.datetime.fromtimestamp(issued_at, tz=dt.UTC) if issued_at else None
            assignment = Assignment.objects.create(
                campaign_id=batch.campaign_id,
                hit=hit,
                worker=worker,
                provider=batch.provider,
                external_assignment_id=assignment_id,
                status=AssignmentStatus.SUBMITTED,
                verification=Verification.UNVERIFIED,  # only local assignments exist before submission
                accepted_at=accepted if accepted and accepted <= now else None,
                submitted_at=now,
                comment=comment or "",
            )
        else:
            assignment = existing
            assignment.status, assignment.submitted_at, assignment.comment = (
                AssignmentStatus.SUBMITTED,
                now,
                comment or "",
            )
            assignment.save(update_fields=["status", "submitted_at", "comment"])
        Judgment.objects.bulk_create(
            [
                Judgment(
                    assignment=assignment,
                    candidate_id=j.candidate,
                    worker=worker,
                    score=j.score,
                    fluency=j.fluency,
                    slider_moved=j.moved,
                )
                for j in judgments
            ]
        )

    if assignment.verification != Verification.VERIFIED:
        return SubmissionResult(assignment=assignment, created=True)  # the rules run once sync verified it

    try:
        reason = worker_quality_apply(worker=worker, campaign=batch.campaign)
    except Exception:
        log.exception("quality evaluation failed for worker %s", worker)
        reason = None
    return SubmissionResult(assignment=assignment, created=True, disqualified=reason)
