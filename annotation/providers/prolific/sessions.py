"""A Prolific participant's way through a study: ``hits_per_session`` HITs in a row, then back to Prolific.

Prolific sends a participant to ``/prolific/<batch id>/start/?PROLIFIC_PID=&STUDY_ID=&SESSION_ID=``; every
later visit of that URL by the same participant and session (the slider page goes there after each save)
is one call of ``session_next``, which answers with one step:

* ``hit``: their open assignment, else a new one on the next HIT they may do (``annotation.taking``'s
  rules; it holds the HIT's slot for ``assignment_duration_s``);
* ``complete``: they submitted ``hits_per_session`` HITs, or none is left for them: Prolific's completion
  URL with the study's completion code;
* ``failed``: the quality checks failed: the other code (Prolific adds them to the blocklist group).

The checks that end a session run on the participant's verified judgments plus this session's own, which
Prolific has not confirmed yet: a session forged under a real participant's id can end only itself.
Their ``Worker`` is disqualified only once ``sync`` has verified the session (``annotation.verification``).
The URL is as forgeable as any: what it starts counts for nothing until Prolific confirms the participant
and session.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from typing import Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import (SUBMITTED_STATUSES, Assignment, AssignmentStatus, Batch, BatchStatus, ProlificSession,
                               Provider, SessionOutcome, Verification, Worker)
from annotation.taking import hit_take, open_assignment

from .gateway import batch_studies, study_codes

# Prolific's ids are 24 hex digits; anything of letters, digits, '-' and '_' is accepted (test studies)
PROLIFIC_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
URL_PARAMETERS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")


class SessionError(Exception):
    """The start URL cannot lead anywhere; ``message`` is shown to the participant."""

    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status


@dataclasses.dataclass(frozen=True)
class SessionStep:
    kind: Literal["hit", "complete", "failed"]
    assignment: Assignment | None = None
    code: str = ""
    session: ProlificSession | None = None


def _ids(participant: str, study: str, session: str) -> None:
    for name, value in zip(URL_PARAMETERS, (participant, study, session)):
        if not value:
            raise SessionError(f"The address lacks Prolific's {name}: open the study from Prolific.")
        if not PROLIFIC_ID.match(value):
            raise SessionError(f"Prolific's {name} in the address is not valid: open the study from Prolific.")


def _end(session: ProlificSession, outcome: str, reason: str = "", failed_attention: bool = False) -> ProlificSession:
    ProlificSession.objects.filter(pk=session.pk, outcome=SessionOutcome.OPEN).update(
        outcome=outcome, reason=reason, failed_attention=failed_attention, ended_at=timezone.now())
    session.refresh_from_db()
    return session


def _step_for(session: ProlificSession, codes: dict) -> SessionStep:
    if session.outcome == SessionOutcome.FAILED:
        return SessionStep("failed", code=codes["failed_code"], session=session)
    return SessionStep("complete", code=codes["completion_code"], session=session)


def session_next(*, batch_id: int, participant: str, study: str, session_id: str,
                 now: dt.datetime | None = None) -> SessionStep:
    """The participant's next step in their session (see the module docstring); ``SessionError`` when the
    address cannot lead anywhere (bad ids, no such open study, another participant's session)."""
    from annotation.quality import session_check

    now = now or timezone.now()
    _ids(participant, study, session_id)
    batch = Batch.objects.filter(pk=batch_id, provider=Provider.PROLIFIC).select_related("campaign").first()
    if batch is None:
        raise SessionError("There is no such study.", status=404)
    studies = {sid: round_number for round_number, sid in batch_studies(batch).items()}
    if studies and study not in studies:
        raise SessionError("This address was opened for another Prolific study.")
    codes = study_codes(batch)
    worker, _ = Worker.objects.get_or_create(provider=Provider.PROLIFIC, external_id=participant)
    try:
        with transaction.atomic():
            session, _ = ProlificSession.objects.get_or_create(
                batch=batch, session_id=session_id, defaults={"worker": worker, "study_id": study})
    except IntegrityError:
        session = ProlificSession.objects.get(batch=batch, session_id=session_id)
    if session.worker_id != worker.pk:
        raise SessionError("This Prolific session belongs to another participant.", status=403)
    if session.outcome != SessionOutcome.OPEN:
        return _step_for(session, codes)
    if batch.status != BatchStatus.PUBLISHED:
        raise SessionError("This study is not open at the moment: please return it on Prolific.", status=410)
    prefix = f"{session_id}:"  # the session's assignments are named <session id>:<hit id>:<nonce>
    mine = Assignment.objects.filter(worker=worker, hit__batch=batch, external_assignment_id__startswith=prefix)
    if worker.disqualified:
        return _step_for(_end(session, SessionOutcome.FAILED, worker.disqualified_reason), codes)
    reason, attention = session_check(worker=worker, campaign=batch.campaign,
                                      assignment_ids=list(mine.values_list("pk", flat=True)))
    if reason:
        mine.filter(status=AssignmentStatus.ACCEPTED).update(status=AssignmentStatus.RETURNED)
        return _step_for(_end(session, SessionOutcome.FAILED, reason, failed_attention=attention), codes)
    hits_per_session = int((batch.settings or {}).get("hits_per_session") or settings.PROLIFIC_HITS_PER_SESSION)
    if mine.filter(status__in=SUBMITTED_STATUSES).count() >= hits_per_session:
        return _step_for(_end(session, SessionOutcome.COMPLETED), codes)
    # an open assignment of another session or study makes way: one participant, one page at a time
    elsewhere = open_assignment(worker, now)
    if elsewhere is not None and not elsewhere.external_assignment_id.startswith(prefix):
        Assignment.objects.filter(pk=elsewhere.pk, status=AssignmentStatus.ACCEPTED).update(
            status=AssignmentStatus.RETURNED)
    duration = int((batch.settings or {}).get("assignment_duration_s") or 3600)
    hits = batch.hits.filter(round=studies[study]) if studies else batch.hits.all()  # an EASL round: its study
    assignment = hit_take(worker=worker, hits=hits, now=now, verification=Verification.UNVERIFIED,
                          theirs=Q(external_assignment_id__startswith=prefix),
                          duration_s=lambda hit: duration,
                          external_id=lambda hit: f"{session_id}:{hit.pk}:{uuid.uuid4().hex[:8]}")
    if assignment is None:
        return _step_for(_end(session, SessionOutcome.COMPLETED), codes)
    return SessionStep("hit", assignment=assignment, session=session)


__all__ = ["SessionError", "SessionStep", "session_next", "URL_PARAMETERS"]
