"""What a Celery worker of this project does for jobs when it starts and stops: its heartbeat (``jobs.heartbeat``)
beats from the moment the worker is ready, busy or not, and stops with it.

Why here and not in config/celery.py: the heartbeat is the jobs app's to know, and config imports no domain app
(docs/explanation/architecture.md). ``JobsConfig.ready`` imports this module, which connects the handlers to
Celery's signals (a web process never receives them).
"""

from __future__ import annotations

from celery.signals import worker_ready, worker_shutdown

from .heartbeat import HeartbeatThread

RUNNING: list[HeartbeatThread] = []  # this worker process's heartbeat thread, one at most


@worker_ready.connect
def start_heartbeat(sender: object = None, **_: object) -> None:
    """The worker beats from now on, busy or not: commands that wait for a job see it (jobs/heartbeat.py)."""
    queues = sorted(getattr(sender.app.amqp.queues, "consume_from", None) or ()) if sender is not None else []
    RUNNING.append(HeartbeatThread(getattr(sender, "hostname", "") or "worker", queues).start())


@worker_shutdown.connect
def stop_heartbeat(**_: object) -> None:
    """The worker's row goes with it (a stopped worker is not "seen" for the next beats)."""
    while RUNNING:
        RUNNING.pop().stop()
