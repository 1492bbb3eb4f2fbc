"""Claim: on a campaign of real size the researcher's dashboard, each of its plots and the admin's worker list
answer in well under a second once a campaign's tables are computed (targets at ParaBank's size: a view
under 300 ms, a plot under 200 ms, the worker list under 500 ms), and a first view after a change stays
within seconds, also at ten times that size.

    .venv/bin/python bench/dashboard.py [--pg-url postgres://postgres@127.0.0.1:5432/postgres] [--sqlite]
        [--cache-url redis://127.0.0.1:6379/0] [--scale 10] [--repeat 5] [--keep-db]

Creates a throwaway database ``paraforge_dashboard`` on the local PostgreSQL (``--sqlite``: a file in a
temporary folder instead), migrates it, imports ParaBank's released judgments with ``import_judgments
--format parabank`` (``--data``; the folder's README says what it holds) and ANALYZEs, as autovacuum would
shortly after a large import. Then, in this process, through Django's test client (the whole middleware
stack, no network), as a superuser:

0. baseline: ``GET /healthz`` (a view that asks the database one ``SELECT 1``);
1. the dashboard ``/research/campaigns/<id>/``: cold (an empty cache: every table computed) and warm;
2. each of its seven plots: first (after the dashboard view: tables cached, the PNG not yet drawn) and warm;
3. the dashboard again after one new judgment (what the first visit after a submission costs: the
   judgments' tables are computed again; diversity, which depends on the candidates only, is not);
4. the admin's worker list ``/admin/annotation/worker/?q=c<pk>:`` (the campaign's imported workers: a page
   of up to 50 with their quality figures).

Then the same on the campaign replicated ``--scale`` times (new references, candidates and workers, the
same judgments), imported as a second campaign. Wall milliseconds are medians (cold: of 2 runs at the first
size, 1 at the larger), with this process's CPU milliseconds beside them (PostgreSQL's time is not in
them), and ratios to the baseline's median measured in the same run. The cache is Django's: the file cache
in the run's temporary folder unless ``--cache-url`` names Redis (each cold run uses a fresh key prefix,
nothing else in that Redis database is touched, and its entries are deleted at the end). The code under
test is the tree the script sits in, so the same script run from an older checkout gives the "before" figures.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/work/shared/data/parabank-eval")
DB_NAME = "paraforge_dashboard"
HOST = "127.0.0.1"
PLOTS = (
    "similarity-diversity",
    "similarity-by-length",
    "fluency-by-length",
    "diversity-by-length",
    "cost-per-batch",
    "reliability",
    "raters",
)
TARGETS_MS = {"dashboard": 300, "plot": 200, "workers": 500}  # at ParaBank's size


def pg_admin(pg_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql)


def database_url(pg_url: str, name: str) -> str:
    parts = urlsplit(pg_url)
    if parts.hostname not in (HOST, "localhost"):
        raise SystemExit(f"--pg-url must point at {HOST}: this benchmark runs on loopback only")
    return parts._replace(path="/" + name).geturl()


def replicate(data: Path, out: Path, times: int) -> tuple[Path, Path]:
    """ParaBank's files ``times`` over: each copy with its own reference ids and worker ids (so new references,
    candidates and workers), the same sentences and judgments."""
    refs, cands = out / "ref.tsv", out / "candidates.tsv"
    ref_head, *ref_lines = (data / "ref.tsv").read_text(encoding="utf-8").splitlines()
    cand_head, *cand_lines = (data / "candidates.tsv").read_text(encoding="utf-8").splitlines()
    ref_out, cand_out = [ref_head], [cand_head]
    for k in range(times):
        for line in ref_lines:
            ref_id, rest = line.split("\t", 1)
            ref_out.append(f"{int(ref_id) + 100_000 * k}\t{rest}")
        for line in cand_lines:
            worker, ref_id, rest = line.split("\t", 2)
            cand_out.append(f"{worker}-{k}\t{int(ref_id) + 100_000 * k}\t{rest}")
    refs.write_text("\n".join(ref_out) + "\n", encoding="utf-8")
    cands.write_text("\n".join(cand_out) + "\n", encoding="utf-8")
    return refs, cands


class Timer:
    def __init__(self, client):
        self.client = client

    def get(self, url: str) -> tuple[float, float]:
        """(wall ms, this process's CPU ms) of one request, which must answer 200."""
        wall, cpu = time.perf_counter(), time.process_time()
        response = self.client.get(url, HTTP_HOST=HOST)
        if response.status_code != 200:
            raise SystemExit(f"GET {url}: {response.status_code}")
        _ = b"".join(response) if response.streaming else response.content  # reading the body is part of it
        return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000

    def median(self, url: str, n: int) -> tuple[float, float]:
        runs = [self.get(url) for _ in range(n)]
        return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


PREFIXES: list[str] = []


def fresh_cache() -> None:
    """An empty cache for this process without emptying the shared one: a new key prefix."""
    from django.core.cache import cache

    cache.key_prefix = f"bench-{secrets.token_hex(6)}"
    PREFIXES.append(cache.key_prefix)


def forget_entries() -> None:
    """Delete what this run stored in Redis (a file cache goes with the temporary folder)."""
    from django.core.cache import cache

    if hasattr(cache, "_cache") and hasattr(cache._cache, "get_client"):  # Django's RedisCache
        client = cache._cache.get_client(write=True)
        for prefix in PREFIXES:
            for key in client.scan_iter(match=f"{prefix}:*"):
                client.delete(key)


def measure(timer: Timer, campaign, label: str, repeat: int, cold_runs: int, baseline: float) -> list[tuple]:
    """The rows of one campaign: (what, wall ms, CPU ms, ratio to the baseline, target ms or None)."""
    from annotation.models import Assignment, Candidate, Judgment, Worker

    base = f"/research/campaigns/{campaign.pk}/"
    rows = []

    def row(what: str, wall_cpu: tuple[float, float], target: int | None = None) -> None:
        rows.append((f"{label}: {what}", wall_cpu[0], wall_cpu[1], wall_cpu[0] / baseline, target))

    colds = []
    for _ in range(cold_runs):
        fresh_cache()
        colds.append(timer.get(base))
    row("dashboard, cold", (statistics.median(c[0] for c in colds), statistics.median(c[1] for c in colds)))
    row("dashboard, warm", timer.median(base, repeat), TARGETS_MS["dashboard"])
    for plot in PLOTS:
        url = f"{base}plots/{plot}.png"
        row(f"plot {plot}, first", timer.get(url))
        row(f"plot {plot}, warm", timer.median(url, repeat), TARGETS_MS["plot"])
    # one judgment more: what the first view after a submission costs (the next are warm again)
    worker = Worker.objects.filter(judgments__candidate__reference__campaign=campaign).first()
    candidate = Candidate.objects.filter(reference__campaign=campaign).exclude(judgments__worker=worker).first()
    assignment = Assignment.objects.create(
        campaign=campaign,
        worker=worker,
        provider=worker.provider,
        external_assignment_id=f"bench-{secrets.token_hex(6)}",
        status="imported",
    )
    Judgment.objects.create(assignment=assignment, candidate=candidate, worker=worker, score=50, fluency=2)
    row("dashboard after one new judgment", timer.get(base))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--sqlite", action="store_true", help="a SQLite file in a temporary folder instead")
    p.add_argument("--cache-url", default=os.environ.get("CACHE_URL", ""), help="redis://... (default: files)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ParaBank's ref.tsv and candidates.tsv")
    p.add_argument("--scale", type=int, default=10, help="the larger campaign: the judgments this many times")
    p.add_argument("--repeat", type=int, default=5, help="warm requests per figure (median)")
    p.add_argument("--keep-db", action="store_true", help=f"leave the database {DB_NAME} (or the SQLite file) behind")
    a = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="paraforge-dashboard-"))
    if a.sqlite:
        db_url = f"sqlite:///{tmp / 'bench.sqlite3'}"
    else:
        db_url = database_url(a.pg_url, DB_NAME)
        pg_admin(a.pg_url, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        pg_admin(a.pg_url, f'CREATE DATABASE "{DB_NAME}"')
    for key in [k for k in os.environ if k.startswith(("DJANGO_", "PARAFORGE_"))]:
        del os.environ[key]
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=db_url,
        PARAFORGE_VAR_DIR=str(tmp / "var"),
        CACHE_URL=a.cache_url,
        CELERY_BROKER_URL="filesystem://localhost/",
        LOG_LEVEL="ERROR",
    )
    sys.path.insert(0, str(ROOT))
    import warnings

    warnings.filterwarnings("ignore", message="No directory at")  # no collectstatic: no static file is asked for
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from annotation.models import Campaign, Candidate, Judgment, Worker

    try:
        t = time.monotonic()
        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_superuser("bench", password=secrets.token_urlsafe(16))
        client = Client()
        client.force_login(user)
        timer = Timer(client)
        sizes = [("1x", a.data / "ref.tsv", a.data / "candidates.tsv", 2)]
        if a.scale > 1:
            big = tmp / "big"
            big.mkdir()
            sizes.append((f"{a.scale}x", *replicate(a.data, big, a.scale), 1))
        backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
        rows, baseline = [], None
        for label, refs, cands, cold_runs in sizes:
            t = time.monotonic()
            with open(os.devnull, "w") as quiet:
                call_command(
                    "import_judgments",
                    str(cands),
                    format="parabank",
                    references=str(refs),
                    campaign=f"parabank-{label}",
                    stdout=quiet,
                )
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE")
            campaign = Campaign.objects.get(name=f"parabank-{label}")
            if baseline is None:
                timer.median("/healthz", 3)  # warm-up: connections, templates, imports
                timer.get(f"/research/campaigns/{campaign.pk}/plots/cost-per-batch.png")
                baseline = timer.median("/healthz", 30)
                print(
                    f"database {connection.vendor}; cache {backend}; {os.cpu_count()} CPUs, load average "
                    f"{os.getloadavg()[0]:.2f} before the run"
                )
                rows.append(("baseline GET /healthz", *baseline, 1.0, None))
            judgments = Judgment.objects.filter(candidate__reference__campaign=campaign).count()
            candidates = Candidate.objects.filter(reference__campaign=campaign).count()
            workers = Worker.objects.filter(judgments__candidate__reference__campaign=campaign).distinct().count()
            print(
                f"campaign {label}: {judgments:,} judgments, {candidates:,} candidates, {workers} workers "
                f"(imported and analysed in {time.monotonic() - t:.1f} s)"
            )
            rows += measure(timer, campaign, label, a.repeat, cold_runs, baseline[0])
            # the admin's list of this campaign's workers (its ids are namespaced c<pk>:): a page of 50 at most
            wall, cpu = timer.median(f"/admin/annotation/worker/?q=c{campaign.pk}:", 3)
            shown = min(workers, 50)
            rows.append(
                (f"{label}: worker list ({shown} of {workers})", wall, cpu, wall / baseline[0], TARGETS_MS["workers"])
            )
        print(f"\n{'request':<52}{'wall ms':>10}{'CPU ms':>9}{'x baseline':>12}  target (at 1x)")
        missed = []
        for what, wall, cpu, ratio, target in rows:
            verdict = ""
            if target is not None:
                verdict = f"< {target} ms: " + ("met" if wall < target else "missed")
                if wall >= target and what.startswith("1x"):
                    missed.append(what)
            print(f"{what:<52}{wall:>10.1f}{cpu:>9.1f}{ratio:>12.1f}  {verdict}".rstrip())
        print(f"\nload average {os.getloadavg()[0]:.2f} after the run (other processes share the CPUs)")
        print("targets at ParaBank's size (1x): " + ("MET" if not missed else f"MISSED: {', '.join(missed)}"))
        return 0 if not missed else 1
    finally:
        forget_entries()
        connection.close()
        if not a.keep_db:
            shutil.rmtree(tmp, ignore_errors=True)
            if not a.sqlite:
                pg_admin(a.pg_url, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


if __name__ == "__main__":
    raise SystemExit(main())
