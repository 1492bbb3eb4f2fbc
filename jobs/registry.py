"""Job kinds: what a kind of job splits into, how one chunk runs, and how the results combine.

A kind is data plus three plain functions, so the same code runs in a Celery worker, inline in a
management command (``--wait`` on the embedded default), and in tests. Its chunks go to the kind's ``queue``,
or, for a kind whose jobs choose their hardware (a scoring asked to run on a GPU), to the queue its
``queue_for`` gives for the job's params: the choice travels with the job, so a resumed or re-queued chunk
goes where its job asked.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .models import Job, JobChunk


class ProgressFn(Protocol):
    """What a chunk calls as it works: ``progress(done, total)`` units, and optionally ``stage``, what it is
    doing now in words ("features: batch 1 of 2"), which the admin's bar and ``--wait`` show beside the figure."""

    def __call__(self, done: int, total: int, stage: str | None = None) -> None: ...


QUEUES = ("cpu", "gpu")  # config/celery.py's routes: run_chunk_cpu and run_chunk_gpu


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
    # What ``progress(done, total)`` counts, for people reading a progress line ("pairs", "references").
    unit: str = "units"
    # The queue of one job from its params, for a kind whose jobs choose their hardware; None: ``queue``.
    queue_for: Callable[[dict[str, Any]], str] | None = None

    def queue_of(self, params: dict[str, Any]) -> str:
        """The queue of a job of this kind with ``params``: ``queue_for``'s answer, else ``queue``."""
        return queue_checked(self.name, self.queue if self.queue_for is None else self.queue_for(params))


def queue_checked(kind_name: str, queue: str) -> str:
    """``queue`` when it is one of ``QUEUES``; a ValueError naming the kind otherwise."""
    if queue not in QUEUES:
        raise ValueError(f"job kind {kind_name!r}: queue must be 'cpu' or 'gpu', not {queue!r}")
    return queue


# Downstream apps act on a kind's result without the kind's app importing them (dependencies follow the
# data flow): a hook runs after the kind's ``finish``, in the same transaction, and returns the keys it
# fills in the job's result (or None).
FinishHook = Callable[[Job, list[JobChunk], dict[str, Any]], "dict[str, Any] | None"]

_KINDS: dict[str, JobKind] = {}
_FINISH_HOOKS: dict[str, list[FinishHook]] = {}


def register(kind: JobKind) -> JobKind:
    queue_checked(kind.name, kind.queue)
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise LookupError(f"unknown job kind {name!r}; known: {', '.join(sorted(_KINDS)) or 'none'}") from None


def kind_names() -> list[str]:
    """Every registered kind's name, sorted (what a job's ``kind`` may be)."""
    return sorted(_KINDS)


def add_finish_hook(kind_name: str, hook: FinishHook) -> None:
    """Run ``hook(job, chunks, result)`` after every ``finish`` of that kind (registering twice is a no-op)."""
    hooks = _FINISH_HOOKS.setdefault(kind_name, [])
    if hook not in hooks:
        hooks.append(hook)


def finish_hooks(kind_name: str) -> list[FinishHook]:
    return list(_FINISH_HOOKS.get(kind_name, ()))
