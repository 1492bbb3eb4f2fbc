"""Starting, running, finishing, resuming, cancelling and waiting for chunked jobs.

A worker can be lost whole (a preempted GPU machine, a SIGKILL, a power cut): its chunk's message stays
unacknowledged in the broker until the visibility timeout, hours later. So a running chunk holds a lease
(``JobChunk.lease_expires_at``, ``JOBS_CHUNK_LEASE_S`` ahead) that a heartbeat thread of its worker renews
a few times per lease; ``chunks_requeue_lost`` (the beat, every ``JOBS_LEASE_CHECK_S``) puts a chunk whose
lease ran out back to pending and sends it again. A kind writes each output once (``registry.JobKind``), so
a chunk that runs twice -- the lost worker was only slow, or its message comes back too -- changes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from .heartbeat import HEARTBEAT_FRESH, heartbeat_seconds, workers_seen
from .models import TERMINAL_STATUSES, Job, JobChunk, JobStatus
from .registry import finish_hooks, get_kind

logger = logging.getLogger(__name__)


TRANSIENT_ERRORS = (OperationalError, InterfaceError)


class JobCancelled(Exception):
    """Raised inside a chunk when its job was cancelled; the chunk stops without writing."""


# Called with a job's id whenever its progress rows may have moved (``jobs.progress`` shows them).
ProgressListener = Callable[[int], None]


def job_start(*, kind: str, params: dict[str, Any], label: str = "", enqueue: bool = True) -> Job:
    """Create a job and its chunks atomically; the chunk tasks are enqueued once the rows commit."""
    job_kind = get_kind(kind)
    with transaction.atomic():
        job = Job.objects.create(kind=kind, params=params, label=label[:255])
        plans = job_kind.plan(job)
        JobChunk.objects.bulk_create(JobChunk(job=job, index=i, params=p) for i, p in enumerate(plans))
        job.total_chunks = len(plans)
        job.save(update_fields=["total_chunks"])
        if enqueue:
            transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


def chunk_queue(job: Job) -> str:
    """The queue ("cpu" or "gpu") of the job's chunks: its kind's, or the one its params chose."""
    return get_kind(job.kind).queue_of(job.params)


def _task(name: str):
    """A task of ``jobs.tasks`` by the name it is registered under: that module calls this one, so this one
    looks its tasks up in the Celery app's registry (filled by autodiscovery) instead of importing it back."""
    return current_app.tasks[name]


def _chunk_task(job: Job):
    return _task("jobs.tasks.run_chunk_gpu" if chunk_queue(job) == "gpu" else "jobs.tasks.run_chunk_cpu")


def job_enqueue(*, job_id: int) -> int:
    """Send one task per unfinished chunk (or the finishing task if none is left). Returns the count."""
    job = Job.objects.get(pk=job_id)
    if job.is_terminal:
        return 0
    task = _chunk_task(job)
    pending = list(job.chunks.exclude(status=JobStatus.SUCCEEDED).values_list("pk", flat=True))
    for chunk_id in pending:
        task.delay(chunk_id)
    if not pending:
        _task("jobs.tasks.finish_job").delay(job_id)
    return len(pending)


def job_was_cancelled(job_id: int) -> bool:
    """Whether the job was cancelled (one query): how a running chunk learns of ``job_cancel``, from its
    progress recorder and from a decoder's stop check (``generation.generation_job.cancel``)."""
    return Job.objects.filter(pk=job_id, status=JobStatus.CANCELLED).exists()


def _progress_recorder(chunk: JobChunk, on_progress: ProgressListener | None = None):
    last = [0.0, ""]

    def record(done: int, total: int, stage: str | None = None) -> None:
        """``stage`` (optional): what the chunk is doing now, in words; a new stage is always written."""
        now = time.monotonic()
        moved = stage is not None and stage != last[1]
        if now - last[0] < 0.5 and done < total and not moved:
            return
        last[0] = now
        fields: dict[str, Any] = {"done_units": done, "total_units": total}
        if stage is not None:
            fields["stage"] = last[1] = stage[:200]
        JobChunk.objects.filter(pk=chunk.pk).update(**fields)
        if job_was_cancelled(chunk.job_id):
            raise JobCancelled(f"job {chunk.job_id} was cancelled")
        if on_progress is not None:
            on_progress(chunk.job_id)

    return record


