"""Handing a worker their next HIT from a pool we serve ourselves (local annotators, Prolific sessions).

MTurk hands out its own assignments; for local annotators and Prolific participants Paraforge is the one
that gives out HITs, so the rules live here, once: a worker has at most one open assignment (the database
refuses a second: ``one_open_assignment_per_worker``, so of two racing requests the second gets the
first's); they are never given a HIT with a candidate they already judged (in their verified assignments,
or a Prolific session's own, still waiting for verification), a HIT they did or gave back, or a HIT whose
slots are all taken (``live_assignments_q``); the slot is held until the assignment's time runs out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, QuerySet

from annotation.models import SLOT_STATUSES, Assignment, AssignmentStatus, Hit, Judgment, Provider, Verification, Worker


def live_assignments_q(now: dt.datetime, prefix: str = "") -> Q:
    """Assignments that take a HIT slot: submitted or approved, or accepted and not yet expired; verified,
    or a Prolific one not yet verified (Paraforge caps Prolific's HIT slots itself, where MTurk caps its
    own assignments, so an unverified MTurk submission takes none). A flagged one never takes a slot."""
    counted = Q(**{f"{prefix}verification": Verification.VERIFIED}) | Q(
        **{f"{prefix}verification": Verification.UNVERIFIED, f"{prefix}provider": Provider.PROLIFIC}
    )
    return counted & (
        Q(**{f"{prefix}status__in": SLOT_STATUSES})
        | Q(**{f"{prefix}status": AssignmentStatus.ACCEPTED, f"{prefix}expires_at__gt": now})
    )


def open_assignment(worker: Worker, now: dt.datetime) -> Assignment | None:
    """The worker's taken, unsubmitted assignment whose time has not run out."""
    return (
        Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED, expires_at__gt=now)
        .select_related("hit", "worker")
        .first()
    )


def takeable_hits(*, worker: Worker, hits: QuerySet, now: dt.datetime, theirs: Q | None = None) -> QuerySet:
    """Those of ``hits`` the worker may take now (the module's rules), in the order they are given out;
    ``theirs`` as for ``hit_take``. Also how the slider page counts what is left for a local annotator."""
    known = Q(verification=Verification.VERIFIED) | (theirs or Q(pk__in=[]))
    mine = Assignment.objects.filter(known, worker=worker)
    judged = Judgment.objects.filter(assignment__in=mine).values("candidate_id")
    done_or_returned = mine.filter(status__in=(*SLOT_STATUSES, AssignmentStatus.RETURNED), hit__isnull=False).values(
        "hit_id"
    )
    return (
        hits.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .exclude(items__candidate_id__in=judged)
        .exclude(pk__in=done_or_returned)
        .annotate(live=Count("assignments", filter=live_assignments_q(now, "assignments__"), distinct=True))
        .filter(live__lt=F("max_assignments"))
        .order_by("batch_id", "id")
    )


def hit_take(
    *,
    worker: Worker,
    hits: QuerySet,
    now: dt.datetime,
    duration_s: Callable[[Hit], int],
    external_id: Callable[[Hit], str],
    verification: str,
    theirs: Q | None = None,
) -> Assignment | None:
    """The worker's open assignment, else a new one on the first of ``hits`` they may do; None when none is
    left. ``external_id(hit)`` names the new assignment, ``duration_s(hit)`` is how long it holds the slot.
    ``theirs``: which of the worker's assignments are known to be theirs besides the verified ones (a
    Prolific session's own): only those say what they judged and did, so rows forged under their id
    never take work away from them."""
    # an open assignment whose time ran out (the beat task has not run yet) makes way for a new one
    Assignment.objects.filter(worker=worker, status=AssignmentStatus.ACCEPTED, expires_at__lte=now).update(
        status=AssignmentStatus.EXPIRED
    )
    open_one = open_assignment(worker, now)
    if open_one is not None:
        return open_one
    candidates = takeable_hits(worker=worker, hits=hits, now=now, theirs=theirs)
    for hit_id in candidates.values_list("id", flat=True)[:20]:
        try:
            with transaction.atomic():
                hit = Hit.objects.select_for_update().select_related("batch").get(pk=hit_id)
                if hit.assignments.filter(live_assignments_q(now)).count() >= hit.max_assignments:
                    continue  # taken meanwhile
                return Assignment.objects.create(
                    campaign_id=hit.batch.campaign_id,
                    hit=hit,
                    worker=worker,
                    provider=hit.batch.provider,
                    external_assignment_id=external_id(hit),
                    status=AssignmentStatus.ACCEPTED,
                    verification=verification,
                    accepted_at=now,
                    expires_at=now + dt.timedelta(seconds=duration_s(hit)),
                )
        except IntegrityError:
            return open_assignment(worker, now)  # a concurrent request of this worker took one first
    return None
