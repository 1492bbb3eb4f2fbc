"""Starting real ``celery worker`` processes on this machine and waiting until they answer.

The tests that kill or lose a worker (tests/conftest.py's ``CeleryWorker``) and bench/workers.py need a
worker as a deployment runs one -- a separate process on the configured broker, not an in-process eager
call -- so they start the same command, here in one place: the solo pool (one chunk at a time, so that
killing the process kills exactly the chunk it runs), both queues, no gossip or mingle (faster start, and a
worker must not wait for peers that a test just killed). Plain ``subprocess``, nothing of Django's but
what ``config.celery``'s pings read (the caller's settings name the broker): the caller gives the child
its whole environment (settings module, database, broker, var folder).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from config.celery import app

ROOT = Path(__file__).resolve().parents[1]
QUEUES = "cpu,gpu"


def worker_command(node: str, *, log_level: str = "INFO") -> list[str]:
    """The argv of one solo-pool worker named ``node@<host>`` taking both queues."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "-Q",
        QUEUES,
        "-P",
        "solo",
        "--without-gossip",
        "--without-mingle",
        "-n",
        f"{node}@%h",
        "-l",
        log_level,
    ]


def worker_start(
    node: str, *, env: Mapping[str, str], log: IO[bytes] | int = subprocess.DEVNULL, log_level: str = "INFO"
) -> subprocess.Popen:
    """Start one worker (see ``worker_command``) in the project root with exactly ``env``; its output to ``log``."""
    return subprocess.Popen(
        worker_command(node, log_level=log_level),
        cwd=ROOT,
        env=dict(env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def answering_nodes(timeout: float = 1.0) -> set[str]:
    """The node names (``node@host``) of the workers that answer a ping on the configured broker."""
    return {name for reply in app.control.ping(timeout=timeout) or [] for name in reply}


def workers_wait_ready(workers: Mapping[str, subprocess.Popen], timeout: float = 60) -> None:
    """Return once every worker (its ``node`` -> its process) answers a ping.

    Raises ``RuntimeError`` naming the ones that did not, as soon as one of them has exited or after
    ``timeout`` seconds; it kills them first, so that nothing is left running behind the error."""
    deadline = time.monotonic() + timeout
    while True:
        answering = {name.split("@", 1)[0] for name in answering_nodes()}
        missing = sorted(set(workers) - answering)
        if not missing:
            return
        exited = [node for node in missing if workers[node].poll() is not None]
        if exited or time.monotonic() > deadline:
            for node in missing:
                workers[node].kill()
            reason = f"exited: {', '.join(exited)}" if exited else f"no answer after {timeout:g} s"
            raise RuntimeError(f"{len(missing)} of {len(workers)} Celery workers did not start ({reason})")


def workers_stop(procs: Iterable[subprocess.Popen], timeout: float = 20) -> None:
    """Ask every worker still running to stop (SIGTERM: a warm shutdown), then kill those not gone in ``timeout``."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
