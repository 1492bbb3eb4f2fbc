"""A worker lost whole (SIGKILL: a preempted or crashed machine) does not stall its job until the broker's
visibility timeout: its chunk's lease runs out and the beat's check (``chunks_requeue_lost``) sends the chunk
again, another worker runs it, and the job finishes by itself with every output once (issue 31)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
from django.utils import timezone

from jobs.execution import chunks_requeue_lost, job_run_inline, job_start
from jobs.models import Job, JobChunk, JobStatus
from tests.conftest import CeleryWorker


@pytest.mark.django_db(transaction=True)
def test_a_running_chunk_keeps_its_lease_fresh_while_it_works(settings):
    settings.JOBS_CHUNK_LEASE_S = 1  # renewed every third of a second
    job = job_start(kind="selftest", params={"n": 10, "chunks": 1, "seconds_per_chunk": 2.5}, enqueue=False)
    seen = []

    def look(_job_id: int) -> None:
        chunk = JobChunk.objects.get(job=job)
        if chunk.status == JobStatus.RUNNING:
            seen.append(chunk.lease_expires_at - timezone.now())

    assert job_run_inline(job_id=job.pk, on_progress=look).status == JobStatus.SUCCEEDED
    assert len(seen) >= 4 and min(seen) > dt.timedelta(0)  # never past its lease while the chunk ran 2.5 s
    assert chunks_requeue_lost(now=timezone.now() + dt.timedelta(hours=1)) == []  # done: not lost


@pytest.mark.django_db(transaction=True)
def test_only_running_chunks_of_live_jobs_whose_lease_ran_out_are_queued_again():
    now = timezone.now()
    job = job_start(kind="selftest", params={"n": 40, "chunks": 4}, enqueue=False)
    lost, alive, done, _pending = job.chunks.order_by("index")
    JobChunk.objects.filter(pk=lost.pk).update(status=JobStatus.RUNNING, lease_expires_at=now - dt.timedelta(seconds=1))
    JobChunk.objects.filter(pk=alive.pk).update(
        status=JobStatus.RUNNING, lease_expires_at=now + dt.timedelta(minutes=1)
    )
    JobChunk.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, lease_expires_at=None)
    cancelled = job_start(kind="selftest", params={"n": 10, "chunks": 1}, enqueue=False)
    JobChunk.objects.filter(job=cancelled).update(
        status=JobStatus.RUNNING, lease_expires_at=now - dt.timedelta(hours=1)
    )
    Job.objects.filter(pk=cancelled.pk).update(status=JobStatus.CANCELLED)

    assert chunks_requeue_lost(now=now) == [lost.pk]
    assert JobChunk.objects.get(pk=lost.pk).status == JobStatus.PENDING
    assert chunks_requeue_lost(now=now) == []  # taken back once


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_chunk_loses_no_time_and_no_output():
    lease = {"JOBS_CHUNK_LEASE_S": "3"}
    victim, survivor = CeleryWorker("victim", **lease), CeleryWorker("survivor", **lease)
    try:
        victim.wait_ready()
        survivor.wait_ready()
        job = job_start(kind="selftest", params={"n": 1000, "chunks": 2, "seconds_per_chunk": 5})
        deadline = time.monotonic() + 60
        while True:  # each worker inside one chunk
            holders = {c.ran_on.rsplit(":", 1)[-1] for c in job.chunks.all() if c.status == JobStatus.RUNNING}
            if holders == {str(victim.pid), str(survivor.pid)}:
                break
            assert time.monotonic() < deadline, list(job.chunks.values("status", "ran_on"))
            time.sleep(0.1)
        killed = job.chunks.get(ran_on__endswith=f":{victim.pid}")
        os.kill(victim.pid, signal.SIGKILL)
        victim.proc.wait(timeout=10)

        deadline = time.monotonic() + 90  # minutes at most, not the broker's hours
        requeued = []
        while not Job.objects.get(pk=job.pk).is_terminal:
            requeued += chunks_requeue_lost()  # what the beat does every JOBS_LEASE_CHECK_S
            assert time.monotonic() < deadline, list(job.chunks.values("status", "ran_on", "lease_expires_at"))
            time.sleep(0.5)
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED, job.error
        assert requeued == [killed.pk]
        assert job.result["sum"] == sum(range(1000))  # each chunk's output counted once
        killed.refresh_from_db()
        assert killed.attempts == 2 and killed.ran_on.endswith(f":{survivor.pid}")
    finally:
        victim.stop()
        survivor.stop()
