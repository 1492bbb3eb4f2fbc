"""The local provider: logged-in annotators take HITs from published local batches, no money involved.

Taking a HIT (``annotation.hits.taking``) creates an ``Assignment`` in status ``accepted`` that holds one of the
HIT's slots until its allotted time (the batch's ``assignment_duration_s``) runs out;
``assignments_expire`` (a Celery beat task) then marks it ``expired`` and the slot returns to the pool. A
disqualified worker is given nothing at all.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from ..hits.taking import hit_take, open_assignment
from ..models import (
    ASSIGNMENT_ID,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    Hit,
    Provider,
    Verification,
    Worker,
)
from ..quality.workers import WORKER_BARRED_MESSAGE

__all__ = [
    "WorkerBarred",
    "local_worker",
    "local_open_assignment",
    "local_hit_take",
    "local_assignment_return",
    "assignments_expire",
    "LocalProvider",
]


class WorkerBarred(PermissionError):
    """A disqualified worker asked for work."""


def local_worker(user) -> Worker:
    worker, _ = Worker.objects.get_or_create(
        provider=Provider.LOCAL, external_id=f"user-{user.pk}", defaults={"user": user}
    )
    return worker


def local_open_assignment(worker: Worker, now: dt.datetime | None = None) -> Assignment | None:
    """The worker's taken, unsubmitted assignment whose time has not run out."""
    return open_assignment(worker, now or timezone.now())


def local_hit_take(*, user, now: dt.datetime | None = None) -> Assignment | None:
    """The user's open assignment, else a new one on the first published local HIT they may do
    (``annotation.hits.taking``'s rules); None when none is left."""
    now = now or timezone.now()
    worker = local_worker(user)
    if worker.disqualified:
        raise WorkerBarred(WORKER_BARRED_MESSAGE)  # never which rule (staff see it in the admin)
    hits = Hit.objects.filter(batch__provider=Provider.LOCAL, batch__status=BatchStatus.PUBLISHED)
    return hit_take(
        worker=worker,
        hits=hits,
        now=now,
        verification=Verification.VERIFIED,
        duration_s=lambda hit: int((hit.batch.settings or {}).get("assignment_duration_s") or 3600),
        external_id=lambda hit: f"local-{uuid.uuid4().hex}",
    )


def local_assignment_return(*, user, assignment_id: str) -> bool:
    """Give back the user's open assignment: its slot returns to the pool and they are not offered that
    HIT again. False when they have no such open assignment."""
    if not ASSIGNMENT_ID.match(str(assignment_id or "")):
        return False  # no id a page of ours gives (and a NUL is no text PostgreSQL can look up)
    return bool(
        Assignment.objects.filter(
            provider=Provider.LOCAL,
            external_assignment_id=str(assignment_id or ""),
            worker__user=user,
            status=AssignmentStatus.ACCEPTED,
        ).update(status=AssignmentStatus.RETURNED)
    )


def assignments_expire(*, now: dt.datetime | None = None) -> int:
    """Return the slots of taken assignments whose time ran out to the pool (idempotent): local annotators'
    and Prolific participants' (``annotation.hits.taking``)."""
    now = now or timezone.now()
    return Assignment.objects.filter(
        provider__in=(Provider.LOCAL, Provider.PROLIFIC), status=AssignmentStatus.ACCEPTED, expires_at__lte=now
    ).update(status=AssignmentStatus.EXPIRED)


class LocalProvider:
    """Logged-in annotators, no money: the ``HitProvider`` operations that concern payment or a platform
    report that nothing was needed."""

    name = "local"
    currency = "USD"
    transport_errors: tuple[type[BaseException], ...] = ()

    @staticmethod
    def error_text(exc: BaseException) -> str:
        return str(exc)

    def publish_check(self, *, batch_settings: dict, cost_usd: Decimal | None = None) -> None:
        return None

    def balance(self) -> dict | None:
        return None

    def cost_estimate_usd(self, *, batch: Batch) -> Decimal | None:
        return None

    def publish(self, *, batch: Batch, renew: Callable[[], None] | None = None) -> dict:
        """Local HITs are served from the database: publishing only makes them visible."""
        published = Batch.objects.filter(pk=batch.pk, status=BatchStatus.DRAFT).update(status=BatchStatus.PUBLISHED)
        return {"batch": batch.pk, "provider": self.name, "published": batch.hits.count() if published else 0}

    def sync(self, *, batch: Batch) -> dict:
        """Local submissions arrive through the API from logged-in annotators: nothing to verify."""
        return {"batch": batch.pk, "provider": self.name, "verified": 0, "flagged": 0, "unconfirmed": 0}

    def approve_batch(self, *, batch: Batch) -> dict:
        approved = Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.SUBMITTED).update(
            status=AssignmentStatus.APPROVED
        )
        return {"batch": batch.pk, "provider": self.name, "approved": approved}

    def bonus_batch(self, *, batch: Batch, amount, reason: str, workers=None) -> dict:
        """Local annotators are paid outside the system: nothing is recorded."""
        return {
            "batch": batch.pk,
            "provider": self.name,
            "paid": 0,
            "detail": "local annotators are paid outside Paraforge",
        }

    def approve(self, *, assignment: Assignment) -> None:
        Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.APPROVED)

    def reject(self, *, assignment: Assignment, feedback: str) -> None:
        Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.REJECTED, feedback=feedback)

    def pay_bonus(self, *, bonus: Bonus) -> None:
        """Recorded only (local annotators are paid outside the system)."""
        Bonus.objects.filter(pk=bonus.pk, sent_at__isnull=True).update(sent_at=timezone.now())

    def disqualify(self, *, worker: Worker, reason: str) -> None:
        """``Worker.disqualified`` bars the account from /annotate/; open assignments are released."""
        Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED).update(
            status=AssignmentStatus.EXPIRED
        )

    def reinstate(self, *, worker: Worker) -> None:
        return None

    def expire(self, *, batch: Batch) -> dict:
        now = timezone.now()
        open_hits = Hit.objects.filter(batch=batch).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        expired = open_hits.update(expires_at=now)
        Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.ACCEPTED).update(
            status=AssignmentStatus.EXPIRED
        )
        return {"batch": batch.pk, "provider": self.name, "expired": expired}
