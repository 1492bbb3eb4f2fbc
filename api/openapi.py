"""The OpenAPI description's shared parts: the one error body of every /api/ answer and its statuses, and
the schema class (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``) that writes request shapes as strictly as the
serializers check them.

Each API view names, with ``extend_schema``, its request and answer shapes (its serializers) and the error
statuses it can give through ``api_errors``; ``tests/test_openapi.py`` runs schemathesis against a live
server to hold every answer to that description (no 5xx, no undocumented status, no body off its schema).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

# What DRF's CharField accepts: no NUL character, and something besides the whitespace it trims away (a
# blank one is added as a second choice by drf-spectacular where allowed). Python's and ECMA's regex alike.
_TEXT = r"^[^\u0000]+$"
_NOT_BLANK_TEXT = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's schema, with request shapes as strict as the serializers' checks, so that a body the
    description calls valid is not refused as invalid:

    * a nested ``many=True`` serializer gets ``minItems``/``maxItems`` from its ``allow_empty``,
      ``min_length`` and ``max_length`` (drf-spectacular leaves them out);
    * a ``CharField`` without a pattern or format gets one that says what it refuses (NUL, blank);
    * a serializer's ``openapi_request_rule`` (a JSON-schema dict, e.g. ``anyOf``) is added to its request
      shape: rules between fields that no field's schema can carry."""

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction != "request" or not isinstance(schema, dict):
            return schema
        if isinstance(field, serializers.ListSerializer) and schema.get("type") == "array":
            min_items = field.min_length if field.min_length is not None else (0 if field.allow_empty else 1)
            if min_items:
                schema["minItems"] = min_items
            if field.max_length is not None:
                schema["maxItems"] = field.max_length
        elif (
            isinstance(field, serializers.CharField)
            and schema.get("type") == "string"
            and "pattern" not in schema
            and "format" not in schema
            and "enum" not in schema
        ):
            trimmed = field.trim_whitespace and not field.allow_blank
            schema["pattern"] = _NOT_BLANK_TEXT if trimmed else _TEXT
        return schema

    def _map_basic_serializer(self, serializer, direction) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        rule = getattr(serializer, "openapi_request_rule", None)
        return {**schema, **rule} if rule and direction == "request" else schema


class ErrorSerializer(serializers.Serializer):
    """The body of every error under /api/."""  # api/errors.py, frontend/errors.py

    detail = serializers.CharField(help_text="What went wrong, in a sentence.")
    code = serializers.CharField(
        help_text="A word a client can branch on: invalid, parse_error, "
        "unsupported_media_type, request_too_large, throttled, "
        "not_authenticated, permission_denied, not_found, "
        "method_not_allowed, not_acceptable, database_unavailable, or "
        "an endpoint's own (e.g. conflicting_replay)."
    )
    errors = serializers.JSONField(
        required=False, help_text="Validation errors only (code invalid): the field messages, by field."
    )


ERROR_STATUSES: dict[int, str] = {
    400: "Invalid input (`invalid`, field messages under `errors`) or a body that is not JSON in UTF-8 at "
    "most 32 levels deep (`parse_error`).",
    403: "Not signed in (`not_authenticated`) or without the permissions the endpoint needs (`permission_denied`).",
    404: "No such object, or one the caller may not see; an id outside 0..2^63-1 (`not_found`).",
    406: "The Accept header names no type this endpoint answers in (`not_acceptable`).",
    409: "A conflict with what is stored (see the endpoint's description).",
    410: "Gone: the HIT or assignment expired.",
    413: "The request body is too large (`request_too_large`).",
    415: "A body that is not `application/json` in UTF-8 (`unsupported_media_type`).",
    429: "Past a rate limit (`throttled`); `Retry-After` gives the seconds to wait.",
    503: "The database is unavailable (`database_unavailable`); retry after `Retry-After` seconds.",
}
# What any API view can answer, whatever it does: no permission, a content type it cannot produce, a lost
# database (views with an id in their URL add 404).
COMMON_ERRORS = (403, 406, 503)


def api_errors(*statuses: int, said: dict[int, str] | None = None) -> dict[int, OpenApiResponse]:
    """``extend_schema(responses=...)`` entries: ``statuses`` plus ``COMMON_ERRORS``, each the error body,
    described by ``ERROR_STATUSES`` or, for the endpoint's own meaning of a status, by ``said``."""
    said = said or {}
    return {
        status: OpenApiResponse(ErrorSerializer, description=said.get(status, ERROR_STATUSES[status]))
        for status in sorted({*statuses, *COMMON_ERRORS, *said})
    }
