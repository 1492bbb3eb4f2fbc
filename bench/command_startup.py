"""How long a management command takes before it prints its help, an argument error or a lookup error, and
``paraphrase`` of two sentences (issue 37, item 5).

Each case runs ``manage.py`` in a fresh process (as a user's shell does) on its own SQLite database and
embedded broker in a temporary ``var/`` (migrated once, not timed), ``--repeat`` times, interleaved; the
median wall time and the median CPU time (user + system, of the process and its children: what a busy shared
machine inflates least) are printed with their ratios to the baseline measured in the same run, a bare
``python -c 'import django'``, and the numerical or model libraries the case had imported (from a second,
untimed run that prints ``sys.modules``), with the exit statuses seen (0: help, 2: an argument error, 1: a lookup
error).

    .venv/bin/python bench/command_startup.py [--root DIR] [--compare DIR] [--repeat 5] [--threads N]
        [--skip-paraphrase]

``--root`` runs the commands of another checkout of the code with this interpreter. ``--compare DIR`` runs every
case on that checkout too (e.g. the code before a change: ``git worktree add /tmp/pf-before HEAD``), interleaved
with ``--root``'s, and prints the after/before ratios. ``--threads`` sets ``OMP_NUM_THREADS`` and friends for
the children (unset: what the machine gives).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The numerical and model libraries that a command's help, argument error or lookup error must not import
# (tests/test_command_imports.py: none of them). This bench prints which a case imported, celery too.
HEAVY = (
    "numpy",
    "scipy",
    "sklearn",
    "torch",
    "transformers",
    "sentence_transformers",
    "sacrebleu",
    "spacy",
    "pandas",
    "pyarrow",
    "matplotlib",
    "joblib",
)
REPORTED = (*HEAVY, "celery")
LOADED = "LOADED "  # the mark of the probe's line on stderr


def probe_source(modules: tuple[str, ...] = HEAVY) -> str:
    """``python -c`` source that runs ``manage.py`` with its own ``sys.argv[1:]`` and, as it exits (whatever the
    exit status), writes on stderr a line ``LOADED a,b`` naming which of ``modules`` are in ``sys.modules``."""
    return (
        "import atexit, os, sys\n"
        f"heavy = {modules!r}\n"
        f"atexit.register(lambda: os.write(2, ('\\n{LOADED}' + ','.join(m for m in heavy if m in sys.modules) + '\\n')"
        ".encode()))\n"
        "sys.argv = ['manage.py'] + sys.argv[1:]\n"
        "import runpy; runpy.run_path('manage.py', run_name='__main__')\n"
    )


def loaded_by_probe(stderr: str) -> str | None:
    """The modules a probe's run said it had loaded, comma-separated ("" for none); None when it said nothing."""
    marks = [line for line in stderr.splitlines() if line.startswith(LOADED)]
    return marks[-1][len(LOADED) :] if marks else None


TWO_SENTENCES = "A man is playing a guitar on the stage.\nThe children were walking to school in the rain.\n"


def cases(work: Path, skip_paraphrase: bool) -> list[tuple[str, list[str]]]:
    """(label, manage.py arguments); an empty list is the baseline."""
    out = [
        ("baseline: python -c 'import django'", []),
        ("manage.py help", ["help"]),
        ("manage.py train_regressor --help", ["train_regressor", "--help"]),
        ("manage.py paraphrase --help", ["paraphrase", "--help"]),
        ("argument error: train_regressor (no args)", ["train_regressor"]),
        ("argument error: score_resource (no --regressor)", ["score_resource", "demo"]),
        ("lookup error: train_regressor nosuch --name x", ["train_regressor", "nosuch", "--name", "x"]),
        ("lookup error: score_resource nosuch --regressor r", ["score_resource", "nosuch", "--regressor", "r"]),
        ("lookup error: export_release nosuch --out d", ["export_release", "nosuch", "--out", str(work / "rel")]),
    ]
    if not skip_paraphrase:
        out.append(
            (
                "paraphrase of two sentences (demo model, beam 4)",
                [
                    "paraphrase",
                    "--model",
                    "generation/demo/model",
                    "--input",
                    str(work / "two.txt"),
                    "--output",
                    str(work / "two.jsonl"),
                    "--beam",
                    "4",
                ],
            )
        )
    return out


