"""Prolific's API v1 over HTTPS with ``requests``: the token from ``PROLIFIC_API_TOKEN``, the base URL from
``PROLIFIC_API_URL`` (tests point it at a local stub that checks every request against Prolific's API
description). Calls that failed for a passing reason (429, 5xx, the network) are retried with backoff
(``annotation.providers.retry``); any other error answer raises ``ProlificError`` with Prolific's message.
"""

from __future__ import annotations

from typing import Any

import requests
from django.conf import settings

from ..errors import ProviderConfigurationError, ProviderError
from ..retry import RetryPolicy, call_with_retry

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class ProlificError(ProviderError):
    """Prolific refused a request (the message carries its status and its own explanation)."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class ProlificUnavailable(ProlificError):
    """Prolific could not be reached, or kept answering with a passing error: try again later."""


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, ProlificUnavailable)


def _error_text(response: requests.Response) -> str:
    """Prolific's explanation of an error answer: ``{"error": {"detail": ..., "title": ...}}`` or plain text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        detail = error.get("detail") or error.get("title") or error
        return detail if isinstance(detail, str) else str(detail)[:300]
    return str(error)[:300]


class ProlificClient:
    """``request(method, path, json=..., params=...)`` -> the decoded JSON answer (None for an empty one)."""

    def __init__(
        self,
        *,
        token: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 30.0,
    ):
        self.token = token if token is not None else settings.PROLIFIC_API_TOKEN
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/")
        self.retry = retry or RetryPolicy(max_attempts=settings.PROLIFIC_MAX_ATTEMPTS)
        self.timeout_s = timeout_s
        self._session: requests.Session | None = None

    def check(self) -> None:
        """Raise ``ProviderConfigurationError`` when no token is set (nothing is sent)."""
        if not self.token:
            raise ProviderConfigurationError(
                "no Prolific API token: set PROLIFIC_API_TOKEN in the environment "
                "(Prolific: Workspace settings > API tokens)"
            )

    def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None) -> Any:
        self.check()
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        return call_with_retry(lambda: self._send(method, url, json, params), policy=self.retry, transient=is_transient)

    def _send(self, method: str, url: str, json: Any, params: dict | None) -> Any:
        if self._session is None:
            self._session = requests.Session()
            self._session.headers.update({"Authorization": f"Token {self.token}", "Accept": "application/json"})
        try:
            response = self._session.request(method, url, json=json, params=params, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ProlificUnavailable(f"Prolific could not be reached: {exc}") from exc
        if response.status_code in TRANSIENT_STATUSES:
            raise ProlificUnavailable(
                f"Prolific answered {response.status_code}: {_error_text(response)}", status=response.status_code
            )
        if response.status_code >= 400:
            raise ProlificError(
                f"Prolific refused {method} {url.removeprefix(self.base_url)}: "
                f"{response.status_code} {_error_text(response)}",
                status=response.status_code,
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise ProlificError(f"Prolific answered {method} {url} with something that is not JSON") from exc
