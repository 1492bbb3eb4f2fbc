"""Load: HIT page views and assignment submissions on gunicorn + PostgreSQL, all on loopback.

    .venv/bin/python bench/load.py [--seconds 30] [--rate 200] [--concurrency 32] [--hits 1200]
        [--gunicorn-workers 3] [--threads 4] [--pg-url postgres://postgres@127.0.0.1:5432/postgres] [--keep-db]

Creates a throwaway database ``paraforge_load`` on the local PostgreSQL (dropped at the end), migrates
it, builds a campaign and a published HIT batch through the ORM and ``hit_batch_create`` (an
``mturk-sandbox`` batch marked published without calling MTurk: the page and the API do not care how it
got published), starts gunicorn with the production settings on 127.0.0.1, and runs, each bounded in
time (``--seconds``, at most 60):

0. baseline: ``GET /static/frontend/hit.css`` (WhiteNoise, same server) at ``--rate`` requests/second;
1. page views: ``GET /hits/<id>/?assignmentId=&hitId=&workerId=&turkSubmitTo=`` at ``--rate`` req/s,
   a different worker each time; every page must carry its submission token;
2. submissions: ``--concurrency`` distinct workers at once ``POST /api/hits/<id>/assignments/``; each
   HIT gets one attempt more than its assignments (all are stored, unverified: until MTurk confirms a
   worker, only MTurk caps its own assignments) and a share of the acknowledged submissions is sent
   again (must answer 200, nothing duplicated).

The generator is this process (asyncio, HTTP/1.1 keep-alive) and only ever connects to 127.0.0.1.
Page views and the baseline are open-loop (a request every 1/rate s whatever the server does); their
latency counts from when the request was due, so a slow server cannot hide behind a slow generator.
It prints requests/second and p50/p95/p99 latency per scenario, ratios to the baseline, the target
(page views: p95 < 100 ms at 200 req/s, no error) and then checks the database: it must hold exactly
the judgments acknowledged with 201 (none lost, none duplicated), and no HIT more assignments than it
allows. Exits non-zero if a check fails.

Over 600 lines on purpose: a script that must run standalone (``python bench/load.py``, no app imports it), which
sets up its database and server, generates the load and checks the result in one run, each part only for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"  # the only address this script ever sends traffic to
DB_NAME = "paraforge_load"
MAX_SECONDS = 60
TURK_SUBMIT_TO = "https://workersandbox.mturk.com"
TOKEN_RE = re.compile(rb'<meta name="submission-token" content="([^"]+)"')


# --- HTTP/1.1 client on loopback ----------------------------------------------------------------------


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    async def request(
        self, method: str, path: str, port: int, body: bytes = b"", content_type: str = ""
    ) -> tuple[int, bytes, bool]:
        """(status, body, keep_alive)."""
        head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{port}", "Connection: keep-alive"]
        if body or method == "POST":
            head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await self.writer.drain()
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            data = b"".join(c[:-2] for c in chunks)
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, data, headers.get("connection", "").lower() != "close"

    def close(self) -> None:
        self.writer.close()


class Pool:
    """Keep-alive connections to 127.0.0.1:port, at most ``size`` open at once."""

    def __init__(self, port: int, size: int):
        self.port, self.size, self.open = port, size, 0
        self.idle: asyncio.Queue[Connection] = asyncio.Queue()

    async def request(self, method: str, path: str, body: bytes = b"", content_type: str = "") -> tuple[int, bytes]:
        conn = None
        if not self.idle.empty() or self.open >= self.size:
            conn = await self.idle.get()
        else:
            self.open += 1
            try:
                conn = await Connection.open(self.port)
            except BaseException:
                self.open -= 1
                raise
        try:
            status, data, keep = await conn.request(method, path, self.port, body, content_type)
        except BaseException:
            conn.close()
            self.open -= 1
            raise
        if keep:
            self.idle.put_nowait(conn)
        else:
            conn.close()
            self.open -= 1
        return status, data

    async def close(self) -> None:
        while not self.idle.empty():
            self.idle.get_nowait().close()


@dataclass
class Result:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    sent: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds during the scenario

    def cpu_ms_per_request(self, part: str) -> float:
        return 1000 * self.cpu.get(part, 0.0) / max(1, len(self.latencies_ms))

    def add(self, status: int, latency_ms: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.latencies_ms.append(latency_ms)

    def pct(self, q: float) -> float:
        data = sorted(self.latencies_ms)
        if not data:
            return float("nan")
        return data[min(len(data) - 1, max(0, int(round(q / 100 * len(data) + 0.5)) - 1))]

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.elapsed_s if self.elapsed_s else 0.0

    def row(self) -> str:
        codes = " ".join(f"{k}:{v}" for k, v in sorted(self.statuses.items()))
        return (
            f"{self.name:<24} {len(self.latencies_ms):>7} {self.rps:>9.1f} {self.pct(50):>8.1f} "
            f"{self.pct(95):>8.1f} {self.pct(99):>8.1f} {len(self.errors):>6} "
            f"{self.cpu_ms_per_request('app'):>6.2f} {self.cpu_ms_per_request('db'):>6.2f} "
            f"{self.cpu_ms_per_request('generator'):>6.2f}  {codes}"
        )


async def open_loop(pool: Pool, name: str, paths: list[str], rate: float, seconds: float, check=None) -> Result:
    """GET ``paths`` (cycled) at ``rate`` per second for ``seconds``; latency counted from the due time."""
    result = Result(name)
    n = int(rate * seconds)
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.05
    tasks = []

    async def one(i: int, due: float) -> None:
        path = paths[i % len(paths)]
        try:
            status, body = await asyncio.wait_for(pool.request("GET", path), timeout=30)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            result.errors.append(f"{path}: {exc!r}")
            return
        result.add(status, (loop.time() - due) * 1000)
        problem = check(status, body) if check else None
        if problem:
            result.errors.append(f"{path}: {problem}")

    for i in range(n):
        due = t0 + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, due)))
        result.sent += 1
    await asyncio.gather(*tasks)
    result.elapsed_s = loop.time() - t0
    return result


@dataclass
class Submission:
    hit_id: int
    assignment_id: str
    worker_id: str
    body: bytes
    judgments: list[dict]


async def closed_loop_submissions(
    pool: Pool, plan: list[Submission], concurrency: int, seconds: float, replay_share: float, rng: random.Random
) -> tuple[Result, dict]:
    """``concurrency`` workers take submissions off ``plan`` until it is empty or time is up."""
    result = Result("submit (POST)")
    outcome: dict[str, dict] = {}  # assignment_id -> {"first": status, "replays": [status, ...]}
    queue: asyncio.Queue[tuple[Submission, bool]] = asyncio.Queue()
    replays: asyncio.Queue[tuple[Submission, bool]] = asyncio.Queue()  # taken first, so they happen under load
    for sub in plan:
        queue.put_nowait((sub, False))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    deadline = t0 + seconds

    async def worker() -> None:
        while loop.time() < deadline:
            try:
                sub, replay = replays.get_nowait() if not replays.empty() else queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            start = loop.time()
            result.sent += 1
            try:
                status, body = await asyncio.wait_for(
                    pool.request("POST", f"/api/hits/{sub.hit_id}/assignments/", sub.body, "application/json"),
                    timeout=30,
                )
            except Exception as exc:  # noqa: BLE001 - an unknown outcome: reported, checked against the DB
                result.errors.append(f"{sub.assignment_id}: {exc!r}")
                outcome.setdefault(sub.assignment_id, {"first": None, "replays": [], "sub": sub})
                continue
            result.add(status, (loop.time() - start) * 1000)
            if status >= 500:
                result.errors.append(f"{sub.assignment_id}: HTTP {status} {body[:200]!r}")
            record = outcome.setdefault(sub.assignment_id, {"first": None, "replays": [], "sub": sub})
            if replay:
                record["replays"].append(status)
            else:
                record["first"] = status
                record["response"] = body
                if status == 201 and rng.random() < replay_share:
                    replays.put_nowait((sub, True))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.elapsed_s = loop.time() - t0
    return result, outcome


# --- the server side: database, data, gunicorn -------------------------------------------------------


def pg_admin(pg_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql)


def database_url(pg_url: str, name: str) -> str:
    parts = urlsplit(pg_url)
    if parts.hostname not in (HOST, "localhost"):
        raise SystemExit(f"--pg-url must point at {HOST}: this benchmark runs on loopback only")
    return parts._replace(path="/" + name).geturl()


def server_env(tmp: Path, db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PARAFORGE_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS=HOST,
        DJANGO_SECURE_SSL_REDIRECT="0",  # plain HTTP on loopback; production sits behind a TLS proxy
        DATABASE_URL=db_url,
        DATABASE_CONN_MAX_AGE="60",
        PARAFORGE_VAR_DIR=str(tmp / "var"),
        DJANGO_STATIC_ROOT=str(tmp / "static"),
        CELERY_BROKER_URL="filesystem://localhost/",
        LOG_LEVEL="WARNING",
        # every simulated worker comes from 127.0.0.1: the per-address limit would only measure itself
        # (both limits are still counted, in the database, on every submission)
        ANNOTATION_SUBMISSION_IP_RATE="1000000/min",
        # ... and so would the caps on new assignment ids a HIT page admits (per address, per HIT); every
        # view is still counted against them and recorded, as in production
        ANNOTATION_HIT_VIEW_ADDRESS_RATE="1000000/h",
        ANNOTATION_HIT_VIEW_SPARE="1000000",
    )
    return env


def manage(env: dict[str, str], *argv: str) -> None:
    subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def build_data(n_hits: int, seed: int) -> list[dict]:
    """A campaign whose references have 5 candidates each, and a published batch of about n_hits HITs."""
    from annotation.batches.making import hit_batch_create
    from annotation.batches.params import BatchParams
    from annotation.models import Batch, BatchStatus, Campaign, Candidate, CandidateSystem, Hit, Reference

    campaign = Campaign.objects.create(name=f"load {seed}")
    buckets = (5, 10, 20, 40)
    per_bucket = max(1, n_hits // len(buckets))
    refs = Reference.objects.bulk_create(
        [
            Reference(
                campaign=campaign,
                ref_id=f"{b}-{i}",
                length_bucket=b,
                text=f"Reference {i} of length bucket {b} says what the <b>paper</b> said.",
            )
            for b in buckets
            for i in range(per_bucket)
        ]
    )
    cands = Candidate.objects.bulk_create(
        [
            Candidate(reference=r, text=f'Paraphrase {c} of {r.ref_id}: a candidate & its "quotes".')
            for r in refs
            for c in range(5)
        ],
        batch_size=2000,
    )
    CandidateSystem.objects.bulk_create(
        [CandidateSystem(candidate=c, system=str(1 + k % 5)) for k, c in enumerate(cands)], batch_size=2000
    )
    batch = hit_batch_create(
        campaign=campaign,
        params=BatchParams(
            provider="mturk-sandbox", per_length=per_bucket, assignments=3, attention_rate=0.1, seed=seed
        ),
    )
    Batch.objects.filter(pk=batch.pk).update(status=BatchStatus.PUBLISHED)
    hits = []
    for hit in Hit.objects.filter(batch=batch).prefetch_related("items").order_by("id"):
        items = sorted(hit.items.all(), key=lambda it: it.position)
        hits.append(
            {
                "id": hit.pk,
                "max_assignments": hit.max_assignments,
                "items": [(it.candidate_id, it.is_attention_check) for it in items],
            }
        )
    return hits


def submission_plan(hits: list[dict], rng: random.Random) -> list[Submission]:
    """Each HIT: max_assignments + 1 distinct workers (one more than MTurk would let in); shuffled."""
    from annotation.hits.tokens import item_key, submission_token_make

    plan = []
    for hit in hits:
        for k in range(hit["max_assignments"] + 1):
            assignment_id, worker_id = f"LA{hit['id']}x{k}", f"LW{hit['id']}x{k}"
            judgments = []
            for candidate, attention in hit["items"]:
                fluency = 2 if attention else rng.choice((0, 1, 2))
                score = 100 if attention else (None if fluency == 0 else rng.randint(0, 100))
                judgments.append({"candidate": candidate, "score": score, "fluency": fluency})
            token = submission_token_make(hit_id=hit["id"], assignment_id=assignment_id, worker_id=worker_id)
            sent = [
                {
                    "item": item_key(hit_id=hit["id"], candidate_id=j["candidate"]),
                    "score": j["score"],
                    "fluency": j["fluency"],
                }
                for j in judgments
            ]  # the page names sentences by their keys
            body = json.dumps(
                {
                    "assignment_id": assignment_id,
                    "worker_id": worker_id,
                    "token": token,
                    "judgments": sent,
                    "comment": "",
                }
            ).encode()
            plan.append(Submission(hit["id"], assignment_id, worker_id, body, judgments))
    rng.shuffle(plan)
    return plan


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command name) of every process."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                head, rest = (entry / "stat").read_text().rsplit(")", 1)
                found.append((int(entry.name), int(rest.split()[1]), head.split("(", 1)[1]))
            except (OSError, IndexError, ValueError):
                continue
    return found


def cpu_snapshot(server_pid: int) -> dict[str, dict[int, float]]:
    """CPU seconds used so far, per process, by gunicorn (master and workers), PostgreSQL and this generator."""
    procs = _processes()
    app = [server_pid] + [pid for pid, ppid, _ in procs if ppid == server_pid]
    db = [pid for pid, _, name in procs if name.startswith("postgres")]
    own = os.times()
    return {
        "app": {pid: _cpu_seconds(pid) for pid in app},
        "db": {pid: _cpu_seconds(pid) for pid in db},
        "generator": {0: own.user + own.system},
    }


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds between two snapshots (processes still there at the end; PostgreSQL backends of other
    clients that ended in between are left out rather than counted negative)."""
    return {part: sum(max(0.0, cpu - before[part].get(pid, 0.0)) for pid, cpu in after[part].items()) for part in after}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_gunicorn(env: dict[str, str], port: int, workers: int, threads: int, log: Path) -> subprocess.Popen:
    gunicorn = Path(sys.executable).with_name("gunicorn")
    return subprocess.Popen(
        [
            str(gunicorn),
            "config.wsgi:application",
            "--bind",
            f"{HOST}:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--keep-alive",
            "30",
            "--error-logfile",
            str(log),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


async def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    pool = Pool(port, 1)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SystemExit("gunicorn exited while starting (see its error log)")
        try:
            status, _ = await pool.request("GET", "/healthz")
            if status == 200:
                await pool.close()
                return
        except OSError:
            pool = Pool(port, 1)
        if time.monotonic() > deadline:
            raise SystemExit("gunicorn did not answer /healthz in time")
        await asyncio.sleep(0.3)


# --- checks -------------------------------------------------------------------------------------------


def page_check(status: int, body: bytes) -> str | None:
    if status != 200:
        return f"HTTP {status}"
    match = TOKEN_RE.search(body)
    if not match:
        return "the page carries no submission token"
    return None


def database_check(hits: list[dict], outcome: dict[str, dict]) -> tuple[list[str], dict]:
    """Acknowledged (201) submissions are all stored, exactly once, with the judgments sent."""
    from django.db import connections
    from django.db.models import Count, F, Q

    from annotation.models import Assignment, Hit, Judgment

    connections.close_all()
    hit_ids = [h["id"] for h in hits]
    stored = {a.external_assignment_id: a for a in Assignment.objects.filter(hit_id__in=hit_ids)}
    stored_judgments: dict[int, list[tuple]] = {}
    for j in Judgment.objects.filter(assignment__hit_id__in=hit_ids).order_by("id"):
        stored_judgments.setdefault(j.assignment_id, []).append((j.candidate_id, j.score, j.fluency))
    acknowledged = {a for a, r in outcome.items() if r["first"] == 201}
    unknown = {a for a, r in outcome.items() if r["first"] is None}
    problems = []
    lost = acknowledged - set(stored)
    if lost:
        problems.append(f"{len(lost)} acknowledged assignments missing from the database, e.g. {sorted(lost)[:3]}")
    unexpected = set(stored) - acknowledged - unknown
    if unexpected:
        problems.append(
            f"{len(unexpected)} stored assignments that were never acknowledged, e.g. {sorted(unexpected)[:3]}"
        )
    wrong = []
    for assignment_id in acknowledged & set(stored):
        sent = sorted((j["candidate"], j["score"], j["fluency"]) for j in outcome[assignment_id]["sub"].judgments)
        if sorted(stored_judgments.get(stored[assignment_id].pk, [])) != sent:
            wrong.append(assignment_id)
    if wrong:
        problems.append(
            f"{len(wrong)} assignments whose stored judgments differ from what was sent (lost or duplicated)"
        )
    verified = Count("assignments", filter=Q(assignments__verification="verified"))
    over = Hit.objects.filter(pk__in=hit_ids).annotate(n=verified).filter(n__gt=F("max_assignments")).count()
    if over:
        problems.append(f"{over} HITs hold more verified assignments than they allow")
    bad_replays = [a for a, r in outcome.items() if r["first"] == 201 and any(s != 200 for s in r["replays"])]
    if bad_replays:
        problems.append(f"{len(bad_replays)} replays of acknowledged submissions did not answer 200")
    expected_judgments = sum(len(outcome[a]["sub"].judgments) for a in acknowledged)
    figures = {
        "acknowledged_201": len(acknowledged),
        "replayed_200": sum(r["replays"].count(200) for r in outcome.values()),
        "refused_409": sum(1 for r in outcome.values() if r["first"] == 409),
        "unknown_outcome": len(unknown),
        "stored_assignments": len(stored),
        "stored_judgments": sum(len(v) for v in stored_judgments.values()),
        "expected_judgments": expected_judgments,
    }
    if figures["stored_judgments"] != expected_judgments and not unknown:
        problems.append(f"{figures['stored_judgments']} judgments stored, {expected_judgments} acknowledged")
    return problems, figures


# --- main ---------------------------------------------------------------------------------------------


async def measured(server_pid: int, scenario) -> Result | tuple:
    before = cpu_snapshot(server_pid)
    out = await scenario
    after = cpu_snapshot(server_pid)
    result = out[0] if isinstance(out, tuple) else out
    result.cpu = cpu_used(before, after)
    return out


async def run_load(
    port: int, server_pid: int, hits: list[dict], plan: list[Submission], a: argparse.Namespace, rng: random.Random
) -> tuple[list[Result], dict]:
    pool = Pool(port, a.connections)
    page_paths = []
    for i in range(int(a.rate * a.seconds)):
        hit = hits[i % len(hits)]["id"]
        page_paths.append(
            f"/hits/{hit}/?assignmentId=PA{i}&hitId={hit}&workerId=PW{i}&turkSubmitTo={quote(TURK_SUBMIT_TO, safe='')}"
        )
    # warm every gunicorn worker (imports, templates, connections) before measuring
    await open_loop(pool, "warm-up", page_paths[:200] + ["/static/frontend/hit.css"] * 50, min(a.rate, 100), 2.5)
    results = [
        await measured(
            server_pid,
            open_loop(
                pool,
                "static baseline (GET)",
                ["/static/frontend/hit.css"],
                a.rate,
                a.baseline_seconds,
                check=lambda s, b: None if s == 200 else f"HTTP {s}",
            ),
        )
    ]
    results.append(
        await measured(server_pid, open_loop(pool, "HIT page (GET)", page_paths, a.rate, a.seconds, check=page_check))
    )
    await pool.close()
    submit_pool = Pool(port, a.concurrency)
    submitted, outcome = await measured(
        server_pid, closed_loop_submissions(submit_pool, plan, a.concurrency, a.seconds, a.replay_share, rng)
    )
    await submit_pool.close()
    results.append(submitted)
    return results, outcome


def _cpu(result: Result) -> float:
    return max(1e-9, result.cpu_ms_per_request("app") + result.cpu_ms_per_request("db"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30, help=f"load per scenario (at most {MAX_SECONDS})")
    p.add_argument("--baseline-seconds", type=float, default=10)
    p.add_argument("--rate", type=float, default=200, help="page views (and baseline) per second")
    p.add_argument("--connections", type=int, default=64, help="keep-alive connections of the open-loop generator")
    p.add_argument("--concurrency", type=int, default=32, help="workers submitting at once")
    p.add_argument("--replay-share", type=float, default=0.1, help="share of acknowledged submissions sent again")
    p.add_argument("--hits", type=int, default=300, help="about this many HITs (x4 planned submissions)")
    p.add_argument("--gunicorn-workers", type=int, default=3)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-db", action="store_true", help="leave the database paraforge_load behind")
    a = p.parse_args(argv)
    if not 0 < a.seconds <= MAX_SECONDS or not 0 < a.baseline_seconds <= MAX_SECONDS:
        p.error(f"--seconds and --baseline-seconds must be in (0, {MAX_SECONDS}]")
    rng = random.Random(a.seed)
    db_url = database_url(a.pg_url, DB_NAME)
    tmp = Path(tempfile.mkdtemp(prefix="paraforge-load-"))
    env = server_env(tmp, db_url)
    pg_admin(a.pg_url, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    pg_admin(a.pg_url, f'CREATE DATABASE "{DB_NAME}"')
    server = None
    try:
        t = time.monotonic()
        manage(env, "migrate", "--noinput")
        manage(env, "collectstatic", "--noinput")
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        hits = build_data(a.hits, a.seed)
        plan = submission_plan(hits, rng)
        from django.db import connections

        connections.close_all()
        print(
            f"setup: {len(hits)} HITs, {len(plan)} planned submissions, {time.monotonic() - t:.1f} s "
            f"(database {DB_NAME} on {HOST}:5432)"
        )
        port = free_port()
        server = start_gunicorn(env, port, a.gunicorn_workers, a.threads, tmp / "gunicorn.log")
        asyncio.run(wait_ready(port, server))
        print(
            f"gunicorn: {a.gunicorn_workers} workers x {a.threads} threads on {HOST}:{port}; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the run"
        )
        results, outcome = asyncio.run(run_load(port, server.pid, hits, plan, a, rng))
        problems, figures = database_check(hits, outcome)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may not be set up yet
            pass
        if not a.keep_db:
            pg_admin(a.pg_url, f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')

    print()
    print(f"{'':<24} {'':>7} {'':>9} {'':>8} {'':>8} {'':>8} {'':>6} {'CPU ms per request':>20}")
    print(
        f"{'scenario':<24} {'requests':>7} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>6} "
        f"{'app':>6} {'db':>6} {'gen':>6}  statuses"
    )
    for r in results:
        print(r.row())
    base, page, post = results
    print()
    print(
        f"page view / static baseline: p50 x{page.pct(50) / base.pct(50):.1f}, "
        f"p95 x{page.pct(95) / base.pct(95):.1f}, "
        f"p99 x{page.pct(99) / base.pct(99):.1f}; achieved {page.rps:.0f} of {a.rate:.0f} req/s asked"
    )
    print(
        f"submissions: {post.rps:.0f} req/s with {a.concurrency} workers at once; "
        f"p95 x{post.pct(95) / base.pct(95):.1f} the baseline's"
    )
    print(
        f"server CPU per request (app + db): page x{_cpu(page) / _cpu(base):.1f}, "
        f"submission x{_cpu(post) / _cpu(base):.1f} the static file's; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} after the run (other processes share them)"
    )
    print("database: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    for r in results:
        for e in r.errors[:5]:
            print(f"  error ({r.name}): {e}")
    page_ok = page.pct(95) < 100 and not page.errors and page.rps >= 0.95 * a.rate
    print()
    print(
        f"target page views p95 < 100 ms at {a.rate:.0f} req/s, no error: {'MET' if page_ok else 'NOT MET'} "
        f"(p95 {page.pct(95):.1f} ms, {len(page.errors)} errors)"
    )
    print(
        f"submissions: {'no error' if not post.errors else f'{len(post.errors)} errors'}; database check: "
        f"{'exactly the acknowledged judgments (none lost, none duplicated)' if not problems else 'FAILED'}"
    )
    for problem in problems:
        print(f"  {problem}")
    return 0 if (not problems and not post.errors and not page.errors and not base.errors) else 1


if __name__ == "__main__":
    sys.exit(main())
