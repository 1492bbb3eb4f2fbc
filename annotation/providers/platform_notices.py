"""The platforms follow ``annotation.quality.workers``'s verdicts: a disqualified worker is barred on their platform
(MTurk's block qualification, Prolific's blocklist group; local accounts need nothing more), a reinstated
one let back in. Connected when the app is ready (``annotation.apps``), so that the dependency runs one way:
the providers know the quality rules, never the reverse."""

from __future__ import annotations

from django.dispatch import receiver

from annotation.models import Assignment, Provider, Worker
from annotation.quality.workers import worker_disqualified, worker_reinstated

from . import HitProvider, get_provider


def worker_platform(worker: Worker) -> HitProvider | None:
    """The provider of the worker's latest HIT's batch (its sandbox setting included), else of their
    platform; None for imported raters, who are on no platform."""
    if worker.provider == Provider.IMPORT:
        return None
    last = (
        Assignment.objects.filter(worker=worker, hit__isnull=False).select_related("hit__batch").order_by("-id").first()
    )
    return get_provider(last.hit.batch if last is not None else worker.provider)


@receiver(worker_disqualified, dispatch_uid="paraforge-platform-disqualify")
def platform_disqualify(sender, *, worker: Worker, reason: str, **_) -> None:
    provider = worker_platform(worker)
    if provider is not None:
        provider.disqualify(worker=worker, reason=reason)


@receiver(worker_reinstated, dispatch_uid="paraforge-platform-reinstate")
def platform_reinstate(sender, *, worker: Worker, **_) -> None:
    provider = worker_platform(worker)
    if provider is not None:
        provider.reinstate(worker=worker)
