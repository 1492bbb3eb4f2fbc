"""Login rate limit: POSTs to the login views, per client address, refused before the view runs.

A login POST costs a password hash (deliberately slow); a burst of them would take every web worker's
CPU. Past ``PARAFORGE_LOGIN_RATE`` (default 20/min) per address, a POST to one of
``PARAFORGE_LOGIN_VIEWS`` (URL names) gets a 429 page with ``Retry-After`` from ``process_view``, i.e.
before the form is read, so before anything is hashed. Counted in ``limits.counters`` (shared by
every process). Repeated wrong passwords are django-axes' job (lockout per username and address)."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import render

from .client import client_ip
from .counters import over_limit

TEMPLATE = "frontend/login_rate_limited.html"


class LoginRateLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method != "POST":
            return None
        match = getattr(request, "resolver_match", None)
        if match is None or match.view_name not in getattr(settings, "PARAFORGE_LOGIN_VIEWS", ()):
            return None
        retry_after = over_limit(f"login:{client_ip(request)}", getattr(settings, "PARAFORGE_LOGIN_RATE", "20/min"))
        if retry_after is None:
            return None
        response = render(request, TEMPLATE, {"retry_after": retry_after}, status=429)
        response["Retry-After"] = str(retry_after)
        return response
