"""Thin Celery tasks: fetch by id, skip what is already done, call the service, retry transient errors."""

from celery import shared_task
from django.db import transaction

from .execution import TRANSIENT_ERRORS, chunk_run, chunks_requeue_lost, job_finish

# Chunks are idempotent (outputs keyed by job and chunk, written once), so they may be acknowledged
# late and redelivered when a worker dies mid-chunk.
_CHUNK_OPTIONS = dict(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=8,
)


def _run(chunk_id: int) -> None:
    chunk_job_complete = chunk_run(chunk_id=chunk_id)
    if chunk_job_complete:
        from .models import JobChunk

        job_id = JobChunk.objects.values_list("job_id", flat=True).get(pk=chunk_id)
        transaction.on_commit(lambda: finish_job.delay(job_id))


@shared_task(name="jobs.tasks.run_chunk_cpu", **_CHUNK_OPTIONS)
def run_chunk_cpu(self, chunk_id: int) -> None:
    _run(chunk_id)


@shared_task(name="jobs.tasks.run_chunk_gpu", **_CHUNK_OPTIONS)
def run_chunk_gpu(self, chunk_id: int) -> None:
    _run(chunk_id)


@shared_task(
    name="jobs.tasks.finish_job", acks_late=True, autoretry_for=TRANSIENT_ERRORS, retry_backoff=2, max_retries=8
)
def finish_job(job_id: int) -> None:
    job_finish(job_id=job_id)


@shared_task(name="jobs.tasks.requeue_lost_chunks")
def requeue_lost_chunks() -> list[int]:
    """The beat's check for chunks whose worker was lost (``chunks_requeue_lost``)."""
    return chunks_requeue_lost()
