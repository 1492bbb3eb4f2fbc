"""A Prolific participant's way through a study: ``hits_per_session`` HITs in a row, then back to Prolific.

Prolific sends a participant to ``/prolific/<batch id>/start/?PROLIFIC_PID=&STUDY_ID=&SESSION_ID=``; every
later visit of that URL by the same participant and session (the slider page goes there after each save)
is one call of ``session_next``, which answers with one step:

* ``hit``: their open assignment, else a new one on the next HIT they may do (``annotation.hits.taking``'s
  rules; it holds the HIT's slot for ``assignment_duration_s``);
* ``complete``: they submitted ``hits_per_session`` HITs, or at least one and none is left for them:
  Prolific's completion URL with the study's completion code;
* ``failed``: the quality checks failed: the other code (Prolific adds them to the blocklist group);
* ``full``: no HIT is free for them and they have done none: an honest page that asks them to return the
  study on Prolific (or to reload later), never a completion code for work not done.

The URL is as forgeable as any, so a session takes nothing until Prolific has said, once, that
``SESSION_ID`` is a running submission of ``PROLIFIC_PID`` in ``STUDY_ID`` (``ProlificProvider.session_live``,
with a short timeout: a participant waits a moment at most). A made-up session, or a real participant's
id with a session that is not theirs, writes no row and holds no slot. Each such question costs a call on
the researcher's Prolific token, so a flood of made-up sessions must not spend the token's rate limit
(``session_asked``): Prolific's answer is cached for ``PROLIFIC_CHECK_CACHE_S`` (the same made-up session
again costs nothing), and the questions are counted in the database (shared by every process) against three
budgets, in this order: per client address (``PROLIFIC_CHECK_ADDRESS_RATE``: a flood from one address spends
its own budget only, and real participants from other addresses go on getting in), per study
(``PROLIFIC_CHECK_STUDY_RATE``) and in all (``PROLIFIC_CHECK_RATE``). Past a budget nothing is asked and
nothing is written: the participant is asked to reload in a minute (503). Its judgments still count for
nothing until ``sync`` has verified the finished submission (``annotation.quality.verification``).

The checks that end a session run on the participant's verified judgments plus this session's own, which
Prolific has not confirmed as finished yet. Their ``Worker`` is disqualified only once ``sync`` has
verified the session.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import uuid
from typing import Literal

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.hits.taking import hit_take, open_assignment
from annotation.models import (
    SUBMITTED_STATUSES,
    WORKER_ID,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    ProlificSession,
    Provider,
    SessionOutcome,
    Verification,
    Worker,
)
from annotation.quality.workers import session_check
from limits.counters import over_limit

from ..errors import ProviderError
from ..retry import RetryPolicy
from .client import ProlificClient
from .gateway import ProlificProvider
from .study import batch_studies, study_codes

log = logging.getLogger(__name__)

URL_PARAMETERS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")


class SessionError(Exception):
    """The start URL cannot lead anywhere; ``message`` is shown to the participant."""

    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status


@dataclasses.dataclass(frozen=True)
class SessionStep:
    kind: Literal["hit", "complete", "failed", "full"]
    assignment: Assignment | None = None
    code: str = ""
    session: ProlificSession | None = None


def _ids(participant: str, study: str, session: str) -> None:
    for name, value in zip(URL_PARAMETERS, (participant, study, session)):
        if not value:
            raise SessionError(f"The address lacks Prolific's {name}: open the study from Prolific.")
        if not WORKER_ID.match(value):  # Prolific's ids are 24 hex digits; test studies' may be other words
            raise SessionError(f"Prolific's {name} in the address is not valid: open the study from Prolific.")


def _end(session: ProlificSession, outcome: str, reason: str = "", failed_attention: bool = False) -> ProlificSession:
    ProlificSession.objects.filter(pk=session.pk, outcome=SessionOutcome.OPEN).update(
        outcome=outcome, reason=reason, failed_attention=failed_attention, ended_at=timezone.now()
    )
    session.refresh_from_db()
    return session


def _step_for(session: ProlificSession, codes: dict) -> SessionStep:
    if session.outcome == SessionOutcome.FAILED:
        return SessionStep("failed", code=codes["failed_code"], session=session)
    return SessionStep("complete", code=codes["completion_code"], session=session)


def confirming_provider() -> ProlificProvider:
    """The provider the start URL asks: a short timeout and one retry, since a participant is waiting."""
    return ProlificProvider(
        client=ProlificClient(
            timeout_s=float(settings.PROLIFIC_START_TIMEOUT_S),
            retry=RetryPolicy(max_attempts=2, base_delay_s=0.2, max_delay_s=0.5),
        )
    )


def session_asked(
    platform: ProlificProvider | None, *, batch: Batch, participant: str, study: str, session_id: str, address: str
) -> str:
    """Prolific's answer on a new session (``session_live``), from the cache when it was asked lately, else
    asked within the budgets (see the module docstring). ``SessionError`` (503) past a budget: nothing asked."""
    key = "prolific-session:" + hashlib.sha256(f"{participant}|{study}|{session_id}".encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached
    for counter, rate in (
        (f"prolific-check:address:{address}", settings.PROLIFIC_CHECK_ADDRESS_RATE),
        (f"prolific-check:study:{batch.pk}:{study}", settings.PROLIFIC_CHECK_STUDY_RATE),
        ("prolific-check:all", settings.PROLIFIC_CHECK_RATE),
    ):
        if over_limit(counter, rate) is not None:
            log.warning("Prolific session checks over budget (%s): session %s not asked about", counter, session_id)
            raise SessionError(
                "Many new sessions are being checked with Prolific right now. Please reload this page in a minute.",
                status=503,
            )
    answer = (platform or confirming_provider()).session_live(
        participant=participant, study=study, session_id=session_id
    )
    cache.set(key, answer, settings.PROLIFIC_CHECK_CACHE_S)
    return answer


def _session_confirm(
    platform: ProlificProvider | None, *, batch: Batch, participant: str, study: str, session_id: str, address: str
) -> None:
    """Raise ``SessionError`` unless Prolific says the session is a running submission of this participant in
    this study. No such session, another participant's and another study's read the same (nobody learns whose
    sessions exist); a session of theirs that ended says so."""
    try:
        answer = session_asked(
            platform, batch=batch, participant=participant, study=study, session_id=session_id, address=address
        )
    except ProviderError as exc:
        log.warning("could not confirm Prolific session %s: %s", session_id, exc)
        raise SessionError(
            "We could not reach Prolific to confirm your session. Please reload this page in a minute.", status=503
        ) from exc
    if answer == "ended":
        raise SessionError(
            "Prolific says this session has ended (returned, timed out or already submitted), so "
            "it cannot take work any more.",
            status=410,
        )
    if answer != "live":
        raise SessionError(
            "Prolific does not know this session: open the study from your Prolific account.", status=403
        )


def session_next(
    *,
    batch_id: int,
    participant: str,
    study: str,
    session_id: str,
    now: dt.datetime | None = None,
    platform: ProlificProvider | None = None,
    address: str = "",
) -> SessionStep:
    """The participant's next step in their session (see the module docstring); ``SessionError`` when the
    address cannot lead anywhere (bad ids, no such open study, a session Prolific does not know as theirs).
    ``platform``: the provider that confirms a new session (default: ``confirming_provider()``); ``address``:
    the client's, whose budget of questions to Prolific a new session spends."""
    now = now or timezone.now()
    _ids(participant, study, session_id)
    batch = Batch.objects.filter(pk=batch_id, provider=Provider.PROLIFIC).select_related("campaign").first()
    if batch is None:
        raise SessionError("There is no such study.", status=404)
    studies = {sid: round_number for round_number, sid in batch_studies(batch).items()}
    if studies and study not in studies:
        raise SessionError("This address was opened for another Prolific study.")
    session = ProlificSession.objects.filter(batch=batch, session_id=session_id).select_related("worker").first()
    if session is not None and session.worker.external_id != participant:
        raise SessionError("This Prolific session belongs to another participant.", status=403)
    if session is not None and session.outcome != SessionOutcome.OPEN:
        return _step_for(session, study_codes(batch))
    if batch.status != BatchStatus.PUBLISHED:  # nothing is written for a study that is not open
        raise SessionError("This study is not open at the moment: please return it on Prolific.", status=410)
    if session is None or session.confirmed_at is None:
        _session_confirm(
            platform, batch=batch, participant=participant, study=study, session_id=session_id, address=address
        )
        session = _session_record(batch, participant=participant, study=study, session_id=session_id, now=now)
    worker = session.worker
    codes = study_codes(batch)
    prefix = f"{session_id}:"  # the session's assignments are named <session id>:<hit id>:<nonce>
    mine = Assignment.objects.filter(worker=worker, hit__batch=batch, external_assignment_id__startswith=prefix)
    if worker.disqualified:
        return _step_for(_end(session, SessionOutcome.FAILED, worker.disqualified_reason), codes)
    reason, attention = session_check(
        worker=worker, campaign=batch.campaign, assignment_ids=list(mine.values_list("pk", flat=True))
    )
    if reason:
        mine.filter(status=AssignmentStatus.ACCEPTED).update(status=AssignmentStatus.RETURNED)
        return _step_for(_end(session, SessionOutcome.FAILED, reason, failed_attention=attention), codes)
    done = mine.filter(status__in=SUBMITTED_STATUSES).count()
    if done >= session_hits(batch):
        return _step_for(_end(session, SessionOutcome.COMPLETED), codes)
    # an open assignment of another session or study makes way: one participant, one page at a time
    elsewhere = open_assignment(worker, now)
    if elsewhere is not None and not elsewhere.external_assignment_id.startswith(prefix):
        Assignment.objects.filter(pk=elsewhere.pk, status=AssignmentStatus.ACCEPTED).update(
            status=AssignmentStatus.RETURNED
        )
    duration = int((batch.settings or {}).get("assignment_duration_s") or 3600)
    hits = batch.hits.filter(round=studies[study]) if studies else batch.hits.all()  # an EASL round: its study
    assignment = hit_take(
        worker=worker,
        hits=hits,
        now=now,
        verification=Verification.UNVERIFIED,
        theirs=Q(external_assignment_id__startswith=prefix),
        duration_s=lambda hit: duration,
        external_id=lambda hit: f"{session_id}:{hit.pk}:{uuid.uuid4().hex[:8]}",
    )
    if assignment is not None:
        return SessionStep("hit", assignment=assignment, session=session)
    if done:  # they worked until nothing was left: the work is done, through no fault of theirs
        return _step_for(_end(session, SessionOutcome.COMPLETED), codes)
    return SessionStep("full", session=session)


def session_hits(batch: Batch) -> int:
    """HITs a session of the batch does before it is complete."""
    return int((batch.settings or {}).get("hits_per_session") or settings.PROLIFIC_HITS_PER_SESSION)


def _session_record(
    batch: Batch, *, participant: str, study: str, session_id: str, now: dt.datetime
) -> ProlificSession:
    """The confirmed session's row (and its participant's), made once even when two requests race."""
    worker, _ = Worker.objects.get_or_create(provider=Provider.PROLIFIC, external_id=participant)
    try:
        with transaction.atomic():
            session, _ = ProlificSession.objects.get_or_create(
                batch=batch, session_id=session_id, defaults={"worker": worker, "study_id": study, "confirmed_at": now}
            )
    except IntegrityError:
        session = ProlificSession.objects.get(batch=batch, session_id=session_id)
    if session.worker_id != worker.pk:
        raise SessionError("This Prolific session belongs to another participant.", status=403)
    if session.confirmed_at is None:  # a session stored before sessions were confirmed
        ProlificSession.objects.filter(pk=session.pk).update(confirmed_at=now)
        session.confirmed_at = now
    session.worker = worker
    return session


__all__ = ["SessionError", "SessionStep", "session_next", "session_hits", "URL_PARAMETERS"]
