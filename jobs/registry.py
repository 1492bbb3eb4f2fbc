"""Job kinds: what a kind of job splits into, how one chunk runs, and how the results combine.

A kind is data plus three plain functions, so the same code runs in a Celery worker, inline in a
management command (``--wait`` on the embedded default), and in tests.
"""
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .models import Job, JobChunk

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class JobKind:
    name: str
    # Returns one params dict per chunk. Runs inside the transaction that creates the job.
    plan: Callable[[Job], list[dict[str, Any]]]
    # Does one chunk's work and returns a JSON-able result. Must write each output once even if it
    # runs twice (a redelivered message, a resumed job): outputs are keyed by (job, chunk).
    run_chunk: Callable[[Job, JobChunk, ProgressFn], dict[str, Any]]
    # Combines the chunk results into the job's result; runs once, after every chunk succeeded.
    finish: Callable[[Job, list[JobChunk]], dict[str, Any]]
    queue: str = "cpu"


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    if kind.queue not in {"cpu", "gpu"}:
        raise ValueError(f"job kind {kind.name!r}: queue must be 'cpu' or 'gpu', not {kind.queue!r}")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise LookupError(f"unknown job kind {name!r}; known: {', '.join(sorted(_KINDS)) or 'none'}") from None


def known_kinds() -> list[str]:
    return sorted(_KINDS)
