"""Which Prolific sessions are paid, rejected or left alone: pay for what the session's HITs say was done.

Prolific pays per session (a submission), and its completion codes belong to the study: every session is
given the same code, so a code a participant types proves nothing about their own session. What counts is
how Paraforge ended the session (``providers.prolific.sessions``):

* completed (every HIT done, or at least one and the study ran out): approved;
* failed by the degraded-copy test alone (a statistical test, not an instructed check): approved, though the
  participant is blocklisted;
* failed ParaBank's instructed attention check (announced in the instructions): rejected, with a message that
  names that check only -- never the session's full reason, which may name the hidden degraded test;
* still open here: not paid, whatever its status on Prolific; listed with the HITs it did.

Only verified assignments take part (``annotation.quality.verification``); unverified ones wait for ``sync`` and
flagged ones are never paid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from annotation.models import Assignment, ProlificSession, SessionOutcome, Verification

from .study import session_of

REJECT_MESSAGE_MIN = 100  # Prolific asks a rejection message to explain itself in at least 100 characters
ATTENTION_REJECTION = (
    "Your submission was rejected because it failed the study's attention checks: the instructions ask for a "
    "score of 100 on a sentence identical to the reference, and too many of those sentences got less."
)


@dataclasses.dataclass
class ApprovalPlan:
    approve: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # session -> its assignment ids
    reject: dict[str, Assignment] = dataclasses.field(default_factory=dict)  # session -> one of its assignments
    open_sessions: dict[str, int] = dataclasses.field(default_factory=dict)  # session -> HITs it submitted
    skipped_flagged: int = 0
    skipped_unverified: int = 0

    def incomplete(self, hits_per_session: int) -> dict[str, str]:
        return {
            s: f"{n} of {hits_per_session} HITs done; the session is still open"
            for s, n in sorted(self.open_sessions.items())
        }


def approval_plan(assignments: Iterable[Assignment], *, sessions: Iterable[ProlificSession]) -> ApprovalPlan:
    """The plan for a batch's submitted ``assignments`` given its ``sessions`` (the module's rules)."""
    ended = {s.session_id: s for s in sessions if s.outcome != SessionOutcome.OPEN}
    plan = ApprovalPlan()
    for assignment in assignments:
        if assignment.verification == Verification.FLAGGED:
            plan.skipped_flagged += 1
            continue
        if assignment.verification != Verification.VERIFIED:
            plan.skipped_unverified += 1
            continue
        session = session_of(assignment)
        if session not in ended:
            plan.open_sessions[session] = plan.open_sessions.get(session, 0) + 1
        elif ended[session].outcome == SessionOutcome.FAILED and ended[session].failed_attention:
            plan.reject.setdefault(session, assignment)
        else:
            plan.approve.setdefault(session, []).append(assignment.pk)
    return plan


def session_payable(assignment: Assignment) -> bool:
    """Whether Paraforge has ended the assignment's session (so that approving it pays for work done)."""
    return (
        ProlificSession.objects.filter(batch_id=assignment.hit.batch_id, session_id=session_of(assignment))
        .exclude(outcome=SessionOutcome.OPEN)
        .exists()
    )
