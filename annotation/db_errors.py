"""The API's answer when the database is unreachable: a clean 503 a client can retry, not an HTML page.

A dropped or refused connection (the database restarting, a failover) raises ``OperationalError`` or
``InterfaceError`` inside the view; the view's transaction has rolled back, so the same request can be
sent again safely (submissions are idempotent on their assignment id). Django drops the broken
connection when the request finishes (``close_old_connections``), so the next request reconnects."""
from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

log = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = {"detail": "database unavailable, retry", "code": "database_unavailable"}


def api_exception_handler(exc, context):
    """DRF's handler, plus 503 JSON with ``Retry-After`` for a lost or refused database connection."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable during %s: %s", context.get("view").__class__.__name__, exc)
        set_rollback()
        return Response(DATABASE_UNAVAILABLE, status=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": "1"})
    return exception_handler(exc, context)
