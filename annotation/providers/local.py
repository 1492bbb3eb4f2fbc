"""The local provider: logged-in annotators take HITs from published local batches, no money involved.

Taking a HIT creates an ``Assignment`` in status ``accepted`` that holds one of the HIT's slots until
its allotted time (the batch's ``assignment_duration_s``) runs out; ``assignments_expire`` (a Celery beat
task) then marks it ``expired`` and the slot returns to the pool. A worker is never given a HIT with a
candidate they already judged, a HIT whose slots are all taken, or anything at all once disqualified.
"""
from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from ..models import (SLOT_STATUSES, Assignment, AssignmentStatus, Batch, BatchStatus, Bonus, Hit, Judgment, Provider,
                      Verification, Worker)



class WorkerBarred(PermissionError):
    """A disqualified worker asked for work."""


def live_assignments_q(now: dt.datetime, prefix: str = "") -> Q:
    """Assignments that take a HIT slot: verified, and submitted or approved, or accepted and not yet
    expired (an unverified crowd submission takes none: the platform caps its own assignments)."""
    return Q(**{f"{prefix}verification": Verification.VERIFIED}) & (
        Q(**{f"{prefix}status__in": SLOT_STATUSES})
        | Q(**{f"{prefix}status": AssignmentStatus.ACCEPTED, f"{prefix}expires_at__gt": now}))


def local_worker(user) -> Worker:
    worker, _ = Worker.objects.get_or_create(provider=Provider.LOCAL, external_id=f"user-{user.pk}",
                                             defaults={"user": user})
    return worker


def local_open_assignment(worker: Worker, now: dt.datetime | None = None) -> Assignment | None:
    """The worker's taken, unsubmitted assignment whose time has not run out."""
    now = now or timezone.now()
    return (Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED, expires_at__gt=now)
            .select_related("hit", "worker").first())


def local_hit_take(*, user, now: dt.datetime | None = None) -> Assignment | None:
    """The user's open assignment, else a new one on the first HIT they may do; None when none is left.

    An annotator has at most one open assignment: the database refuses a second
    (``one_open_assignment_per_worker``), so of two racing requests the second gets the first's."""
    now = now or timezone.now()
    worker = local_worker(user)
    if worker.disqualified:
        raise WorkerBarred(worker.disqualified_reason or "this account is barred from annotation")
    # an open assignment whose time ran out (the beat task has not run yet) makes way for a new one
    Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED, expires_at__lte=now).update(
        status=AssignmentStatus.EXPIRED)
    open_one = local_open_assignment(worker, now)
    if open_one is not None:
        return open_one
    judged = Judgment.objects.counted().filter(worker=worker).values("candidate_id")
    done_or_returned = Assignment.objects.filter(
        worker=worker, status__in=(*SLOT_STATUSES, AssignmentStatus.RETURNED), hit__isnull=False).values("hit_id")
    candidates = (Hit.objects.filter(batch__provider=Provider.LOCAL, batch__status=BatchStatus.PUBLISHED)
                  .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
                  .exclude(items__candidate_id__in=judged)
                  .exclude(pk__in=done_or_returned)
                  .annotate(live=Count("assignments", filter=live_assignments_q(now, "assignments__"), distinct=True))
                  .filter(live__lt=F("max_assignments"))
                  .order_by("batch_id", "id"))
    for hit_id in candidates.values_list("id", flat=True)[:20]:
        try:
            with transaction.atomic():
                hit = Hit.objects.select_for_update().select_related("batch").get(pk=hit_id)
                if hit.assignments.filter(live_assignments_q(now)).count() >= hit.max_assignments:
                    continue  # taken meanwhile
                duration = int((hit.batch.settings or {}).get("assignment_duration_s") or 3600)
                return Assignment.objects.create(
                    campaign_id=hit.batch.campaign_id, hit=hit, worker=worker, provider=Provider.LOCAL,
                    external_assignment_id=f"local-{uuid.uuid4().hex}", status=AssignmentStatus.ACCEPTED,
                    accepted_at=now, expires_at=now + dt.timedelta(seconds=duration))
        except IntegrityError:
            return local_open_assignment(worker, now)  # a concurrent request of this annotator took one first
    return None


def local_assignment_return(*, user, assignment_id: str) -> bool:
    """Give back the user's open assignment: its slot returns to the pool and they are not offered that
    HIT again. False when they have no such open assignment."""
    return bool(Assignment.objects.filter(
        provider=Provider.LOCAL, external_assignment_id=str(assignment_id or ""), worker__user=user,
        status=AssignmentStatus.ACCEPTED).update(status=AssignmentStatus.RETURNED))


def assignments_expire(*, now: dt.datetime | None = None) -> int:
    """Return the slots of local assignments whose time ran out to the pool (idempotent)."""
    now = now or timezone.now()
    return Assignment.objects.filter(provider=Provider.LOCAL, status=AssignmentStatus.ACCEPTED,
                                     expires_at__lte=now).update(status=AssignmentStatus.EXPIRED)


class LocalProvider:
    name = "local"

    def cost_estimate_usd(self, *, batch: Batch) -> Decimal | None:
        return None

    def publish(self, *, batch: Batch) -> None:
        """Local HITs are served from the database: publishing only makes them visible."""
        Batch.objects.filter(pk=batch.pk, status=BatchStatus.DRAFT).update(status=BatchStatus.PUBLISHED)

    def sync(self, *, batch: Batch) -> int:
        return 0  # local submissions arrive through the API directly

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
            status=AssignmentStatus.EXPIRED)

    def reinstate(self, *, worker: Worker) -> None:
        return None

    def expire(self, *, batch: Batch) -> None:
        now = timezone.now()
        open_hits = Hit.objects.filter(batch=batch).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        open_hits.update(expires_at=now)
        Assignment.objects.filter(hit__batch=batch, status=AssignmentStatus.ACCEPTED).update(
            status=AssignmentStatus.EXPIRED)
