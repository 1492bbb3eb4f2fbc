"""Publishing a batch: one publish of a batch at a time, whatever the concurrency, so that one draft becomes at
most one Prolific study (per round) or one set of MTurk HITs.

Four simultaneous publishes of one draft once made four paid studies: each request read the batch before the
others had recorded theirs. Every way in -- ``POST /api/batches/<id>/publish/``, the admin's Publish,
``crowd publish``, ``mturk publish``, ``create_hit_batch --publish`` -- goes through ``batch_publish``, which

1. claims the batch with one conditional UPDATE (``publish_claim`` empty, or its lease
   ``publish_claimed_until`` run out): atomic on PostgreSQL (the row lock, the condition checked again after
   it) and on SQLite (one writer at a time), and no transaction stays open while the platform is called;
2. reads the batch again under the claim (a publish that finished meanwhile left its studies or HIT ids in it,
   so this one only checks them: the already-published result);
3. lets the provider record its intent before anything costs money (Prolific: the study's internal name,
   whose completion code is kept first; MTurk: the token nonce behind every HIT's ``UniqueRequestToken``) and
   look for what a request that died had created with it before creating again;
4. gives the claim back. A request that finds the batch claimed is refused at once (``PublishInProgress``,
   the API's 409 ``publish_in_progress``): nothing was sent to the platform. A claim whose request died is
   taken over once its lease (``PARAFORGE_PUBLISH_LEASE_S``, renewed after each thing created) has run out.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .batches.params import BatchError
from .models import Batch, BatchStatus
from .providers import get_provider


class PublishInProgress(BatchError):
    """Another request is publishing this batch now: nothing was sent; its result is the batch's."""

    code = "publish_in_progress"


@dataclass(frozen=True)
class PublishClaim:
    """A held claim on one batch's publish; ``renew`` pushes its lease on (a slow publish is not a dead one)."""

    batch_id: int
    token: str

    def renew(self) -> None:
        """Extend the lease; ``PublishInProgress`` when another request took the batch over meanwhile (this one
        was presumed dead), so that it stops before creating anything more."""
        until = timezone.now() + timedelta(seconds=settings.PARAFORGE_PUBLISH_LEASE_S)
        if not Batch.objects.filter(pk=self.batch_id, publish_claim=self.token).update(publish_claimed_until=until):
            raise PublishInProgress(
                f"batch {self.batch_id}: another publish took this one over (its lease ran out); nothing more "
                "was created by this one"
            )


@contextmanager
def publish_claimed(batch: Batch) -> Iterator[tuple[Batch, PublishClaim]]:
    """Claim the batch's publish (``PublishInProgress`` if another request holds it), yield the batch as stored
    now and the claim, and give the claim back, whatever happens."""
    now = timezone.now()
    token = secrets.token_hex(16)
    claimed = (
        Batch.objects.filter(pk=batch.pk)
        .filter(Q(publish_claim="") | Q(publish_claimed_until__isnull=True) | Q(publish_claimed_until__lte=now))
        .update(publish_claim=token, publish_claimed_until=now + timedelta(seconds=settings.PARAFORGE_PUBLISH_LEASE_S))
    )
    if not claimed:
        raise PublishInProgress(
            f"batch {batch.pk} is being published by another request right now: nothing was sent again; look at "
            "the batch in a moment (its study or HITs are the ones that request makes)"
        )
    try:
        yield Batch.objects.get(pk=batch.pk), PublishClaim(batch.pk, token)
    finally:
        Batch.objects.filter(pk=batch.pk, publish_claim=token).update(publish_claim="", publish_claimed_until=None)


def batch_publish(*, batch: Batch) -> dict:
    """Publish the batch through its provider, one request at a time (see the module docstring), and mark it
    published; returns the provider's report. Publishing a published batch again creates nothing."""
    with publish_claimed(batch) as (current, claim):
        if current.status == BatchStatus.CANCELLED:
            raise BatchError(f"batch {batch.pk} was cancelled")
        report = get_provider(current).publish(batch=current, renew=claim.renew)
        if current.status == BatchStatus.DRAFT:
            Batch.objects.filter(pk=current.pk).update(status=BatchStatus.PUBLISHED)
            current.status = BatchStatus.PUBLISHED
    batch.status, batch.provider_state = current.status, current.provider_state
    return report
