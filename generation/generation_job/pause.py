"""The pause a generation job takes after each decoded batch (``pause_per_batch``), cut short by a cancel.

Why: a pause used to be one ``time.sleep``; a job cancelled during it went on sleeping (up to ``1e9`` seconds
before the settings were bounded), holding its worker while later jobs waited. Now the pause sleeps in short
steps and reports progress after each: the job's progress recorder (``jobs.execution``) reads whether the job was
cancelled and raises ``JobCancelled``, which ends the chunk and frees the worker within a step.
"""

from __future__ import annotations

import time

from jobs.registry import ProgressFn

# the progress recorder writes, and reads the job's cancel, at most every half second: a step no shorter
CHECK_EVERY_S = 0.5


def pause_between_batches(seconds: float, progress: ProgressFn, done: int, total: int) -> None:
    """Sleep ``seconds`` in steps of :data:`CHECK_EVERY_S`, reporting ``progress(done, total)`` after each (which
    raises when the job was cancelled meanwhile)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, CHECK_EVERY_S))
        progress(done, total)
