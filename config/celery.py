"""The Celery application and its one routing table.

Decoding runs on the ``gpu`` queue (workers started with ``-Q gpu --prefetch-multiplier 1``);
everything else runs on ``cpu``. ``tests/test_celery_routes.py`` fails if a task has no route here.

A worker's start-up: each child's garbage collector is tuned (``config.process_tuning``) and the worker's
heartbeat starts (``jobs.heartbeat``); what an app loads before the pool forks, the app connects itself
(``generation.worker_start``), since config imports no domain app.
"""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

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


_HEARTBEAT: list = []  # the worker process's heartbeat thread (jobs.heartbeat), one at most


@worker_ready.connect
def _start_heartbeat(sender: object = None, **_: object) -> None:
    """The worker beats from now on, busy or not: commands that wait for a job see it (jobs/heartbeat.py)."""
    from jobs.heartbeat import HeartbeatThread

    queues = sorted(getattr(sender.app.amqp.queues, "consume_from", None) or ()) if sender is not None else []
    _HEARTBEAT.append(HeartbeatThread(getattr(sender, "hostname", "") or "worker", queues).start())


@worker_shutdown.connect
def _stop_heartbeat(**_: object) -> None:
    while _HEARTBEAT:
        _HEARTBEAT.pop().stop()
