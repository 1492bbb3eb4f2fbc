"""Claim: corpus import streams, so peak memory stays flat as the file grows (10M lines = 100k lines).

Generates N-line bitext files (``source<TAB>reference``, seeded random words) in a temporary folder,
imports each with ``manage.py import_corpus`` semantics in a fresh child process (its own var/ folder:
SQLite, local storage) and prints, per size, lines/second and the child's peak RSS (``ru_maxrss`` from
``wait4``), then the ratio peak RSS(largest)/peak RSS(smallest): flat memory means a ratio near 1.

    .venv/bin/python bench/import_memory.py                      # 100k and 2M lines
    .venv/bin/python bench/import_memory.py --sizes 100000 10000000
    .venv/bin/python bench/import_memory.py --sizes 20000 200000 --gzip
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "the a of to and in is was for on that with as by at from it an be this are have has had not "
    "paraphrase sentence model corpus beam search constraint token reference source system judgment "
    "annotator slider worker batch shard release score regression lexical diversity bleu"
).split()


def make_file(path: Path, n: int, *, gz: bool, seed: int = 13) -> None:
    rng = random.Random(seed)
    opener = (
        (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=1))
        if gz
        else (lambda p: open(p, "w", encoding="utf-8"))
    )
    with opener(path) as fh:
        for i in range(n):
            src = " ".join(rng.choices(WORDS, k=rng.randint(4, 30)))
            ref = " ".join(rng.choices(WORDS, k=rng.randint(4, 30)))
            fh.write(f"{src} {i}\t{ref} {i}.\n")


def child(name: str, path: str) -> None:
    """Runs in the child: import the file and print the elapsed seconds and the summary as JSON."""
    import io

    import django

    django.setup()
    from django.core.management import call_command

    out = io.StringIO()
    start = time.perf_counter()
    call_command("import_corpus", name, path, "--format", "bitext", stdout=out)
    elapsed = time.perf_counter() - start
    print(json.dumps({"seconds": elapsed, "summary": json.loads(out.getvalue())}))


def measure(var_dir: Path, name: str, path: Path) -> tuple[dict, int]:
    """Run the child and return (its JSON, its peak RSS in KiB) using wait4 on exactly that process."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.base", PARAFORGE_VAR_DIR=str(var_dir))
    for var in ("DATABASE_URL", "CELERY_BROKER_URL", "PARAFORGE_STORAGE_URL"):
        env.pop(var, None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )
    out_file = var_dir / "child.out"
    err_file = var_dir / "child.err"
    with open(out_file, "w") as out, open(err_file, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", name, str(path)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"import of {path} failed:\n{err_file.read_text()[-3000:]}")
    return json.loads(out_file.read_text().strip().splitlines()[-1]), usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 2_000_000])
    parser.add_argument("--gzip", action="store_true", help="gzip the generated files")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        child(*args.child)
        return
    sizes = sorted(args.sizes)
    rows = []
    with tempfile.TemporaryDirectory(prefix="paraforge-bench-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"bitext-{n}.tsv{'.gz' if args.gzip else ''}"
            t0 = time.perf_counter()
            make_file(path, n, gz=args.gzip)
            gen_s = time.perf_counter() - t0
            var_dir = Path(tmp) / f"var-{n}"
            var_dir.mkdir()
            result, rss_kib = measure(var_dir, f"bench-{n}", path)
            assert result["summary"]["references"] == n, result
            rows.append((n, result["seconds"], rss_kib))
            print(
                f"{n:>11,} lines  file {path.stat().st_size / 2**20:8.1f} MiB (made in {gen_s:5.1f} s)  "
                f"import {result['seconds']:7.1f} s  {n / result['seconds']:>10,.0f} lines/s  "
                f"peak RSS {rss_kib / 1024:7.1f} MiB  shards {result['summary']['shards']}",
                flush=True,
            )
            path.unlink()
    if len(rows) > 1:
        (n0, _, r0), (n1, _, r1) = rows[0], rows[-1]
        print(
            f"peak RSS ratio {n1:,} / {n0:,} lines: {r1 / r0:.3f}  (flat memory: near 1; "
            f"file size ratio {n1 / n0:.0f}x)"
        )


if __name__ == "__main__":
    main()
