"""Shared fixtures. Backends come from DATABASE_URL / CELERY_BROKER_URL (SQLite and the embedded broker
when unset); every run has its own var/ directory (see config/settings/test.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
# The suite runs without network: nothing may reach the Hugging Face hub (hub ids are tested against a cache
# folder the test builds, tests/generation/test_model_hub.py). Child processes (the Celery worker) inherit it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def storage_dir(tmp_path, settings):
    """A fresh local storage root for one test."""
    root = tmp_path / "storage"
    settings.PARAFORGE_STORAGE_URL = f"file://{root}"
    return root


def _database_url_of_test_db() -> str:
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


@pytest.fixture(scope="module")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real ``celery worker`` process on the configured broker and the test database.

    Module-scoped: once it stops, later tests' ``--wait`` commands run inline again instead of queueing
    work that a worker cannot see (their rows sit in an uncommitted test transaction)."""
    with django_db_blocker.unblock():
        database_url = _database_url_of_test_db()
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=database_url,
        PARAFORGE_VAR_DIR=str(settings.VAR_DIR),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
    )
    log = open(Path(settings.VAR_DIR) / "celery-worker.log", "wb")
    proc = subprocess.Popen(
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
            f"test-{os.getpid()}@%h",
            "-l",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    from jobs.execution import workers_available

    deadline = time.monotonic() + 60
    while not workers_available(timeout=1.0):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the Celery worker did not start:\n" + Path(log.name).read_text()[-3000:])
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