def lease_seconds() -> float:
    return float(settings.JOBS_CHUNK_LEASE_S)


@contextmanager
def chunk_lease(chunk_id: int, holder: str) -> Iterator[None]:
    """Renew the chunk's lease every third of ``JOBS_CHUNK_LEASE_S`` while the block runs (from a thread: a
    chunk may spend minutes loading a model without reporting progress). The thread's database connection
    is its own, and closed when it stops."""
    stop = threading.Event()

    def renew() -> None:
        try:
            while not stop.wait(lease_seconds() / 3):
                try:
                    JobChunk.objects.filter(pk=chunk_id, status=JobStatus.RUNNING, ran_on=holder).update(
                        lease_expires_at=timezone.now() + dt.timedelta(seconds=lease_seconds())
                    )
                except Exception:
                    logger.warning("could not renew the lease of chunk %s", chunk_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=renew, name=f"lease-chunk-{chunk_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def chunks_requeue_lost(*, now: dt.datetime | None = None) -> list[int]:
    """Put back to pending, and send again, the running chunks whose lease ran out (their worker is gone)
    while their job goes on; returns their ids. Each chunk is taken back by one conditional update, so two
    beats at once send it once."""
    now = now or timezone.now()
    lost = list(
        JobChunk.objects.filter(status=JobStatus.RUNNING, lease_expires_at__lt=now)
        .exclude(job__status__in=TERMINAL_STATUSES)
        .select_related("job")
    )
    requeued = []
    for chunk in lost:
        with transaction.atomic():
            taken = JobChunk.objects.filter(
                pk=chunk.pk, status=JobStatus.RUNNING, lease_expires_at=chunk.lease_expires_at
            ).update(status=JobStatus.PENDING, lease_expires_at=None)
            if taken:
                logger.warning(
                    "chunk %s of job %s: its worker %s was lost; queued again", chunk.index, chunk.job_id, chunk.ran_on
                )
                task = _chunk_task(chunk.job)
                transaction.on_commit(lambda task=task, pk=chunk.pk: task.delay(pk))
                requeued.append(chunk.pk)
    return requeued


def chunk_run(*, chunk_id: int, on_progress: ProgressListener | None = None) -> bool:
    """Run one chunk unless it already succeeded or its job ended. Returns True if the job is now complete.

    Errors mark the chunk and the job failed, then propagate (a task may retry a transient one; a
    retry runs the chunk again from the start, which the kind's write-once outputs make safe).
    ``on_progress`` (``--wait`` running the job in this process) hears of each progress write.
    """
    with transaction.atomic():
        chunk = JobChunk.objects.select_related("job").get(pk=chunk_id)
        job = chunk.job
        if chunk.status == JobStatus.SUCCEEDED or job.status in TERMINAL_STATUSES:
            return False
        now = timezone.now()
        holder = f"{socket.gethostname()}:{os.getpid()}"
        JobChunk.objects.filter(pk=chunk.pk).update(
            status=JobStatus.RUNNING,
            attempts=F("attempts") + 1,
            started_at=now,
            error="",
            ran_on=holder,
            stage="",
            lease_expires_at=now + dt.timedelta(seconds=lease_seconds()),
        )
        Job.objects.filter(pk=job.pk, status=JobStatus.PENDING).update(status=JobStatus.RUNNING, started_at=now)
    kind = get_kind(job.kind)
    try:
        with chunk_lease(chunk.pk, holder):
            result = kind.run_chunk(job, chunk, _progress_recorder(chunk, on_progress))
    except JobCancelled:
        JobChunk.objects.filter(pk=chunk.pk).update(status=JobStatus.CANCELLED, finished_at=timezone.now())
        return False
    except TRANSIENT_ERRORS:
        raise  # the database went away: the task retries the chunk, which is safe to run again
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        JobChunk.objects.filter(pk=chunk.pk).update(
            status=JobStatus.FAILED, error=traceback.format_exc()[-4000:], finished_at=timezone.now()
        )
        Job.objects.filter(pk=job.pk).exclude(status__in=TERMINAL_STATUSES).update(
            status=JobStatus.FAILED, error=f"chunk {chunk.index}: {message}"[:4000], finished_at=timezone.now()
        )
        raise
    with transaction.atomic():
        JobChunk.objects.filter(pk=chunk.pk).update(
            status=JobStatus.SUCCEEDED,
            result=result,
            finished_at=timezone.now(),
            done_units=F("total_units"),
            lease_expires_at=None,
        )
        remaining = JobChunk.objects.filter(job_id=job.pk).exclude(status=JobStatus.SUCCEEDED).exists()
    return not remaining


def job_finish(*, job_id: int) -> Job:
    """Combine chunk results once every chunk succeeded. Safe to call twice: the second does nothing."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.is_terminal:
            return job
        chunks = list(job.chunks.order_by("index"))
        if any(c.status != JobStatus.SUCCEEDED for c in chunks):
            return job
        kind = get_kind(job.kind)
        try:
            with transaction.atomic():  # the kind's finish and its hooks succeed or fail together
                result = kind.finish(job, chunks)
                for hook in finish_hooks(job.kind):
                    result.update(hook(job, chunks, result) or {})
            job.result = result
            job.status = JobStatus.SUCCEEDED
        except Exception as exc:
            logger.exception("finishing job %s failed", job_id)
            job.status = JobStatus.FAILED
            job.error = f"finish: {type(exc).__name__}: {exc}"[:4000]
        job.finished_at = timezone.now()
        job.started_at = job.started_at or job.finished_at
        job.save(update_fields=["result", "status", "error", "finished_at", "started_at"])
    return job


def job_run_inline(*, job_id: int, on_progress: ProgressListener | None = None) -> Job:
    """Run every unfinished chunk in this process, then finish: ``--wait`` with no worker, and tests.
    ``on_progress`` hears of every progress write and of each chunk's end."""
    for chunk_id in (
        JobChunk.objects.filter(job_id=job_id).exclude(status=JobStatus.SUCCEEDED).values_list("pk", flat=True)
    ):
        try:
            chunk_run(chunk_id=chunk_id, on_progress=on_progress)
        except Exception:  # noqa: BLE001 - chunk_run marked the chunk and the job failed
            return Job.objects.get(pk=job_id)
        if on_progress is not None:
            on_progress(job_id)
    return job_finish(job_id=job_id)


def job_resume(*, job_id: int) -> Job:
    """Put a failed or stalled job back to work: unfinished chunks are reset and sent again."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status == JobStatus.SUCCEEDED:
            return job
        job.chunks.exclude(status=JobStatus.SUCCEEDED).update(status=JobStatus.PENDING, error="")
        job.status = JobStatus.RUNNING if job.chunks.filter(status=JobStatus.SUCCEEDED).exists() else JobStatus.PENDING
        job.error = ""
        job.finished_at = None
        job.save(update_fields=["status", "error", "finished_at"])
        transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


def job_cancel(*, job_id: int) -> Job:
    """Stop a job: queued chunks will not start, running ones stop at their next progress report (a
    generation chunk's decoder within half a second: ``generation.generation_job.cancel``)."""
    Job.objects.filter(pk=job_id).exclude(status__in=TERMINAL_STATUSES).update(
        status=JobStatus.CANCELLED, finished_at=timezone.now()
    )
    return Job.objects.get(pk=job_id)


def chunks_fraction(status: str, chunks: list[dict[str, Any]]) -> float:
    """Fraction done of a job in ``status`` whose chunks are ``{"status", "done_units", "total_units"}``:
    a succeeded chunk counts whole, a running one by the units it reported."""
    if status == JobStatus.SUCCEEDED:
        return 1.0
    done = 0.0
    for c in chunks:
        if c["status"] == JobStatus.SUCCEEDED:
            done += 1
        elif c["total_units"]:
            done += min(1.0, c["done_units"] / c["total_units"])
    return done / (len(chunks) or 1)


def job_stage(status: str, chunks: list[dict[str, Any]]) -> str:
    """What a running job is doing now, in words: the stage its running chunk last reported ("" if none did,
    or once the job is no longer running)."""
    if status != JobStatus.RUNNING:
        return ""
    return next((c["stage"] for c in chunks if c["status"] == JobStatus.RUNNING and c.get("stage")), "")


def job_progress(job: Job) -> dict[str, Any]:
    """Fraction done from chunk counts and the units reported by running chunks."""
    chunks = list(job.chunks.values("status", "done_units", "total_units", "stage"))
    return {
        "job": job.pk,
        "kind": job.kind,
        "status": job.status,
        "chunks": len(chunks),
        "chunks_done": sum(1 for c in chunks if c["status"] == JobStatus.SUCCEEDED),
        "fraction": chunks_fraction(job.status, chunks),
        "stage": job_stage(job.status, chunks),
        "error": job.error,
        "result": job.result,
    }


def uses_embedded_broker() -> bool:
    return settings.CELERY_BROKER_URL.startswith("filesystem://")


def workers_answering(timeout: float = 1.0) -> list[str]:
    """The node names of the Celery workers that answer a ping on the configured broker (a busy solo-pool
    worker does not: ``jobs.heartbeat`` sees it)."""
    from config.celery import app

    try:
        return sorted(name for reply in app.control.ping(timeout=timeout) or [] for name in reply)
    except Exception:  # noqa: BLE001 - broker unreachable: nobody can take the job
        return []


def workers_available(timeout: float = 1.0) -> bool:
    """True if a Celery worker is alive: a fresh heartbeat (busy or not), else an answer to a ping."""
    return bool(workers_seen()) or bool(workers_answering(timeout))


def workers_waiting_text(job: Job, *, timeout: float = 1.0) -> str:
    """What a command waiting for ``job`` can truly say about the workers that may take it: those seen by
    their heartbeat (and whether one takes the job's queue), else those answering a ping, else that none was
    seen, and what to do then."""
    queue = chunk_queue(job)
    seen = workers_seen()
    taking = [w for w in seen if not w.queues or queue in w.queues]
    if taking:
        return f"job {job.pk} is queued on {queue!r} for a Celery worker: {'; '.join(w.text() for w in taking)}"
    answering = workers_answering(timeout)
    if answering:
        return f"job {job.pk} is queued on {queue!r}; Celery workers answering a ping: {', '.join(answering)}"
    others = f" (seen, on other queues: {'; '.join(w.text() for w in seen)})" if seen else ""
    fresh = round(HEARTBEAT_FRESH * heartbeat_seconds())
    return (
        f"job {job.pk} is queued on {queue!r}, and no Celery worker taking it has been seen in the last {fresh} s "
        f"(no heartbeat, no answer to a ping){others}: start one (celery -A config worker -Q {queue}), or, if "
        f"none will run, run the job in this process with manage.py job run-here {job.pk}"
    )


def job_launch(
    *,
    kind: str,
    params: dict[str, Any],
    label: str = "",
    wait: bool = False,
    timeout: float | None = None,
    on_progress: ProgressListener | None = None,
) -> Job:
    """What every ``--wait``-able command does: start the job, and with ``wait`` block until it ends.

    On the embedded default with no worker running (or anywhere with
    ``PARAFORGE_INLINE_WITHOUT_WORKER=1``), ``wait`` runs the chunks in this process instead of
    queueing them for a worker that is not there. Either way ``on_progress`` (``jobs.progress``'s
    display) is called with the job's id as its rows move.
    """
    may_inline = uses_embedded_broker() or settings.PARAFORGE_INLINE_WITHOUT_WORKER
    inline = wait and may_inline and not workers_available()
    job = job_start(kind=kind, params=params, label=label, enqueue=not inline)
    if inline:
        if on_progress is not None:
            on_progress(job.pk)  # before the first chunk reports (a chunk may load a model first)
        return job_run_inline(job_id=job.pk, on_progress=on_progress)
    if wait:
        return job_wait(job_id=job.pk, timeout=timeout, on_progress=on_progress)
    return job


def job_wait(
    *, job_id: int, timeout: float | None = None, poll: float = 0.5, on_progress: ProgressListener | None = None
) -> Job:
    """Block until the job ends, polling its row (and calling ``on_progress`` at each poll)."""
    job = Job.objects.get(pk=job_id)
    if not job.is_terminal:
        print(f"waiting: {workers_waiting_text(job)} ...", file=sys.stderr)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=job_id)
        if on_progress is not None:
            on_progress(job_id)
        if job.is_terminal:
            return job
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not finish within {timeout} s (status {job.status})")
        time.sleep(poll)
