"""Periodic crowd sync: every published batch on a crowd platform (MTurk, Prolific) is checked against its
platform (the provider's ``sync``: verification of stored submissions, statuses, missing work).

One batch's failure (the platform down, credentials revoked) is logged and reported, and never stops the
others: the next beat run tries again, and a sync is safe to repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from annotation.models import CROWD_PROVIDERS, Batch, BatchStatus
from annotation.providers import get_provider

log = logging.getLogger(__name__)


def crowd_batches_sync(*, provider_for: Callable[[Batch], object] = get_provider) -> dict[int, dict]:
    """Sync every published crowd batch; returns {batch id: its sync report, or {"error": message}}."""
    reports: dict[int, dict] = {}
    for batch in Batch.objects.filter(provider__in=CROWD_PROVIDERS, status=BatchStatus.PUBLISHED).order_by("id"):
        try:
            reports[batch.pk] = provider_for(batch).sync(batch=batch)
        except Exception as exc:  # noqa: BLE001 - one batch's trouble must not stop the others
            log.warning("sync of %s batch %s failed: %s", batch.provider, batch.pk, exc)
            reports[batch.pk] = {"error": f"{type(exc).__name__}: {exc}"}
    return reports
