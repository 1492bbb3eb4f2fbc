"""Shared fixtures. Backends come from DATABASE_URL / CELERY_BROKER_URL (SQLite and the embedded broker
when unset); every run has its own var/ directory (see config/settings/test.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from jobs.worker_process import worker_start, workers_stop, workers_wait_ready

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


def database_url_of_test_db() -> str:
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


class CeleryWorker:
    """A real ``celery worker`` process (``jobs.worker_process``) on the configured broker and the test database;
    its log in the run's var/ folder, shown when it does not start."""

    def __init__(self, name: str, **env: str):
        self.node = f"test-{name}-{os.getpid()}"
        environment = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="config.settings.test",
            DATABASE_URL=database_url_of_test_db(),
            PARAFORGE_VAR_DIR=str(settings.VAR_DIR),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            **env,
        )
        self.log_path = Path(settings.VAR_DIR) / f"celery-worker-{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = worker_start(self.node, env=environment, log=self._log)
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60) -> CeleryWorker:
        try:
            workers_wait_ready({self.node: self.proc}, timeout=timeout)
        except RuntimeError as error:
            raise RuntimeError(f"{error}:\n" + self.log_path.read_text()[-3000:]) from None
        return self

    def stop(self) -> None:
        workers_stop([self.proc])
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


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, int]]:
    """The chunk tasks sent, as (task name, chunk id), instead of going to the broker: where a job's chunks are
    routed (the queue tests; the real workers' tests run them)."""
    import jobs.tasks

    out: list[tuple[str, int]] = []
    for task in (jobs.tasks.run_chunk_cpu, jobs.tasks.run_chunk_gpu):
        monkeypatch.setattr(task, "delay", lambda chunk_id, name=task.name: out.append((name, chunk_id)))
    return out
