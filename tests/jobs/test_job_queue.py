"""A kind whose jobs choose their hardware (``JobKind.queue_for``): each job's chunks go to the queue its params
name, when it starts, when it is resumed and when a lost chunk is sent again; a kind without it keeps its
static ``queue``."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.execution import chunk_queue, chunks_requeue_lost, job_resume, job_start
from jobs.models import JobChunk, JobStatus
from jobs.registry import JobKind, get_kind, register

pytestmark = pytest.mark.django_db


def _plan(job):
    return [{"i": i} for i in range(2)]


def _run(job, chunk, progress):
    return {}


def _finish(job, chunks):
    return {}


register(
    JobKind(
        name="test-chosen-queue",
        plan=_plan,
        run_chunk=_run,
        finish=_finish,
        queue_for=lambda params: "gpu" if params.get("device") == "cuda" else "cpu",
    )
)
register(JobKind(name="test-static-gpu", plan=_plan, run_chunk=_run, finish=_finish, queue="gpu"))


def _started(kind: str, params: dict, capture) -> tuple:
    with capture(execute=True):
        job = job_start(kind=kind, params=params)
    return job, sorted(job.chunks.values_list("pk", flat=True))


def test_each_job_goes_to_the_queue_its_params_choose(sent, django_capture_on_commit_callbacks):
    gpu_job, gpu_chunks = _started("test-chosen-queue", {"device": "cuda"}, django_capture_on_commit_callbacks)
    cpu_job, cpu_chunks = _started("test-chosen-queue", {}, django_capture_on_commit_callbacks)
    assert (chunk_queue(gpu_job), chunk_queue(cpu_job)) == ("gpu", "cpu")
    assert sorted(sent) == sorted(
        [("jobs.tasks.run_chunk_gpu", pk) for pk in gpu_chunks]
        + [("jobs.tasks.run_chunk_cpu", pk) for pk in cpu_chunks]
    )

    sent.clear()  # resumed, and a lost chunk sent again by the beat: still where the job asked
    with django_capture_on_commit_callbacks(execute=True):
        job_resume(job_id=gpu_job.pk)
    assert sorted(sent) == [("jobs.tasks.run_chunk_gpu", pk) for pk in gpu_chunks]
    sent.clear()
    JobChunk.objects.filter(pk=gpu_chunks[0]).update(
        status=JobStatus.RUNNING, lease_expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert chunks_requeue_lost() == [gpu_chunks[0]]
    assert sent == [("jobs.tasks.run_chunk_gpu", gpu_chunks[0])]


def test_a_kind_without_a_choice_keeps_its_static_queue_and_a_bad_choice_is_refused(
    sent, django_capture_on_commit_callbacks
):
    job, chunks = _started("test-static-gpu", {"device": "cpu"}, django_capture_on_commit_callbacks)
    assert chunk_queue(job) == "gpu" and sorted(sent) == [("jobs.tasks.run_chunk_gpu", pk) for pk in chunks]
    assert get_kind("selftest").queue_of({"device": "cuda"}) == "cpu"
    bad = JobKind(name="test-bad-queue", plan=_plan, run_chunk=_run, finish=_finish, queue_for=lambda params: "tpu")
    with pytest.raises(ValueError, match="queue must be 'cpu' or 'gpu', not 'tpu'"):
        bad.queue_of({})
