"""Chunk throughput of one ``generate`` job with 1, 2, 4 ... worker processes (CPU, the shipped demo model).

Scaling out is adding workers on the same broker, database and storage; this measures what that buys on
one machine. Each run makes a fresh job over the same corpus (``--sentences`` sentences of the demo corpus in
shards of ``--shard-size``: one chunk a shard), starts N real ``celery worker`` processes (solo pool, one torch
thread each), waits until they answer, then times the job from its start to its end. Throughput is references
decoded per second; the ratio is against one worker, measured in the same run. Everything lives in a throwaway
folder (SQLite and the embedded broker, which need no service); nothing leaves 127.0.0.1.

    .venv/bin/python bench/workers.py [--sentences 240] [--shard-size 20] [--workers 1,2,4] [--systems 1,18]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_CORPUS = ROOT / "generation" / "demo" / "corpus.txt"
DEMO_MODEL = ROOT / "generation" / "demo" / "model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=240)
    parser.add_argument("--shard-size", type=int, default=20)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--systems", default="1,18")
    parser.add_argument("--beam", type=int, default=4)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]

    var = Path(tempfile.mkdtemp(prefix="paraforge-bench-workers-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        PARAFORGE_VAR_DIR=str(var),
        DATABASE_URL="",
        CELERY_BROKER_URL="",
        OMP_NUM_THREADS="1",  # one torch thread per worker: N workers use N cores
        PARAFORGE_INLINE_WITHOUT_WORKER="0",
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from jobs.execution import job_wait, workers_available
    from jobs.models import Job

    call_command("migrate", verbosity=0)
    sentences = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[: args.sentences]
    corpus_file = var / "bench-corpus.txt"
    corpus_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    call_command(
        "import_corpus",
        "bench",
        str(corpus_file),
        "--format",
        "mono",
        "--shard-size",
        str(args.shard_size),
        stdout=open(os.devnull, "w"),
    )
    os.environ["PARAFORGE_INLINE_WITHOUT_WORKER"] = "1"  # the IDF table: in this process, before any worker
    from django.conf import settings

    settings.PARAFORGE_INLINE_WITHOUT_WORKER = True
    call_command("build_idf", "bench", "--wait", stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    settings.PARAFORGE_INLINE_WITHOUT_WORKER = False

    print(
        f"corpus: {len(sentences)} sentences in chunks of {args.shard_size}; systems {args.systems}; beam "
        f"{args.beam}; demo model; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the runs"
    )
    rows = []
    for n in counts:
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "-Q",
                    "cpu,gpu",
                    "-P",
                    "solo",
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"bench{k}-{os.getpid()}@%h",
                    "-l",
                    "WARNING",
                ],
                cwd=ROOT,
                env=dict(os.environ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for k in range(n)
        ]
        try:
            from config.celery import app

            deadline = time.monotonic() + 120
            while len(app.control.ping(timeout=1.0) or []) < n:
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {len(app.control.ping(timeout=1.0) or [])} of {n} workers started")
            assert workers_available()
            started = time.monotonic()
            call_command(
                "generate",
                "bench",
                "--model",
                str(DEMO_MODEL),
                "--systems",
                args.systems,
                "--beam",
                str(args.beam),
                "--device",
                "cpu",
                stdout=open(os.devnull, "w"),
            )
            job = Job.objects.order_by("-id").first()
            job = job_wait(job_id=job.pk, timeout=3600)
            seconds = time.monotonic() - started
            if job.status != "succeeded":
                raise SystemExit(f"job {job.pk} {job.status}: {job.error}")
            ran_on = {c.ran_on for c in job.chunks.all()}
            rows.append((n, job.total_chunks, seconds, len(sentences) / seconds, len(ran_on)))
        finally:
            for proc in workers:
                proc.terminate()
            for proc in workers:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()

    base = rows[0][3]
    print(f"\n{'workers':>8} {'chunks':>7} {'seconds':>8} {'refs/s':>8} {'x one':>6} {'ran on':>7}")
    for n, chunks, seconds, rate, hosts in rows:
        print(f"{n:>8} {chunks:>7} {seconds:>8.1f} {rate:>8.2f} {rate / base:>6.2f} {hosts:>7}")
    print(f"\nload average {os.getloadavg()[0]:.2f} after the runs")


if __name__ == "__main__":
    main()
