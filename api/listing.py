"""The API's listings (``GET /api/jobs/``, ``/api/corpora/``, ...): one page size, one way to page, one way to
filter, one answer shape, so a script reads every list alike.

A listing's query string is checked by a serializer (:class:`ListQuery` and the filters a listing adds): ASCII
digits for ``limit`` and ``offset``, a filter's value among its choices, else 400 ``invalid`` naming the
parameter (never a silent default, never a 500). Each filter is a model field of the same name, so the view
only says which serializer and which rows; :func:`listed` pages them with DRF's ``LimitOffsetPagination``
bounded by ``PAGE_MAX``. The answer is ``{"count", "next", "previous", "results"}``
(:func:`page_serializer` describes it in the OpenAPI description)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from api.form_api import invalid_arguments
from api.numbers import MAX_INT, is_ascii_int

PAGE_DEFAULT = 50  # rows a page holds when the query names no ``limit``
PAGING = ("limit", "offset")  # the query parameters that are not filters
PAGE_MAX = 200  # the most a ``limit`` may ask: a page is one bounded query, whatever the table's size


class QueryIntegerField(serializers.IntegerField):
    """A query string's integer: ASCII digits only (``api.numbers``), in range; "1.0", "１" and "" are refused."""

    def to_internal_value(self, data):
        if not isinstance(data, str) or not is_ascii_int(data):
            self.fail("invalid")
        return super().to_internal_value(data)


def id_filter(help_text: str) -> QueryIntegerField:
    """A filter by a row's id (``?campaign=3``): a database id, else 400."""
    return QueryIntegerField(required=False, min_value=0, max_value=MAX_INT, help_text=help_text)


class ListQuery(serializers.Serializer):
    """The paging parameters every listing takes; a listing's filters subclass it (each one a model field)."""

    limit = QueryIntegerField(
        required=False,
        default=PAGE_DEFAULT,
        min_value=1,
        max_value=PAGE_MAX,
        help_text=f"Rows in the page (1 to {PAGE_MAX}; default {PAGE_DEFAULT}).",
    )
    offset = QueryIntegerField(
        required=False, default=0, min_value=0, max_value=MAX_INT, help_text="Rows skipped before the page."
    )


class Pagination(LimitOffsetPagination):
    """DRF's limit/offset paging with this API's bounds (the query was checked by ``ListQuery`` first)."""

    default_limit = PAGE_DEFAULT
    max_limit = PAGE_MAX


def page_serializer(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    """The answer's shape for the OpenAPI description: a page of ``item`` rows and where the next one is."""
    fields = {
        "count": serializers.IntegerField(min_value=0, help_text="Rows in the whole listing, every page."),
        "next": serializers.URLField(allow_null=True, help_text="The next page, or null on the last one."),
        "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null on the first."),
        "results": item(many=True),
    }
    return type(name, (serializers.Serializer,), fields)


def listed(
    request: Request,
    rows: QuerySet,
    serializer: type[serializers.Serializer],
    query: type[ListQuery] = ListQuery,
    context: dict[str, Any] | None = None,
) -> Response:
    """200 with one page of ``rows`` (ordered by the caller), narrowed by the query's filters, or 400 ``invalid``
    naming a bad parameter. ``rows`` must already hold only what the caller may see."""
    # a plain dict, not the QueryDict: DRF reads an empty value of a QueryDict as "not given" ("?limit=" would be
    # the default page), and the description says an empty value is no integer and no choice
    checked = query(data=request.query_params.dict())
    if not checked.is_valid():
        return invalid_arguments(checked.errors)
    filters = {
        name: value for name, value in checked.validated_data.items() if name not in PAGING and value is not None
    }
    paginator = Pagination()
    page = paginator.paginate_queryset(rows.filter(**filters), request)
    return paginator.get_paginated_response(
        serializer(page, many=True, context={"request": request, **(context or {})}).data
    )
