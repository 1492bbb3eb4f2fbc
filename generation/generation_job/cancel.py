"""A generation chunk's cancel inside a batch: the decoder's ``should_stop`` reads the job's cancel.

Why: the progress recorder (``jobs.execution``) notices a cancel only when the chunk reports progress, after
each batch; a big batch decodes for minutes. The decoding loops ask a ``should_stop`` hook before every step
(``generation.decoding.stop_check``); a chunk's reads the same state the recorder reads
(``jobs.execution.job_was_cancelled``) at most every :data:`.pause.CHECK_EVERY_S`, and the decoder's
``DecodingStopped`` becomes ``JobCancelled``, the cancel path every kind has: the chunk ends without writing
and its worker takes the next chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from jobs.execution import JobCancelled, job_was_cancelled

from .pause import CHECK_EVERY_S

# (generation.decoding imports torch: only the worker that decodes loads it, not the plan, hence the
# function-level imports)


def job_stop_check(job_id: int, seconds: float = CHECK_EVERY_S) -> Callable[[], bool]:
    """True once job ``job_id`` was cancelled; the database asked at most every ``seconds``."""
    from ..decoding.stop_check import rate_limited

    return rate_limited(lambda: job_was_cancelled(job_id), seconds)


@contextmanager
def stopped_as_cancelled(job_id: int) -> Iterator[None]:
    """Inside the block a decoder's ``DecodingStopped`` is raised as ``JobCancelled`` (the chunk's cancel)."""
    from ..decoding.stop_check import DecodingStopped

    try:
        yield
    except DecodingStopped as exc:
        raise JobCancelled(f"job {job_id} was cancelled") from exc
