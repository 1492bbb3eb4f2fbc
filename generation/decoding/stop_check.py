"""Stopping a decode between two of its steps: a ``should_stop`` hook the decoding loops ask once per step.

Why: a generation job's cancel used to be noticed only between batches, and one batch of a big search (a beam
of 100 over hundreds of sentences, thousands of diverse samples) can decode for many minutes, holding its
worker all that time. ``dba.beam_search`` (seq2seq and decoder-only models alike) and
``diverse.sample_batch`` call ``should_stop()`` before each decoder step and raise :class:`DecodingStopped`
when it says True; the generation job turns that into its cancel (``jobs.execution.JobCancelled``).

The hook is asked every step, so it must be cheap: a job's reads the database at most every half second
(:func:`rate_limited`). With ``should_stop=None`` (the default) nothing is asked, and a decode computes and
draws exactly what it did without the hook. No Django here: the decoder stays a plain module.
"""

from __future__ import annotations

import time
from collections.abc import Callable

StopCheck = Callable[[], bool]


class DecodingStopped(Exception):
    """Raised by a decoding loop whose ``should_stop`` said True: the batch is abandoned, nothing returned."""


def raise_if_stopped(should_stop: StopCheck | None, where: str) -> None:
    """Raise :class:`DecodingStopped` if ``should_stop`` is given and says True (``where``: the loop, for the
    message)."""
    if should_stop is not None and should_stop():
        raise DecodingStopped(f"{where}: stopped between two decoder steps")


def rate_limited(check: StopCheck, seconds: float, clock: Callable[[], float] = time.monotonic) -> StopCheck:
    """``check`` asked at most once every ``seconds`` (the first call asks at once; calls in between answer
    False): why, a decoder step takes milliseconds and a database query as long. Once ``check`` said True
    the answer stays True."""
    last = [float("-inf")]
    stopped = [False]

    def ask() -> bool:
        if stopped[0]:
            return True
        now = clock()
        if now - last[0] < seconds:
            return False
        last[0] = now
        stopped[0] = bool(check())
        return stopped[0]

    return ask
