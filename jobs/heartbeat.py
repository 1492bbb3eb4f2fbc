"""Which Celery workers are alive, told by their heartbeats rather than by a ping alone.

A worker answers a broadcast ping only between tasks: the quick start's solo-pool worker running a scoring chunk
is silent for minutes, and a command that took that silence for "no worker" told its user to run the job a second
time in their shell (issue 37). So every worker process writes a ``WorkerHeartbeat`` row from a thread of its own
every ``JOBS_HEARTBEAT_S`` seconds, busy or not (``jobs.worker_signals`` starts it when the worker is ready and
removes the row when it stops). A worker is *seen* when its row is younger than ``HEARTBEAT_FRESH`` beats; a killed
worker's row simply grows old. ``workers_seen`` is what ``jobs.execution`` asks before it says anything about
workers; a ping is the second opinion, for a worker of a version that does not beat.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import threading

from django.conf import settings
from django.db import connection
from django.utils import timezone

from .models import WorkerHeartbeat

logger = logging.getLogger(__name__)

HEARTBEAT_FRESH = 3  # a row younger than this many beats is a live worker (one late beat is not a death)


def heartbeat_seconds() -> float:
    return float(settings.JOBS_HEARTBEAT_S)


@dataclasses.dataclass(frozen=True)
class SeenWorker:
    """A worker whose heartbeat is fresh: its node name, queues and how long ago it beat."""

    node: str
    queues: tuple[str, ...]
    seconds_ago: float

    def text(self) -> str:
        queues = f" ({', '.join(self.queues)})" if self.queues else ""
        return f"{self.node}{queues}, seen {round(self.seconds_ago)} s ago"


def heartbeat_write(node: str, queues: list[str] | tuple[str, ...], *, started_at: dt.datetime) -> None:
    """Record that ``node`` is alive now."""
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        node=node,
        defaults={"queues": ",".join(queues), "pid": os.getpid(), "started_at": started_at, "seen_at": now},
    )


def heartbeat_remove(node: str) -> None:
    """A worker that stops cleanly says so at once (a killed one is forgotten when its row grows old)."""
    WorkerHeartbeat.objects.filter(node=node).delete()


def workers_seen(*, queue: str | None = None, now: dt.datetime | None = None) -> list[SeenWorker]:
    """The workers whose heartbeat is fresh, newest first; with ``queue``, those that take it."""
    now = now or timezone.now()
    fresh = now - dt.timedelta(seconds=HEARTBEAT_FRESH * heartbeat_seconds())
    seen = []
    for row in WorkerHeartbeat.objects.filter(seen_at__gte=fresh).order_by("-seen_at"):
        queues = tuple(q for q in row.queues.split(",") if q)
        if queue is None or not queues or queue in queues:
            seen.append(SeenWorker(row.node, queues, max(0.0, (now - row.seen_at).total_seconds())))
    return seen


class HeartbeatThread:
    """Beats for one worker process until ``stop()``: a daemon thread with its own database connection."""

    def __init__(self, node: str, queues: list[str] | tuple[str, ...]) -> None:
        self.node, self.queues = node, tuple(queues)
        self.started_at = timezone.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{node}", daemon=True)

    def start(self) -> HeartbeatThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while True:
                try:
                    heartbeat_write(self.node, self.queues, started_at=self.started_at)
                except Exception:  # a missed beat must not stop the worker; the next one may pass
                    logger.warning("worker %s: could not write its heartbeat", self.node, exc_info=True)
                if self._stop.wait(heartbeat_seconds()):
                    return
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            heartbeat_remove(self.node)
        except Exception:  # the row grows old on its own
            logger.warning("worker %s: could not remove its heartbeat", self.node, exc_info=True)
