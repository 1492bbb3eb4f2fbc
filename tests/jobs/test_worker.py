"""A real Celery worker process takes chunks from the real broker (Redis, or the embedded one)."""

import json

import pytest
from django.core.management import call_command

from jobs.execution import job_start, job_wait
from jobs.models import JobStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_worker_runs_cpu_and_gpu_chunks_and_finishes_the_job(celery_worker_process):
    cpu = job_start(kind="selftest", params={"n": 10_000, "chunks": 4})
    gpu = job_start(kind="selftest-gpu", params={"n": 500, "chunks": 2})
    cpu = job_wait(job_id=cpu.pk, timeout=120)
    gpu = job_wait(job_id=gpu.pk, timeout=120)
    assert cpu.status == JobStatus.SUCCEEDED, cpu.error
    assert cpu.result["sum"] == sum(range(10_000))
    assert gpu.result["sum"] == sum(range(500))
    # The chunks ran in the worker process, not in this one.
    assert cpu.result["pids"] == [celery_worker_process.pid]


def test_selftest_command_waits_for_the_worker(celery_worker_process, capsys):
    call_command("selftest", "--wait", "--n", "100", "--timeout", "120")
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["status"] == "succeeded" and out["result"]["sum"] == 4950
    # the worker ran it: stderr still shows the progress, read from the job's rows
    assert captured.err.splitlines()[-1].startswith(f"job {out['job']} selftest succeeded: 4/4 chunks, 100/100 numbers")
