import pytest

from jobs.execution import chunk_run, job_cancel, job_finish, job_progress, job_resume, job_run_inline, job_start
from jobs.models import Job, JobStatus
from jobs.registry import JobKind, register

pytestmark = pytest.mark.django_db

CALLS: list[int] = []


def _plan(job):
    return [{"i": i} for i in range(job.params["chunks"])]


def _run(job, chunk, progress):
    CALLS.append(chunk.index)
    if chunk.index in job.params.get("fail", []) and not job.params.get("healed"):
        raise ValueError(f"bad input in chunk {chunk.index}")
    progress(1, 1)
    return {"value": chunk.index * 10}


def _finish(job, chunks):
    return {"total": sum(c.result["value"] for c in chunks)}


register(JobKind(name="test-kind", plan=_plan, run_chunk=_run, finish=_finish))


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


def test_inline_run_finishes_with_combined_result():
    job = job_start(kind="test-kind", params={"chunks": 3}, enqueue=False)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED
    assert job.result == {"total": 30}
    assert job_progress(job)["fraction"] == 1.0


def test_a_redelivered_chunk_does_nothing():
    job = job_start(kind="test-kind", params={"chunks": 2}, enqueue=False)
    first = job.chunks.get(index=0)
    chunk_run(chunk_id=first.pk)
    chunk_run(chunk_id=first.pk)
    assert CALLS == [0]


def test_failure_marks_job_failed_with_the_chunk_and_reason_and_resume_reruns_only_unfinished():
    job = job_start(kind="test-kind", params={"chunks": 3, "fail": [1]}, enqueue=False)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.FAILED
    assert "chunk 1" in job.error and "bad input" in job.error
    Job.objects.filter(pk=job.pk).update(params={"chunks": 3, "fail": [1], "healed": True})
    CALLS.clear()
    job_resume(job_id=job.pk)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED
    assert sorted(CALLS) == [1, 2]  # chunk 0 had succeeded and is not run again
    assert job.result == {"total": 30}


def test_finish_twice_is_harmless_and_cancel_stops_pending_chunks():
    job = job_start(kind="test-kind", params={"chunks": 2}, enqueue=False)
    job_run_inline(job_id=job.pk)
    assert job_finish(job_id=job.pk).result == {"total": 10}
    other = job_start(kind="test-kind", params={"chunks": 2}, enqueue=False)
    job_cancel(job_id=other.pk)
    CALLS.clear()
    for chunk in other.chunks.all():
        chunk_run(chunk_id=chunk.pk)
    assert CALLS == []
    assert Job.objects.get(pk=other.pk).status == JobStatus.CANCELLED


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(LookupError, match="unknown job kind 'nope'"):
        job_start(kind="nope", params={})
