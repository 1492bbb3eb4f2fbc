"""A command waiting for a job says only what is known about the workers (issue 37): a worker seen by its
heartbeat is there even when it is too busy to answer a ping (the quick start's solo-pool worker running a
chunk), and the advice to run the job here is given only when no worker was seen at all."""

from __future__ import annotations

import datetime as dt
import io
import time

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs import execution
from jobs.execution import job_launch, job_start, job_wait
from jobs.heartbeat import HeartbeatThread, heartbeat_write, workers_seen
from jobs.models import JobChunk, JobStatus, WorkerHeartbeat
from tests.conftest import CeleryWorker


def _no_ping_answer(monkeypatch) -> None:
    """A solo-pool worker busy with a chunk does not answer a broadcast ping."""
    monkeypatch.setattr(execution, "workers_answering", lambda timeout=1.0: [])


def _beat(node: str, *, seconds_ago: float, queues=("cpu", "gpu")) -> None:
    heartbeat_write(node, queues, started_at=timezone.now())
    WorkerHeartbeat.objects.filter(node=node).update(seen_at=timezone.now() - dt.timedelta(seconds=seconds_ago))


@pytest.mark.django_db
def test_a_fresh_heartbeat_is_a_live_worker_and_an_old_one_is_not(settings):
    settings.JOBS_HEARTBEAT_S = 10
    _beat("busy@host", seconds_ago=4)
    _beat("gone@host", seconds_ago=31)  # three beats missed: killed
    _beat("gpu@host", seconds_ago=1, queues=("gpu",))
    assert [w.node for w in workers_seen()] == ["gpu@host", "busy@host"]
    assert [w.node for w in workers_seen(queue="cpu")] == ["busy@host"]
    assert workers_seen(queue="cpu")[0].text() == "busy@host (cpu, gpu), seen 4 s ago"


@pytest.mark.django_db
def test_waiting_for_a_job_that_a_busy_worker_will_take_names_that_worker_and_gives_no_run_here_advice(
    monkeypatch, settings
):
    settings.JOBS_HEARTBEAT_S = 10
    _no_ping_answer(monkeypatch)
    _beat("demo@host", seconds_ago=2)
    job = job_start(kind="selftest", params={"n": 10, "chunks": 1}, enqueue=False)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with pytest.raises(TimeoutError):
        job_wait(job_id=job.pk, timeout=0.01, poll=0.01)
    said = err.getvalue()
    assert f"job {job.pk} is queued on 'cpu' for a Celery worker: demo@host (cpu, gpu), seen 2 s ago" in said
    assert "none is running" not in said and "run-here" not in said  # following it would run the job twice


@pytest.mark.django_db
def test_with_no_heartbeat_and_no_ping_answer_it_says_none_was_seen_and_how_to_go_on(monkeypatch, settings):
    settings.JOBS_HEARTBEAT_S = 10
    _no_ping_answer(monkeypatch)
    _beat("gone@host", seconds_ago=60)
    _beat("gpu-only@host", seconds_ago=1, queues=("gpu",))
    job = job_start(kind="selftest", params={"n": 10, "chunks": 1}, enqueue=False)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with pytest.raises(TimeoutError):
        job_wait(job_id=job.pk, timeout=0.01, poll=0.01)
    said = err.getvalue()
    assert "no Celery worker taking it has been seen in the last 30 s (no heartbeat, no answer to a ping)" in said
    assert "seen, on other queues: gpu-only@host (gpu)" in said and "gone@host" not in said
    assert f"manage.py job run-here {job.pk}" in said


@pytest.mark.django_db
def test_wait_on_the_embedded_broker_queues_the_job_for_a_busy_worker_instead_of_running_it_here(
    monkeypatch, settings, sent, django_capture_on_commit_callbacks
):
    settings.JOBS_HEARTBEAT_S = 10
    _no_ping_answer(monkeypatch)
    _beat("demo@host", seconds_ago=1)
    monkeypatch.setattr(execution, "job_wait", lambda job_id, **_: execution.Job.objects.get(pk=job_id))
    with django_capture_on_commit_callbacks(execute=True):
        job = job_launch(kind="selftest", params={"n": 10, "chunks": 2}, wait=True)
    assert job.status == JobStatus.PENDING  # left to the worker, not run in this process
    assert len(sent) == 2


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_beats_while_the_process_is_busy_and_its_row_goes_when_it_stops(settings):
    settings.JOBS_HEARTBEAT_S = 0.2
    beating = HeartbeatThread("w@host", ["cpu"]).start()
    try:
        first = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = WorkerHeartbeat.objects.filter(node="w@host").first()
            if row is not None and first is None:
                first = row.seen_at
            elif row is not None and row.seen_at > first:
                break
            time.sleep(0.1)  # stands for a chunk that keeps the worker busy
        else:
            pytest.fail("no second heartbeat within 10 s")
        assert [w.node for w in workers_seen(queue="cpu")] == ["w@host"]
    finally:
        beating.stop()
    assert not WorkerHeartbeat.objects.filter(node="w@host").exists()


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_busy_with_a_chunk_is_seen_by_score_resource_style_waits(settings, capsys):
    """The quick start's case: a solo-pool worker runs a long chunk and cannot answer a ping; a second command
    waiting for its own job is told the worker is there, not that none is running."""
    worker = CeleryWorker("heartbeat", JOBS_HEARTBEAT_S="0.5").wait_ready()
    try:
        busy = job_start(kind="selftest", params={"n": 10, "chunks": 1, "seconds_per_chunk": 8})
        deadline = time.monotonic() + 30
        while not JobChunk.objects.filter(job=busy, status=JobStatus.RUNNING).exists():
            assert time.monotonic() < deadline, "the worker did not start the chunk"
            time.sleep(0.2)
        assert execution.workers_answering(timeout=1.0) == []  # busy: no answer to a ping
        queued = job_start(kind="selftest", params={"n": 10, "chunks": 1})
        err = io.StringIO()
        call_command("job", "wait", str(queued.pk), stdout=io.StringIO(), stderr=err)
        said = capsys.readouterr().err + err.getvalue()
        assert f"for a Celery worker: {worker.node}@" in said and "none is running" not in said
        assert "run-here" not in said
        assert JobChunk.objects.get(job=queued).ran_on.endswith(f":{worker.pid}")  # the worker took it
    finally:
        worker.stop()
    assert not WorkerHeartbeat.objects.filter(node__startswith=worker.node).exists()  # gone when it stopped
