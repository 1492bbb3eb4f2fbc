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
import time

from demo_corpus import DEMO_MODEL, corpus_import, demo_sentences, throwaway_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=240)
    parser.add_argument("--shard-size", type=int, default=20)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--systems", default="1,18")
    parser.add_argument("--beam", type=int, default=4)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]

    var = throwaway_django(
        "paraforge-bench-workers-",
        OMP_NUM_THREADS="1",  # one torch thread per worker: N workers use N cores
        PARAFORGE_INLINE_WITHOUT_WORKER="0",
    )
    from django.core.management import call_command

    from jobs.execution import job_wait, workers_available
    from jobs.models import Job
    from jobs.worker_process import worker_start, workers_stop, workers_wait_ready

    sentences = demo_sentences(args.sentences)
    corpus_import(var, sentences, shard_size=args.shard_size)

    print(
        f"corpus: {len(sentences)} sentences in chunks of {args.shard_size}; systems {args.systems}; beam "
        f"{args.beam}; demo model; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the runs"
    )
    rows = []
    for n in counts:
        workers = {
            node: worker_start(node, env=os.environ, log_level="WARNING")
            for node in (f"bench{k}-{os.getpid()}" for k in range(n))
        }
        try:
            try:
                workers_wait_ready(workers, timeout=120)
            except RuntimeError as error:
                raise SystemExit(str(error)) from None
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
            workers_stop(workers.values(), timeout=30)

    base = rows[0][3]
    print(f"\n{'workers':>8} {'chunks':>7} {'seconds':>8} {'refs/s':>8} {'x one':>6} {'ran on':>7}")
    for n, chunks, seconds, rate, hosts in rows:
        print(f"{n:>8} {chunks:>7} {seconds:>8.1f} {rate:>8.2f} {rate / base:>6.2f} {hosts:>7}")
    print(f"\nload average {os.getloadavg()[0]:.2f} after the runs")


if __name__ == "__main__":
    main()
