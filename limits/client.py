"""The client's address, through the configured number of trusted proxies.

One rule for every limit (submission throttles, the login rate limit, django-axes lockouts): DRF's
``NUM_PROXIES`` (set from ``PARAFORGE_TRUSTED_PROXIES``). 0: ``REMOTE_ADDR``, and ``X-Forwarded-For``
is ignored (any client can write it). N: the N-th address from the right of ``X-Forwarded-For``, the
one the outermost trusted proxy saw (each proxy appends the address it was reached from)."""

from __future__ import annotations

from rest_framework.throttling import BaseThrottle


def client_ip(request) -> str:
    """The client address of a Django or DRF request ("" when the server gave none)."""
    return BaseThrottle().get_ident(request) or ""
