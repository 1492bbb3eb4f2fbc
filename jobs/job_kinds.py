"""``selftest``: a job that exercises the whole pipeline (broker, workers, database) and nothing else.

Operators run ``manage.py selftest --wait`` after adding a worker; the tests use it to prove that a real
worker process takes chunks from the real broker.
"""

import os
import socket
import time

from .models import Job, JobChunk
from .registry import JobKind, ProgressFn, register


def _plan(job: Job) -> list[dict]:
    n, chunks = int(job.params.get("n", 1000)), int(job.params.get("chunks", 4))
    step = -(-n // chunks)
    return [{"start": s, "stop": min(n, s + step)} for s in range(0, n, step)]


MAX_SECONDS_PER_CHUNK = 120.0


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    start, stop = chunk.params["start"], chunk.params["stop"]
    progress(0, stop - start)
    # ``seconds_per_chunk``: how long each chunk takes (a worker killed mid-chunk, in the tests)
    end = time.monotonic() + min(MAX_SECONDS_PER_CHUNK, float(job.params.get("seconds_per_chunk", 0)))
    while time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        progress(0, stop - start)
    return {"sum": sum(range(start, stop)), "host": socket.gethostname(), "pid": os.getpid()}


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    return {"sum": sum(c.result["sum"] for c in chunks), "pids": sorted({c.result["pid"] for c in chunks})}


register(JobKind(name="selftest", plan=_plan, run_chunk=_run_chunk, finish=_finish, unit="numbers"))
register(JobKind(name="selftest-gpu", plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="gpu", unit="numbers"))
