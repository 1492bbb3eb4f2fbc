"""The Celery application and its one routing table.

Decoding runs on the ``gpu`` queue (workers started with ``-Q gpu --prefetch-multiplier 1``);
everything else runs on ``cpu``. ``tests/test_celery_routes.py`` fails if a task has no route here.
"""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

TASK_ROUTES: dict[str, dict[str, str]] = {
    "jobs.tasks.run_chunk_cpu": {"queue": "cpu"},
    "jobs.tasks.run_chunk_gpu": {"queue": "gpu"},
    "jobs.tasks.finish_job": {"queue": "cpu"},
    "annotation.tasks.expire_local_assignments": {"queue": "cpu"},
    "annotation.tasks.sync_mturk_batches": {"queue": "cpu"},
}

app = Celery("paraforge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = TASK_ROUTES
app.autodiscover_tasks()
