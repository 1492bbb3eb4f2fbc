"""Submission rate limits (annotation/web/throttles.py, limits/counters.py): the client address comes through
PARAFORGE_TRUSTED_PROXIES trusted proxies only, and the counts are shared by every process, atomically."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from limits.counters import hit, hit_count, purge_expired
from limits.models import Counter
from tests.conftest import ROOT, database_url_of_test_db

from .builders import payload, published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def hit_():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    return published_batch(campaign, attention_rate=0).hits.order_by("id").first()


def post(client, hit, body, **extra):
    return client.post(
        f"/api/hits/{hit.pk}/assignments/", data=json.dumps(body), content_type="application/json", **extra
    )


def trusted_proxies(settings, n: int) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": n}


# --- the client address ------------------------------------------------------------------------------


def test_rotating_x_forwarded_for_does_not_escape_the_worker_limit_without_trusted_proxies(client, hit_, settings):
    # the default configuration: PARAFORGE_TRUSTED_PROXIES unset, so no proxy is trusted
    settings.ANNOTATION_SUBMISSION_RATE = "3/hour"
    statuses = [
        post(client, hit_, payload(hit_), HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code for i in range(1, 8)
    ]
    assert statuses == [201, 200, 200, 429, 429, 429, 429]
    # the limit is on the real address (REMOTE_ADDR): another client with the same worker id goes on
    assert post(client, hit_, payload(hit_), REMOTE_ADDR="192.0.2.50").status_code == 200


def test_with_one_trusted_proxy_the_client_is_the_last_x_forwarded_for_entry(client, hit_, settings):
    trusted_proxies(settings, 1)
    settings.ANNOTATION_SUBMISSION_RATE = "3/hour"
    # the proxy (REMOTE_ADDR 127.0.0.1) appends the address it was reached from; what the client wrote
    # to the left of it does not count
    statuses = [
        post(client, hit_, payload(hit_), HTTP_X_FORWARDED_FOR=f"10.{i}.0.1, 203.0.113.7").status_code
        for i in range(1, 6)
    ]
    assert statuses == [201, 200, 200, 429, 429]
    assert post(client, hit_, payload(hit_), HTTP_X_FORWARDED_FOR="203.0.113.7").status_code == 429
    assert post(client, hit_, payload(hit_), HTTP_X_FORWARDED_FOR="10.1.0.1, 203.0.113.8").status_code == 200
    assert set(Counter.objects.filter(key__startswith="submission-worker:").values_list("key", flat=True)) == {
        "submission-worker:203.0.113.7:W1/3600",
        "submission-worker:203.0.113.8:W1/3600",
    }


# --- the per-address limit and the 429 answer -----------------------------------------------------------


def test_the_per_address_limit_counts_every_worker_from_one_address(client, hit_, settings):
    settings.ANNOTATION_SUBMISSION_RATE = "100/hour"
    settings.ANNOTATION_SUBMISSION_IP_RATE = "3/hour"
    statuses = [
        post(
            client, hit_, payload(hit_, worker_id=f"W{i}", assignment_id=f"A{i}"), REMOTE_ADDR="203.0.113.1"
        ).status_code
        for i in range(1, 6)
    ]
    assert statuses == [201, 201, 201, 429, 429]
    # another address is counted apart
    assert (
        post(client, hit_, payload(hit_, worker_id="W4", assignment_id="A4"), REMOTE_ADDR="203.0.113.2").status_code
        == 201
    )


def test_a_throttled_submission_is_429_json_with_retry_after(client, hit_, settings):
    settings.ANNOTATION_SUBMISSION_RATE = "1/hour"
    assert post(client, hit_, payload(hit_)).status_code == 201
    response = post(client, hit_, payload(hit_))
    assert response.status_code == 429
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == "throttled" and "throttled" in body["detail"]
    assert 3590 <= int(response["Retry-After"]) <= 3600


# --- the counter ------------------------------------------------------------------------------------


def test_a_counter_counts_per_key_and_starts_again_when_its_window_has_ended():
    assert [hit_count("a", 60) for _ in range(3)] == [1, 2, 3]
    assert hit_count("b", 60) == 1
    assert hit_count("a", 3600) == 1  # another window length is another limit
    assert 1 <= hit("a", 60).retry_after <= 60
    Counter.objects.filter(key="a/60").update(resets_at_ms=int(time.time() * 1000) - 1)  # the minute is over
    assert hit_count("a", 60) == 1
    assert hit_count("a", 60) == 2
    Counter.objects.filter(key="b/60").update(resets_at_ms=int(time.time() * 1000) - 1)
    assert purge_expired() == 1
    assert sorted(Counter.objects.values_list("key", flat=True)) == ["a/3600", "a/60"]


def test_a_long_key_is_stored_hashed_and_still_counted_apart():
    base = "submission-worker:203.0.113.1:" + "W" * 300
    assert [hit_count(base + "x", 60), hit_count(base + "x", 60), hit_count(base + "y", 60)] == [1, 2, 1]
    assert all(len(key) <= 255 for key in Counter.objects.values_list("key", flat=True))


# --- across processes -------------------------------------------------------------------------------


def _child_env(**extra: str) -> dict[str, str]:
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=database_url_of_test_db(),
        PARAFORGE_VAR_DIR=str(django_settings.VAR_DIR),
        **extra,
    )


_HAMMER = """
import json, pathlib, sys, time
import django
django.setup()
from limits.counters import hit_count
go, ready, n = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
ready.touch()
while not go.exists():
    time.sleep(0.005)
