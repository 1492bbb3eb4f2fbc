"""Django's error views (``handler400/403/404/500`` in config/urls.py): JSON under /api/, HTML elsewhere.

Inside a DRF view every error is already JSON (``api/errors.py``); these answer what happens
before or outside one, in the same shape ``{"detail": "...", "code": "..."}``: an unknown /api/ URL or an
id out of range (404 ``not_found``), a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413
``request_too_large``), a refused ``Host`` or another suspicious request (400 ``bad_request``), a
permission refused by Django (403 ``permission_denied``), and a server error (500 ``server_error``).
Pages keep Django's own error pages.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from api.errors import REQUEST_TOO_LARGE

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def _json(detail: str, code: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    if not is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(REQUEST_TOO_LARGE, status=413)
    return _json("bad request", "bad_request", 400)


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    if not is_api(request):
        return defaults.permission_denied(request, exception)
    return _json("You do not have permission to perform this action.", "permission_denied", 403)


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    if not is_api(request):
        return defaults.page_not_found(request, exception)
    return _json("Not found.", "not_found", 404)


def server_error(request: HttpRequest) -> HttpResponse:
    if not is_api(request):
        return defaults.server_error(request)
    return _json("server error", "server_error", 500)
