"""Claim: exporting a release streams, so peak memory stays flat as the resource grows (10M pairs = 100k).

For each size N (pairs), a fresh child process (its own var/ folder: SQLite, local storage) migrates,
writes a scored resource of N pairs (10 paraphrases per reference, 100k references per shard, in the
scored-shard format of scoring/scored/job.py) and runs ``manage.py export_release`` on it with a
filter set (``len``, ``overlap``, ``rerank=dissimilar``). It prints, per size, export pairs/second, the
Python heap peak of the export alone (tracemalloc, with ``--tracemalloc``; slower) and the child's peak
RSS (``wait4``), then the ratio peak(largest)/peak(smallest): flat memory means a ratio near 1.
``--formats tsv parquet`` runs each size in each release format and adds, per size, the ratio of each
format's time and peak RSS to the first format's (the baseline, measured in the same run).

    .venv/bin/python bench/release_memory.py                        # 20k and 200k pairs
    .venv/bin/python bench/release_memory.py --sizes 100000 10000000
    .venv/bin/python bench/release_memory.py --sizes 20000 200000 --tracemalloc
    .venv/bin/python bench/release_memory.py --sizes 20000 200000 --formats tsv parquet
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORDS = (
    "the a of to and in is was for on that with as by at from it an be this are have has had not "
    "paraphrase sentence model corpus beam search constraint token reference source system judgment "
    "annotator slider worker batch shard release score regression lexical diversity bleu"
).split()
PER_REF = 10
REFS_PER_SHARD = 100_000
FILTERS = "len=3-40,overlap=0.1-0.9,rerank=dissimilar"


def _records(start: int, stop: int, seed: int):
    rng = random.Random(seed)
    for i in range(start, stop):
        ref = rng.choices(WORDS, k=rng.randint(4, 25))
        cands = []
        for j in range(PER_REF):
            para = list(ref)
            for _ in range(rng.randint(1, 4)):
                para[rng.randrange(len(para))] = rng.choice(WORDS)
            cands.append(
                {
                    "text": " ".join(para) + f" {j}.",
                    "nll": round(rng.uniform(1, 20), 3),
                    "systems": [str(rng.randint(1, 37))],
                    "constraints": {},
                    "score": round(rng.uniform(0, 100), 4),
                }
            )
        yield {
            "ref_index": i,
            "reference": " ".join(ref) + ".",
            "source": "",
            "length": len(ref),
            "candidates": cands,
            "no_constraints": [],
        }


def child(n_pairs: int, out_dir: str, trace: bool, fmt: str = "tsv") -> None:
    """Runs in the child: build the scored resource, export it, print JSON."""
    import io

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from generation.models import Corpus, Resource
    from infra.shards import write_jsonl_gz
    from jobs.models import Job, JobStatus
    from scoring.models import Regressor, ScoredResource

    corpus = Corpus.objects.create(name="bench", format="mono", status="ready")
    resource = Resource.objects.create(name="bench", corpus=corpus, settings={"bench": True})
    regressor = Regressor.objects.create(name="bench", key="none", metrics={"spearman_test": 0.7})
    job = Job.objects.create(kind="score_resource", status=JobStatus.SUCCEEDED)
    scored = ScoredResource.objects.create(resource=resource, regressor=regressor, job=job)
    n_refs = max(1, n_pairs // PER_REF)
    shards = []
    for index, start in enumerate(range(0, n_refs, REFS_PER_SHARD)):
        stop = min(n_refs, start + REFS_PER_SHARD)
        info = write_jsonl_gz(f"scored/{scored.pk}/shard-{index:05d}.jsonl.gz", _records(start, stop, seed=index))
        shards.append(
            {"index": index, "key": info["key"], "n_pairs": (stop - start) * PER_REF, "sha256": info["sha256"]}
        )
    scored.shards, scored.n_pairs = shards, n_refs * PER_REF
    scored.save()

    import tracemalloc

    if trace:
        tracemalloc.start()
    out = io.StringIO()
    start = time.perf_counter()
    call_command("export_release", "bench", "--out", out_dir, "--filters", FILTERS, "--format", fmt, stdout=out)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    print(json.dumps({"seconds": elapsed, "heap_peak": peak, "result": json.loads(out.getvalue())}))


def measure(n_pairs: int, trace: bool, fmt: str = "tsv") -> tuple[dict, int]:
    with tempfile.TemporaryDirectory(prefix="release-bench-") as tmp:
        var_dir = Path(tmp)
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.base", PARAFORGE_VAR_DIR=str(var_dir))
        for var in ("DATABASE_URL", "CELERY_BROKER_URL", "PARAFORGE_STORAGE_URL"):
            env.pop(var, None)
        out_file, err_file = var_dir / "child.out", var_dir / "child.err"
        args = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            str(n_pairs),
            str(var_dir / "release"),
            "--formats",
            fmt,
        ]
        with open(out_file, "w") as out, open(err_file, "w") as err:
            proc = subprocess.Popen(
                args + (["--tracemalloc"] if trace else []), cwd=ROOT, env=env, stdout=out, stderr=err
            )
            _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"the export of {n_pairs} pairs failed:\n{err_file.read_text()[-3000:]}")
        return json.loads(out_file.read_text().strip().splitlines()[-1]), usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000], help="pairs per run")
    parser.add_argument("--tracemalloc", action="store_true", help="also measure the export's Python heap peak")
    parser.add_argument(
        "--formats",
        nargs="+",
        default=["tsv"],
        choices=["tsv", "jsonl", "parquet"],
        help="release formats to export (default tsv); the first is the baseline of the ratios",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.tracemalloc, args.formats[0])
        return
    baseline: dict[int, tuple[float, int]] = {}
    for fmt in args.formats:
        rows = []
        for n in sorted(args.sizes):
            result, rss_kib = measure(n, args.tracemalloc, fmt)
            counts = result["result"]["counts"]
            rows.append((n, result, rss_kib))
            heap = f"{result['heap_peak'] / 2**20:7.1f} MiB heap peak, " if result["heap_peak"] is not None else ""
            print(
                f"{fmt:>7} {n:>11,} pairs: exported {counts['pairs']:,} in {result['seconds']:.1f} s "
                f"({counts['pairs_read'] / result['seconds']:,.0f} pairs read/s), {heap}"
                f"{rss_kib / 1024:7.1f} MiB peak RSS",
                flush=True,
            )
            if fmt != args.formats[0]:
                base_seconds, base_rss = baseline[n]
                print(
                    f"{'':>7} {'':>11} vs {args.formats[0]}: {result['seconds'] / base_seconds:.2f}x the time, "
                    f"{rss_kib / base_rss:.2f}x the peak RSS",
                    flush=True,
                )
        if fmt == args.formats[0]:
            baseline = {n: (result["seconds"], rss) for n, result, rss in rows}
        (small, r_small, rss_small), (large, r_large, rss_large) = rows[0], rows[-1]
        print(
            f"{fmt}: peak RSS ratio {large:,} / {small:,} pairs: {rss_large / rss_small:.2f} "
            f"({large / small:.0f}x the pairs)"
        )
        if r_small["heap_peak"]:
            print(
                f"{fmt}: heap peak ratio {large:,} / {small:,} pairs: {r_large['heap_peak'] / r_small['heap_peak']:.2f}"
            )


if __name__ == "__main__":
    main()