print(json.dumps([hit_count("race", 3600) for _ in range(n)]))
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_hit_count_is_atomic_across_processes(tmp_path):
    processes, per_process, limit = 4, 40, 50
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _HAMMER, str(go), str(tmp_path / f"ready-{k}"), str(per_process)],
            cwd=ROOT,
            env=_child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(processes)
    ]
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{k}").exists() for k in range(processes)):
            assert all(c.poll() is None for c in children), [c.communicate() for c in children]
            assert time.monotonic() < deadline, "the counting processes did not start"
            time.sleep(0.05)
        go.touch()  # all start counting at once
        outputs = [c.communicate(timeout=120) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    assert [c.returncode for c in children] == [0] * processes, [err for _, err in outputs]
    counts = [n for out, _ in outputs for n in json.loads(out)]
    # every hit got its own count: none lost, none doubled, though four processes wrote at once
    assert sorted(counts) == list(range(1, processes * per_process + 1))
    assert sum(n <= limit for n in counts) == limit  # a limit of 50 admits exactly 50
    assert Counter.objects.get(key="race/3600").n == processes * per_process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post_json(url: str, body: dict) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _get_status(url: str) -> int | None:
    """The status of a GET, None while nothing answers (a worker still booting)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        time.sleep(0.2)
        return None


def _pids_serving(access_log: Path, method: str) -> int:
    """How many gunicorn worker processes the access log shows serving a ``method`` request."""
    if not access_log.exists():
        return 0
    return len({line.split()[0] for line in access_log.read_text().splitlines() if f" {method} " in f" {line} "})


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_submission_limit_holds_across_gunicorn_workers(tmp_path):
    """Three gunicorn worker processes, 40 concurrent submissions of one worker: exactly 10 pass."""
    port, access_log = _free_port(), tmp_path / "access.log"
    env = _child_env(ANNOTATION_SUBMISSION_RATE="10/hour", ANNOTATION_SUBMISSION_IP_RATE="1000/hour")
    server_log = open(tmp_path / "gunicorn.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "3",
            "--access-logfile",
            str(access_log),
            "--access-logformat",
            "%(p)s %(m)s %(s)s",
        ],
        cwd=ROOT,
        env=env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        # every worker process up before the submissions: one answering /healthz says nothing of the others, and
        # on a loaded machine the first one booted took all 40 (the spread check below then failed)
        deadline = time.monotonic() + 120
        while _pids_serving(access_log, "GET") < 3:
            assert server.poll() is None, Path(server_log.name).read_text()[-3000:]
            assert time.monotonic() < deadline, "gunicorn's three workers did not all answer"
            with ThreadPoolExecutor(max_workers=6) as pool:
                list(pool.map(lambda _: _get_status(f"{base}/healthz"), range(6)))
        # no such HIT: a request the limit lets through is a 404 from the view, one it stops is a 429
        url = f"{base}/api/hits/999999/assignments/"
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(lambda _: _post_json(url, {"worker_id": "W1"}), range(40)))
    finally:
        server.terminate()
        server.wait(timeout=30)
        server_log.close()
    assert sorted(statuses) == [404] * 10 + [429] * 30
    assert _pids_serving(access_log, "POST") >= 2, "the submissions were not spread over the worker processes"
