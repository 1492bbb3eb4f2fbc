from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The pieces every HTTP API of the project shares: the strict JSON parser (``parsers``), one error shape
    (``errors``: every error ``{"detail", "code"}``), the OpenAPI schema class and error responses
    (``openapi``), JSON fields of one type (``fields``), the admin's permissions as API permissions
    (``permissions``), ASCII-digit numbers from query strings and forms (``numbers``) and spreadsheet-safe CSV
    files (``csv_safety``). The apps' own APIs (annotation, jobs, scoring) build on them; this app imports none
    of theirs."""

    name = "api"
