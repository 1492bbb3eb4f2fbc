"""The Celery application and its one routing table.

Decoding runs on the ``gpu`` queue (workers started with ``-Q gpu --prefetch-multiplier 1``);
everything else runs on ``cpu``. ``tests/test_celery_routes.py`` fails if a task has no route here.

A worker's start-up: each child's garbage collector is tuned (``config.process_tuning``). What an app does when
a worker starts, the app connects itself, since config imports no domain app: the jobs app's heartbeat
(``jobs.worker_signals``), generation's tables loaded before the pool forks (``generation.worker_start``).
"""

import os

from celery import Celery
from celery.signals import worker_process_init

from config.process_tuning import tune_garbage_collector

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

TASK_ROUTES: dict[str, dict[str, str]] = {
    "jobs.tasks.run_chunk_cpu": {"queue": "cpu"},
    "jobs.tasks.run_chunk_gpu": {"queue": "gpu"},
    "jobs.tasks.finish_job": {"queue": "cpu"},
    "jobs.tasks.requeue_lost_chunks": {"queue": "cpu"},
    "annotation.tasks.expire_local_assignments": {"queue": "cpu"},
    "annotation.tasks.sync_mturk_batches": {"queue": "cpu"},
}

app = Celery("paraforge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = TASK_ROUTES
app.autodiscover_tasks()


@worker_process_init.connect
def _tune_worker_process(**_: object) -> None:
    """Garbage-collector tuning for a long-running worker child (see config/process_tuning.py)."""
    tune_garbage_collector()
