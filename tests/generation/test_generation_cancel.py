"""Issue 46: a generation job cancelled while a batch decodes, in a real Celery worker (the solo pool: one chunk
at a time). The decoder's stop check ends the chunk inside the batch -- a batch that would sample for minutes
-- as cancelled, with nothing written, and the worker then takes the next job."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key
from generation.models import ResourceShard
from infra.storage import get_storage
from jobs.execution import job_cancel, job_start, job_wait
from jobs.models import JobChunk, JobStatus

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.usefixtures("one_torch_thread_per_worker"),
]

DEMO_MODEL = str(Path(__file__).resolve().parents[2] / "generation" / "demo" / "model")
SENTENCES = ["The committee approved the new budget on Monday.", "A man is playing a guitar."]
# One input per batch of 10 x 50 rows sampled nearly uniformly from the top 1,000 tokens: few rows meet EOS,
# so a batch runs to max_length, some 250 steps of 500 rows (a minute or more on one CPU thread).
LONG_BATCH = {
    "diverse": True,
    "negative_sets": 10,
    "samples": 50,
    "top_k": 1000,
    "temperature": 100.0,
    "max_length": 256,
    "batch_size": 1,
    "keep": 3,
    "clusters": 5,
    "device": "cpu",
}


def _wait_for(condition, what: str, timeout: float) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds (a bound, not a timing)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_job_cancelled_mid_batch_ends_in_the_batch_and_frees_the_worker(celery_worker_process, tmp_path):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="cancel-gen", path=path, format="mono"))
    job = job_start(kind=KIND, params={"corpus": corpus.pk, "model": DEMO_MODEL, **LONG_BATCH})
    assert job.total_chunks == 1

    def decoding() -> bool:  # the chunk reported its start (0 of 2): the model is loaded, the first batch begins
        chunk = JobChunk.objects.get(job=job)
        assert chunk.status in (JobStatus.PENDING, JobStatus.RUNNING), (chunk.status, chunk.error)
        return chunk.status == JobStatus.RUNNING and chunk.total_units == len(SENTENCES)

    _wait_for(decoding, "the worker never started decoding the chunk", 180)
    job_cancel(job_id=job.pk)
    _wait_for(
        lambda: JobChunk.objects.get(job=job).status != JobStatus.RUNNING, "the chunk went on after the cancel", 60
    )
    chunk = JobChunk.objects.get(job=job)
    assert chunk.status == JobStatus.CANCELLED, (chunk.status, chunk.error)
    assert chunk.done_units == 0  # its first batch never came to an end: the cancel stopped it inside
    assert not get_storage().exists(candidate_shard_key(job.pk, 0)) and not ResourceShard.objects.exists()

    following = job_wait(job_id=job_start(kind="selftest", params={"n": 100, "chunks": 1}).pk, timeout=120)
    assert following.status == JobStatus.SUCCEEDED, following.error
    assert following.result["pids"] == [celery_worker_process.pid]  # the same worker, free again
