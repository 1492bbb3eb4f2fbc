"""The API's error answers: always JSON ``{"detail": "<a sentence>", "code": "<a word>"}``, never HTML.

``api_exception_handler`` (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) gives every DRF error its ``code``
(DRF's own: ``parse_error``, ``throttled``, ``not_authenticated``, ``permission_denied``, ``not_found``,
``method_not_allowed``, ``unsupported_media_type``...), keeps ``detail`` a string (a validation error's
field messages go under ``errors``, with ``"code": "invalid"``), answers an over-sized body with 413
``request_too_large``, and a lost database with 503 ``database_unavailable``. Errors that happen outside
DRF views on /api/ (an unknown URL, a refused host, a 500) are answered in the same shape by
``frontend/errors.py``.

The database case: a clean 503 a client can retry, not an HTML page.

A dropped or refused connection (the database restarting, a failover) raises ``OperationalError`` or
``InterfaceError`` inside the view; the view's transaction has rolled back, so the same request can be
sent again safely (submissions are idempotent on their assignment id). Django drops the broken
connection when the request finishes (``close_old_connections``), so the next request reconnects."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

log = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = {"detail": "database unavailable, retry", "code": "database_unavailable"}
REQUEST_TOO_LARGE = {"detail": "the request body is too large", "code": "request_too_large"}


def _first_message(errors) -> str:
    """The first message of a validation error's (nested) field errors, with its field path."""
    path = []
    while isinstance(errors, (dict, list)) and errors:
        if isinstance(errors, dict):
            key = next(iter(errors))
            if key != "non_field_errors":
                path.append(str(key))
            errors = errors[key]
        else:
            found = next((e for e in errors if e), errors[0])
            if isinstance(errors[0], (dict, list)):
                path.append(str(errors.index(found)))
            errors = found
    message = str(errors) if errors not in (None, [], {}) else "invalid input"
    return f"{'.'.join(path)}: {message}" if path else message


def error_body(exc: exceptions.APIException) -> dict:
    """``{"detail": str, "code": str}`` for a DRF error (validation errors add ``"errors"``)."""
    if isinstance(exc.detail, (list, dict)):
        return {
            "detail": _first_message(exc.detail),
            "code": exceptions.ValidationError.default_code,
            "errors": exc.detail,
        }
    return {"detail": str(exc.detail), "code": str(getattr(exc.detail, "code", None) or exc.default_code)}


def api_exception_handler(exc, context):
    """DRF's handler with one error shape: ``detail`` (a string) and ``code`` (a string) in every answer;
    503 with ``Retry-After`` for a lost or refused database connection, 413 for an over-sized body."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable during %s: %s", context.get("view").__class__.__name__, exc)
        set_rollback()
        return Response(DATABASE_UNAVAILABLE, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "1"})
    if isinstance(exc, RequestDataTooBig):  # read by request.data (the throttle, the view): Django's 400 is HTML
        set_rollback()
        return Response(REQUEST_TOO_LARGE, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        response.data = error_body(exc)
    return response
