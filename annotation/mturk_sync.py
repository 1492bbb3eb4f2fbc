"""Periodic MTurk sync: every published MTurk batch is checked against MTurk (see ``MTurkProvider.sync_report``).

One batch's failure (MTurk down, credentials revoked) is logged and reported, and never stops the others:
the next beat run tries again, and a sync is safe to repeat.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from .models import Batch, BatchStatus, Provider
from .providers import get_provider

log = logging.getLogger(__name__)


def mturk_batches_sync(*, provider_for: Callable[[Batch], object] = get_provider) -> dict[int, dict]:
    """Sync every published MTurk batch; returns {batch id: its sync report, or {"error": message}}."""
    reports: dict[int, dict] = {}
    for batch in Batch.objects.filter(provider=Provider.MTURK, status=BatchStatus.PUBLISHED).order_by("id"):
        try:
            reports[batch.pk] = provider_for(batch).sync_report(batch=batch)
        except Exception as exc:  # noqa: BLE001 - one batch's trouble must not stop the others
            log.warning("MTurk sync of batch %s failed: %s", batch.pk, exc)
            reports[batch.pk] = {"error": f"{type(exc).__name__}: {exc}"}
    return reports
