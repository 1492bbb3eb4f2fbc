"""Periodic work of the annotation app (thin: the logic lives in the providers)."""

from celery import shared_task

from .providers.local import assignments_expire


@shared_task(name="annotation.tasks.expire_local_assignments")
def expire_local_assignments() -> int:
    """Beat task: local assignments whose allotted time ran out return their slot to the pool."""
    return assignments_expire()


@shared_task(name="annotation.tasks.sync_mturk_batches")
def sync_mturk_batches() -> dict:
    """Beat task (its name kept for existing schedules): check the stored submissions of every published
    crowd batch, MTurk and Prolific, against its platform (identities, statuses, missing work)."""
    from .providers.sync import crowd_batches_sync

    return {str(k): v for k, v in crowd_batches_sync().items()}
