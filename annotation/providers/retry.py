"""Retrying platform calls that failed for a passing reason (throttling, a busy service, the network).

Crowd platforms throttle requesters hard (a burst of MTurk ``send_bonus`` calls gets ``Throttling``
errors, Prolific answers 429), so every provider call goes through ``call_with_retry``: exponential
backoff with full jitter, a bounded number of attempts, and a ``sleep`` that tests replace so they never
wait. Each platform says which of its errors are transient (``transient``); only those are retried.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class RetryPolicy:
    """``max_attempts`` calls in all; the n-th wait is uniform in [0, min(max_delay, base * 2**n)]."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * (2**attempt)))


def call_with_retry(fn: Callable[[], T], *, policy: RetryPolicy, transient: Callable[[BaseException], bool]) -> T:
    """Call ``fn`` until it succeeds, an error ``transient`` rejects is raised, or the attempts run out."""
    attempts = max(1, int(policy.max_attempts))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts - 1 or not transient(exc):
                raise
            policy.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
