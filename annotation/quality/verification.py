"""Confirming crowd submissions with the platform before they count: the provider step of ``sync``.

A crowd page learns its worker id from its URL, which anyone can forge, so ``assignment_submit`` stores a
crowd submission as ``unverified`` (``models.Verification``). A provider that takes crowd work gives this
module one function, ``confirm(assignment) -> Confirmation``, that asks the platform about one stored
assignment; ``submissions_verify`` applies the answer the same way for every platform:

* ``confirmed`` (the platform has this assignment, by the same worker, on the same HIT): the assignment
  becomes ``verified`` and counts from now on; the worker's quality rules run, since the judgments that
  feed them are now known to be theirs.
* ``denied`` (another worker or HIT): ``flagged``, never counted; what the platform said is kept in
  ``verification_detail``.
* ``pending`` (the platform does not have it yet: the page posts to us first, then to the platform):
  left ``unverified`` until the worker can no longer have submitted it there (``deadline`` after we
  stored it), then ``flagged``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Literal

from django.utils import timezone

from annotation.models import Assignment, Verification
from annotation.quality.workers import worker_quality_apply

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Confirmation:
    outcome: Literal["confirmed", "denied", "pending"]
    detail: dict = dataclasses.field(default_factory=dict)  # what the platform reported (kept when flagged)


@dataclasses.dataclass
class VerificationReport:
    verified: list[str] = dataclasses.field(default_factory=list)
    flagged: dict[str, dict] = dataclasses.field(default_factory=dict)
    pending: list[str] = dataclasses.field(default_factory=list)


def _mark(assignment: Assignment, verification: str, detail: dict) -> None:
    assignment.verification, assignment.verification_detail = verification, detail
    Assignment.objects.filter(pk=assignment.pk).update(verification=verification, verification_detail=detail)


def submissions_verify(
    *,
    assignments: Iterable[Assignment],
    confirm: Callable[[Assignment], Confirmation],
    deadline: dt.timedelta,
    now: dt.datetime | None = None,
) -> VerificationReport:
    """Ask the platform (``confirm``) about each unverified assignment and record the outcome; then run
    the quality rules of the workers whose assignments were verified."""
    now = now or timezone.now()
    report = VerificationReport()
    newly_verified: dict[tuple[int, int], Assignment] = {}
    for assignment in assignments:
        if assignment.verification != Verification.UNVERIFIED:
            continue
        answer = confirm(assignment)
        ext = assignment.external_assignment_id
        if answer.outcome == "confirmed":
            _mark(assignment, Verification.VERIFIED, {})
            report.verified.append(ext)
            newly_verified[(assignment.worker_id, assignment.campaign_id)] = assignment
        elif answer.outcome == "denied":
            _mark(assignment, Verification.FLAGGED, answer.detail)
            report.flagged[ext] = answer.detail
        elif (assignment.submitted_at or assignment.created_at) + deadline <= now:
            detail = {**answer.detail, "reason": "never submitted on the platform in the assignment's time"}
            _mark(assignment, Verification.FLAGGED, detail)
            report.flagged[ext] = detail
        else:
            report.pending.append(ext)
    for assignment in newly_verified.values():
        try:
            worker_quality_apply(worker=assignment.worker, campaign=assignment.campaign)
        except Exception:
            log.exception("quality evaluation failed for worker %s", assignment.worker)
    return report