def run(root: Path, args: list[str], env: dict[str, str], probe: bool = False) -> tuple[float, float, str, int]:
    """(wall seconds, CPU seconds, stderr, exit status) of one fresh process."""
    if not args:
        argv = [sys.executable, "-c", "import django"]
    elif probe:
        argv = [sys.executable, "-c", probe_source(REPORTED), *args]
    else:
        argv = [sys.executable, "manage.py", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, done.stderr, done.returncode


def loaded_modules(root: Path, args: list[str], env: dict[str, str]) -> str:
    if not args:
        return "-"
    _, _, err, _ = run(root, args, env, probe=True)
    loaded = loaded_by_probe(err)
    return "?" if loaded is None else loaded or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--compare", type=Path, default=None, help="another checkout: the code before")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--skip-paraphrase", action="store_true")
    opts = parser.parse_args()
    roots = {"after": opts.root.resolve()}
    if opts.compare:
        roots = {"before": opts.compare.resolve(), **roots}
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    (work / "two.txt").write_text(TWO_SENTENCES)
    envs = {}
    for which, root in roots.items():
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
        env.update(PARAFORGE_VAR_DIR=str(work / f"var-{which}"), HF_HUB_OFFLINE="1")
        env["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
        if opts.threads:
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                env[name] = str(opts.threads)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
        envs[which] = env
    todo = cases(work, opts.skip_paraphrase)
    wall = {(w, label): [] for w in roots for label, _ in todo}
    cpu = {(w, label): [] for w in roots for label, _ in todo}
    status: dict[tuple[str, str], set[int]] = {(w, label): set() for w in roots for label, _ in todo}
    for _ in range(opts.repeat):
        for label, args in todo:  # interleaved: a busy moment of the machine spreads over every case and tree
            for which, root in roots.items():
                w, c, _, code = run(root, args, envs[which])
                status[which, label].add(code)
                wall[which, label].append(w)
                cpu[which, label].append(c)
    load = os.getloadavg()[0]
    print(
        f"# python {sys.version.split()[0]}; {os.cpu_count()} CPUs; load average {load:.1f} at the end; "
        f"median of {opts.repeat} runs; " + "; ".join(f"{w}: {r}" for w, r in roots.items())
    )
    for which, root in roots.items():
        base_wall = statistics.median(wall[which, todo[0][0]])
        base_cpu = statistics.median(cpu[which, todo[0][0]])
        print(f"\n## {which} ({root})")
        head = f"{'case':52s} {'wall s':>8s} {'x base':>7s} {'cpu s':>7s} {'x base':>7s} {'exit':>4s}"
        print(f"{head}  heavy modules loaded")
        for label, args in todo:
            mw, mc = statistics.median(wall[which, label]), statistics.median(cpu[which, label])
            heavy = loaded_modules(root, args, envs[which])
            codes = ",".join(map(str, sorted(status[which, label])))
            print(f"{label:52s} {mw:8.2f} {mw / base_wall:7.1f} {mc:7.2f} {mc / base_cpu:7.1f} {codes:>4s}  {heavy}")
    if opts.compare:
        print("\n## after / before (medians; < 1 is faster)")
        print(f"{'case':52s} {'wall':>7s} {'cpu':>7s}")
        for label, _ in todo:
            rw = statistics.median(wall["after", label]) / statistics.median(wall["before", label])
            rc = statistics.median(cpu["after", label]) / statistics.median(cpu["before", label])
            print(f"{label:52s} {rw:7.2f} {rc:7.2f}")


if __name__ == "__main__":
    main()
