"""What every crowd provider shares: ``Batch.provider_state`` updates under a row lock, and the public
https address that the platform sends workers to."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db import transaction

from .errors import ProviderConfigurationError

if TYPE_CHECKING:
    from annotation.models import Assignment, Batch


def provider_state(batch: Batch) -> dict:
    return dict(batch.provider_state or {})


def provider_state_save(batch: Batch, **updates) -> dict:
    """Merge ``updates`` into ``Batch.provider_state`` under a row lock (other keys untouched)."""
    from annotation.models import Batch

    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        state = {**(locked.provider_state or {}), **updates}
        locked.provider_state = state
        locked.save(update_fields=["provider_state"])
    batch.provider_state = state
    return state


def public_url_check(url: Any, *, platform: str, error: type[Exception] = ProviderConfigurationError) -> str:
    """The https:// address the platform sends workers to; anything else -> ``error``."""
    public_url = str(url or "")
    if not public_url.startswith("https://"):
        raise error(
            f"{platform} sends workers to the slider pages over https: set PARAFORGE_PUBLIC_URL (or the batch's "
            f"'public_url') to the https:// address workers can reach (now {public_url!r})"
        )
    return public_url.rstrip("/")


def bonus_recipients(batch: Batch, workers: Iterable[str] | None = None) -> list[Assignment]:
    """Each worker's latest verified assignment in the batch (only the named workers, if given): where a
    batch bonus is paid, once per worker, on every platform."""
    from annotation.models import Assignment, Verification

    chosen = (
        Assignment.objects.filter(hit__batch=batch, verification=Verification.VERIFIED)
        .select_related("hit__batch", "worker")
        .order_by("worker_id", "-id")
    )
    if workers is not None:
        chosen = chosen.filter(worker__external_id__in=list(workers))
    latest: dict[int, Assignment] = {}
    for assignment in chosen:
        latest.setdefault(assignment.worker_id, assignment)
    return list(latest.values())
