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


class CeleryWorker:
    """A real ``celery worker`` process (solo pool) on the configured broker and the test database."""

    def __init__(self, name: str, **env: str):
        database_url = _database_url_of_test_db()
        self.hostname = f"test-{name}-{os.getpid()}"
        environment = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="config.settings.test",
            DATABASE_URL=database_url,
            PARAFORGE_VAR_DIR=str(settings.VAR_DIR),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            **env,
        )
        self.log_path = Path(settings.VAR_DIR) / f"celery-worker-{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
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
                f"{self.hostname}@%h",
                "-l",
                "INFO",
            ],
            cwd=ROOT,
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60) -> CeleryWorker:
        from config.celery import app

        deadline = time.monotonic() + timeout
        while True:
            replies = app.control.ping(timeout=1.0) or []
            if any(name.startswith(f"{self.hostname}@") for reply in replies for name in reply):
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("the Celery worker did not start:\n" + self.log_path.read_text()[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


@pytest.fixture(scope="module")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real ``celery worker`` process on the configured broker and the test database.

    Module-scoped: once it stops, later tests' ``--wait`` commands run inline again instead of queueing
    work that a worker cannot see (their rows sit in an uncommitted test transaction)."""
    with django_db_blocker.unblock():
        worker = CeleryWorker("main").wait_ready()
    yield worker.proc
    worker.stop()
