"""Periodic work of the annotation app (thin: the logic lives in the providers)."""
from celery import shared_task

from .providers.local import assignments_expire


@shared_task(name="annotation.tasks.expire_local_assignments")
def expire_local_assignments() -> int:
    """Beat task: local assignments whose allotted time ran out return their slot to the pool."""
    return assignments_expire()
