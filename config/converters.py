"""``<id:name>`` in URL patterns: a database id, 0 to 2**63-1 in ASCII digits.

Django's ``<int:...>`` matches any run of digits, so ``/hits/9223372036854775808/`` reached the view and
crashed the database driver (a 64-bit integer overflow, a 500). ``<id:...>`` refuses what no row can have:
an id past the 64-bit range does not match, and the request ends in a plain 404 like any other
unknown URL. Every urls.py imports this module (which registers the converter) and names ids with it.
"""

from __future__ import annotations

from django.urls import register_converter

MAX_ID = 2**63 - 1  # PostgreSQL bigint / SQLite INTEGER


class IdConverter:
    regex = "[0-9]{1,19}"  # ASCII digits only (a regex ``\d`` would take any Unicode digit)

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ID:
            raise ValueError(f"id {value} is out of range")  # a ValueError means "no match": 404
        return number

    def to_url(self, value) -> str:
        return str(int(value))


register_converter(IdConverter, "id")
