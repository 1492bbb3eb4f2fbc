"""Rate limits of the submission API, counted in the database (``limits.counters``).

The counts are shared by every gunicorn worker and machine, and each hit is one atomic upsert, so a
limit of N admits exactly N submissions per window however many processes serve them. The client
address comes through ``PARAFORGE_TRUSTED_PROXIES`` trusted proxies (``limits.client.client_ip``):
with none, ``X-Forwarded-For`` is ignored. A refused request raises DRF's ``Throttled`` (429, JSON,
``Retry-After``: the seconds until the window closes)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from limits.client import client_ip
from limits.counters import over_limit


class CountedThrottle(BaseThrottle):
    """A fixed-window limit, ``rate_setting`` (e.g. "30/min"), on the key ``scope:ident(request)``."""

    scope = ""
    rate_setting = ""
    default_rate = ""

    def __init__(self):
        self._wait: int | None = None

    def ident(self, request) -> str:
        raise NotImplementedError

    def allow_request(self, request, view) -> bool:
        self._wait = over_limit(
            f"{self.scope}:{self.ident(request)}", getattr(settings, self.rate_setting, self.default_rate)
        )
        return self._wait is None

    def wait(self) -> int | None:
        return self._wait


class SubmissionIPThrottle(CountedThrottle):
    """Per client address, all workers together: ``ANNOTATION_SUBMISSION_IP_RATE`` (default 120/min)."""

    scope = "submission-ip"
    rate_setting = "ANNOTATION_SUBMISSION_IP_RATE"
    default_rate = "120/min"

    def ident(self, request) -> str:
        return client_ip(request)


class SubmissionThrottle(CountedThrottle):
    """Per (client address, the body's ``worker_id``): ``ANNOTATION_SUBMISSION_RATE`` (default 30/min)."""

    scope = "submission-worker"
    rate_setting = "ANNOTATION_SUBMISSION_RATE"
    default_rate = "30/min"

    def ident(self, request) -> str:
        worker = request.data.get("worker_id") if isinstance(request.data, dict) else None
        return f"{client_ip(request)}:{str(worker)[:200]}"
