"""Progress of ``--wait`` on stderr: plain lines with counts off a terminal, a tqdm bar on one; stdout keeps
the commands' JSON. Both ways a job runs: inline in the calling process, and in a worker that ``job_wait``
polls (here a stand-in worker runs one chunk between two polls; tests/jobs/test_worker.py has the real one)."""

import io
import json
import os
import pty
import re
import select
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from jobs import execution
from jobs.execution import chunk_run, job_start
from jobs.models import Job, JobChunk, JobStatus
from jobs.progress import PLAIN_EVERY_S, PLAIN_HEARTBEAT_S, JobProgressDisplay, duration, job_counts
from jobs.registry import JobKind, register
from tests.conftest import ROOT, database_url_of_test_db

LINE = re.compile(r"^job (\d+) (\S+) (\w+): (\d+)/(\d+) chunks, ([\d,]+)(?:/([\d,]+))? (\w+)(?: so far)? \((\d+)%\)")


def _halves(job, chunk, progress):
    """Each chunk reports half its units, then all of them."""
    total = chunk.params["units"]
    progress(0, total)
    progress(total // 2, total)
    progress(total, total)
    return {}


register(
    JobKind(
        name="test-progress",
        plan=lambda job: [{"units": u} for u in job.params["units"]],
        run_chunk=_halves,
        finish=lambda job, chunks: {"ok": True},
        unit="widgets",
    )
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def parsed(err: str) -> list[tuple]:
    """(status, chunks done, chunks, units done, units total or None, unit, percent) of each progress line."""
    rows = []
    for line in err.splitlines():
        m = LINE.match(line)
        if m:
            units_total = int(m[7].replace(",", "")) if m[7] else None
            rows.append((m[3], int(m[4]), int(m[5]), int(m[6].replace(",", "")), units_total, m[8], int(m[9])))
    return rows


@pytest.mark.django_db
def test_selftest_wait_inline_prints_plain_lines_per_chunk_and_keeps_stdout_json():
    out, err = io.StringIO(), io.StringIO()
    call_command("selftest", "--wait", "--n", "100", stdout=out, stderr=err)
    result = json.loads(out.getvalue())  # stdout is one JSON document, nothing else
    assert set(result) == {"job", "kind", "status", "chunks", "chunks_done", "fraction", "stage", "error", "result"}
    assert result["status"] == "succeeded" and result["result"]["sum"] == 4950
    rows = parsed(err.getvalue())
    assert "\r" not in err.getvalue()
    assert rows[0][:3] == ("pending", 0, 4)
    # a line as each chunk ends, counts climbing, and a last line when the job has succeeded
    assert [r[1] for r in rows if r[0] == "running"][-4:] == [1, 2, 3, 4]
    assert rows[-1] == ("succeeded", 4, 4, 100, 100, "numbers", 100)
    assert err.getvalue().rstrip().splitlines()[-1].startswith(f"job {result['job']} selftest succeeded: 4/4 chunks")


@pytest.mark.django_db
def test_job_run_here_and_job_wait_with_a_worker_between_polls(monkeypatch):
    job = job_start(kind="test-progress", params={"units": [10, 30, 20]}, enqueue=False)
    out, err = io.StringIO(), io.StringIO()
    call_command("job", "run-here", str(job.pk), stdout=out, stderr=err)
    assert json.loads(out.getvalue())["status"] == "succeeded"
    rows = parsed(err.getvalue())
    assert rows[-1] == ("succeeded", 3, 3, 60, 60, "widgets", 100)
    assert any(r[1] == 1 and r[3] >= 10 for r in rows[:-1])  # seen part-way, from the chunks' own reports

    # a worker elsewhere: ``job wait`` polls the rows; between two polls the stand-in worker runs a chunk
    other = job_start(kind="test-progress", params={"units": [4, 4, 4, 4]}, enqueue=False)
    pending = list(JobChunk.objects.filter(job=other).order_by("index").values_list("pk", flat=True))

    def worker_step(_seconds):
        if pending:
            if chunk_run(chunk_id=pending.pop(0)):
                execution.job_finish(job_id=other.pk)

    monkeypatch.setattr(execution, "workers_available", lambda timeout=1.0: True)
    monkeypatch.setattr(execution.time, "sleep", worker_step)
    out, err = io.StringIO(), io.StringIO()
    call_command("job", "wait", str(other.pk), stdout=out, stderr=err)
    assert json.loads(out.getvalue())["status"] == "succeeded"
    rows = parsed(err.getvalue())
    assert [r[1] for r in rows] == [0, 1, 2, 3, 4]  # the last chunk and the finish came in one step
    assert rows[0][0] == "pending" and rows[-1] == ("succeeded", 4, 4, 16, 16, "widgets", 100)
    assert "chunks, 4 widgets so far" in err.getvalue()  # units of chunks not yet started are not known


@pytest.mark.django_db
def test_a_failed_job_says_so_on_stderr_and_the_command_exits_non_zero():
    job = job_start(kind="test-progress", params={"units": [5, 5]}, enqueue=False)
    JobChunk.objects.filter(job=job, index=1).update(params={})  # KeyError in chunk 1
    err = io.StringIO()
    with pytest.raises(CommandError, match="ended failed"):
        call_command("job", "run-here", str(job.pk), stdout=io.StringIO(), stderr=err)
    assert parsed(err.getvalue())[-1][:3] == ("failed", 1, 2)


@pytest.mark.django_db
def test_plain_lines_come_at_chunk_ends_moves_after_an_interval_and_as_a_heartbeat():
    job = job_start(kind="test-progress", params={"units": [100, 100]}, enqueue=False)
    clock, err = Clock(), io.StringIO()
    show = JobProgressDisplay(err, clock=clock)
    assert not show.terminal
    chunk = job.chunks.get(index=0)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)

    def at(seconds, done):
        clock.now += seconds
        JobChunk.objects.filter(pk=chunk.pk).update(done_units=done, total_units=100)
        show(job.pk)

    show(job.pk)
    at(1, 10)  # moved, but too soon after the last line: nothing
    at(PLAIN_EVERY_S, 20)  # moved and the interval passed: a line, with a rate and the time left
    at(PLAIN_EVERY_S, 20)  # nothing moved: nothing
    at(PLAIN_HEARTBEAT_S, 20)  # a heartbeat even so
    lines = err.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert "0/2 chunks, 20 widgets so far (10%)" in lines[1]
    rate = 20 / (1 + PLAIN_EVERY_S)
    assert f"{rate:,.1f} widgets/s" in lines[1]
    left = (1 + PLAIN_EVERY_S) * (1 - 0.1) / 0.1
    assert f"~{duration(left)} left" in lines[1]
    assert "0/2 chunks, 20 widgets so far (10%)" in lines[2]
    assert f", {20 / (1 + 2 * PLAIN_EVERY_S + PLAIN_HEARTBEAT_S):,.1f} widgets/s" in lines[2]
    counts = job_counts(job.pk)
    assert (counts.chunks, counts.chunks_done, counts.units_done, counts.units_known) == (2, 0, 20, False)


@pytest.mark.django_db
def test_on_a_terminal_a_bar_with_counts_rate_and_time_left():
    out, err = io.StringIO(), Terminal()
    call_command("selftest", "--wait", "--n", "200", stdout=out, stderr=err)
    job = json.loads(out.getvalue())["job"]
    screen = err.getvalue()
    assert "\r" in screen  # redrawn in place
    frames = [f for f in screen.split("\r") if f.strip()]
    assert any(
        re.search(rf"job {job} selftest:\s+50%\|.*\| \[\d\d:\d\d<\d\d:\d\d, 2/4 chunks, 100 numbers so far", f)
        for f in frames
    ), frames
    assert re.search(
        rf"job {job} selftest: 100%\|#+\| \[\d\d:\d\d<\d\d:\d\d, 4/4 chunks, 200/200 numbers, "
        r"[\d,.]+ numbers/s\]",
        screen,
    )
    assert screen.endswith(f"job {job} selftest succeeded: 4/4 chunks, 200/200 numbers (100%) in 0s\n")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_terminal_gets_the_bar_and_a_pipe_gets_plain_lines():
    """``manage.py selftest --wait`` in a subprocess: stderr on a pseudo-terminal, stdout a pipe."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=database_url_of_test_db(),
        PARAFORGE_VAR_DIR=str(settings.VAR_DIR),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        PARAFORGE_INLINE_WITHOUT_WORKER="1",
        COLUMNS="100",
    )
    command = [sys.executable, "manage.py", "selftest", "--wait", "--n", "1000"]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    screen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        screen += data
    stdout, _ = proc.communicate(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, screen.decode(errors="replace")
    assert json.loads(stdout)["status"] == "succeeded"
    text = screen.decode()
    assert "\r" in text and re.search(r"selftest: 100%\|.+\| \[.+4/4 chunks, 1,000/1,000 numbers", text), text
    assert "selftest succeeded: 4/4 chunks" in text

    piped = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["status"] == "succeeded"
    assert "\r" not in piped.stderr and parsed(piped.stderr)[-1][:3] == ("succeeded", 4, 4)


def test_durations():
    assert [duration(s) for s in (0, 59.4, 61, 3599, 3600, 7 * 3600 + 5 * 60)] == [
        "0s",
        "59s",
        "1m01s",
        "59m59s",
        "1h00m",
        "7h05m",
    ]


@pytest.mark.django_db
def test_score_resource_wait_shows_pairs_per_shard_and_keeps_its_json(storage_dir, monkeypatch):
    from tests.scoring.resource_data import OverlapScorer, build_resource, make_regressor

    make_regressor("overlap")
    build_resource()  # 3 shards of 8, 6 and 4 pairs
    monkeypatch.setattr("scoring.regressor.regressor_load", lambda name: OverlapScorer())
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "score_resource", "res", "--regressor", "overlap", "--wait", "--batch-size", "2", stdout=out, stderr=err
    )
    result = json.loads(out.getvalue())
    assert set(result) == {"job", "status", "resource", "regressor", "scored_resource", "n_pairs", "n_skipped"}
    assert result["status"] == "succeeded" and result["n_pairs"] == 18
    rows = parsed(err.getvalue())
    assert {r[5] for r in rows} == {"pairs"}
    assert [r[1] for r in rows if r[0] == "running"][-3:] == [1, 2, 3]
    assert ("running", 1, 3, 8, None, "pairs") in {r[:6] for r in rows}  # the first shard's 8 pairs, others unknown
    assert rows[-1] == ("succeeded", 3, 3, 18, 18, "pairs", 100)


@pytest.mark.django_db
def test_build_idf_wait_shows_sentences_per_shard(tmp_path, storage_dir):
    from tests.generation.test_idf import SENTENCES, _corpus

    _corpus(tmp_path, shard_size=2)
    out, err = io.StringIO(), io.StringIO()
    call_command("build_idf", "tiny", "--wait", stdout=out, stderr=err)
    result = json.loads(out.getvalue())
    assert set(result) == {"job", "status", "corpus", "idf_table", "name", "documents", "types"}
    shards = -(-len(SENTENCES) // 2)
    assert parsed(err.getvalue())[-1] == ("succeeded", shards, shards, len(SENTENCES), len(SENTENCES), "sentences", 100)
