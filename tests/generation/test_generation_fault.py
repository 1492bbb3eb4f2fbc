"""Issue 6's fault: a Celery worker killed (SIGKILL) in the middle of a generation chunk. After
``job_resume`` a fresh worker completes the job, and every output is there exactly once."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key
from generation.models import IdfTable, ResourceShard
from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from jobs.execution import job_resume, job_start, job_wait
from jobs.models import JobChunk, JobStatus
from tests.conftest import CeleryWorker

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.usefixtures("one_torch_thread_per_worker"),
]

SENTENCES = [
    "the cat sat on the mat",
    "a dog runs in the house",
    "she walked to the car",
    "they talk about the big tree",
    "the red sun was in the sky",
    "he ran with the small dog",
    "we walk in the green world",
    "how often do earthquakes occur today",
]
SYSTEMS = [28, 34]


def _corpus(tmp_path):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="fault-gen", path=path, format="mono", shard_size=4))
    key = f"idf/fault-gen-{corpus.pk}.tsv"
    words = sorted({w for s in SENTENCES for w in s.split()})
    with get_storage().open_write(key) as fh:
        fh.write(("token\tidf\n" + "".join(f"{w}\t{7.0 + 0.5 * len(w)}\n" for w in words)).encode())
    IdfTable.objects.create(corpus=corpus, name="fault-gen", key=key, n_documents=len(SENTENCES), n_types=len(words))
    return corpus


DEMO_MODEL = str(Path(__file__).resolve().parents[2] / "generation" / "demo" / "model")
DIVERSE = {"diverse": True, "negative_sets": 2, "samples": 4, "keep": 3, "clusters": 5, "seed": 3}


def _kill_worker_inside_chunk_zero(worker, job) -> None:
    """Wait until the worker is inside chunk 0 with some of its references decoded, then SIGKILL it, and check
    that the chunk was left mid-way with nothing half-written."""
    deadline = time.monotonic() + 150
    while True:
        chunk = JobChunk.objects.get(job=job, index=0)
        if chunk.status == JobStatus.RUNNING and chunk.done_units >= 1:
            break
        assert chunk.status in (JobStatus.PENDING, JobStatus.RUNNING), (chunk.status, chunk.error)
        assert time.monotonic() < deadline, "the worker never got into chunk 0"
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    chunk.refresh_from_db()
    assert chunk.status == JobStatus.RUNNING and chunk.done_units < chunk.total_units  # killed mid-chunk
    assert not get_storage().exists(candidate_shard_key(job.pk, 0))


def test_worker_killed_mid_chunk_then_resumed_outputs_exactly_once(celery_worker_process, tiny_marian_dir, tmp_path):
    corpus = _corpus(tmp_path)
    job = job_start(
        kind=KIND,
        params={
            "corpus": corpus.pk,
            "model": str(tiny_marian_dir),
            "systems": SYSTEMS,
            "beam": 2,
            "max_length": 12,
            "batch_size": 1,
            "device": "cpu",
            "pause_per_batch": 0.3,
        },
    )
    assert job.total_chunks == 2

    _kill_worker_inside_chunk_zero(celery_worker_process, job)
    job.refresh_from_db()
    assert not job.is_terminal

    job_resume(job_id=job.pk)
    fresh = CeleryWorker("fresh").wait_ready(timeout=120)  # another worker, like the fixture's (killed above)
    try:
        job = job_wait(job_id=job.pk, timeout=240)
    finally:
        fresh.stop()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert JobChunk.objects.get(job=job, index=0).attempts >= 2

    records = [r for i in (0, 1) for r in read_jsonl_gz(candidate_shard_key(job.pk, i))]
    assert sorted(r["ref_index"] for r in records) == list(range(len(SENTENCES)))  # each reference once
    for record in records:
        produced = [s for c in record["candidates"] for s in c["systems"]]
        expected = [str(s) for s in SYSTEMS if str(s) not in record["no_constraints"]]
        assert sorted(produced, key=int) == expected  # every system's output exactly once (nbest 1)
    shards = ResourceShard.objects.filter(resource__job=job)
    assert sorted(shards.values_list("index", flat=True)) == [0, 1]
    assert job.resource.n_references == len(SENTENCES)
    assert job.resource.n_pairs == sum(len(r["candidates"]) for r in records) == sum(s.n_pairs for s in shards)


def test_diverse_job_worker_killed_mid_chunk_then_resumed_writes_every_rank_once(tmp_path):
    """Issue 39: the same fault for ``generate --diverse``: after the resume each reference's ranks r1..rK are
    written once, in rank order, and equal a run that was never interrupted (the same seed)."""
    corpus = _corpus(tmp_path)
    params = {"corpus": corpus.pk, "model": DEMO_MODEL, "max_length": 24, "batch_size": 1, "device": "cpu", **DIVERSE}
    first = CeleryWorker("first").wait_ready(timeout=120)  # its own: the module's worker was killed above
    job = job_start(kind=KIND, params={**params, "pause_per_batch": 0.3})
    assert job.total_chunks == 2
    _kill_worker_inside_chunk_zero(first.proc, job)

    job_resume(job_id=job.pk)
    fresh = CeleryWorker("fresh").wait_ready(timeout=120)
    try:
        job = job_wait(job_id=job.pk, timeout=300)
        clean = job_wait(job_id=job_start(kind=KIND, params={**params, "name": "clean"}).pk, timeout=300)
    finally:
        fresh.stop()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert clean.status == JobStatus.SUCCEEDED, clean.error
    assert JobChunk.objects.get(job=job, index=0).attempts >= 2

    def records(of):
        return [r for i in (0, 1) for r in read_jsonl_gz(candidate_shard_key(of.pk, i))]

    resumed = records(job)
    assert sorted(r["ref_index"] for r in resumed) == list(range(len(SENTENCES)))  # each reference once
    for record in resumed:
        systems = [s for c in record["candidates"] for s in c["systems"]]
        assert systems == [f"r{k}" for k in range(1, len(systems) + 1)]  # each rank once, in rank order
    assert sum(len(r["candidates"]) for r in resumed) > 0
    assert [r["candidates"] for r in resumed] == [r["candidates"] for r in records(clean)]
    assert job.resource.n_pairs == sum(len(r["candidates"]) for r in resumed)
