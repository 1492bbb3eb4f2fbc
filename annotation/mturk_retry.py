"""Retrying MTurk calls that failed for a passing reason (throttling, a busy service, the network).

MTurk throttles requesters hard (a burst of ``send_bonus`` or ``create_hit_with_hit_type`` calls gets
``Throttling`` errors), so every provider call goes through ``call_with_retry``: exponential backoff
with full jitter, a bounded number of attempts, and a ``sleep`` that tests replace so they never wait.
Only transient errors are retried: MTurk's ``RequestError`` also means "invalid request" (insufficient
funds, a HIT that already exists), which a retry cannot fix, so it is retried only when its message
says the rate was exceeded.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

T = TypeVar("T")

TRANSIENT_ERROR_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
    "RequestLimitExceeded", "ServiceUnavailable", "ServiceFault", "InternalError", "InternalFailure",
})
_RATE_WORDS = ("rate exceeded", "throttl", "too many requests", "try again", "temporarily unavailable")


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", "") or error.response.get("Message", ""))


def is_transient(error: BaseException) -> bool:
    """Whether repeating the very same request may succeed."""
    if isinstance(error, (BotoConnectionError, HTTPClientError, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, ClientError):
        code = error_code(error)
        if code in TRANSIENT_ERROR_CODES:
            return True
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (500, 502, 503, 504):
            return True
        if code == "RequestError":
            message = error_message(error).lower()
            return any(word in message for word in _RATE_WORDS)
    return False


@dataclass
class RetryPolicy:
    """``max_attempts`` calls in all; the n-th wait is uniform in [0, min(max_delay, base * 2**n)]."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * (2 ** attempt)))


def call_with_retry(fn: Callable[[], T], *, policy: RetryPolicy) -> T:
    """Call ``fn`` until it succeeds, a non-transient error is raised, or the attempts run out."""
    attempts = max(1, int(policy.max_attempts))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if attempt == attempts - 1 or not is_transient(exc):
                raise
            policy.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
