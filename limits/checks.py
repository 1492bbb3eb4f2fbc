from django.core.checks import Error
from django.db import connections


def counter_database_check(app_configs=None, **kwargs):
    """The counters' atomic upsert needs PostgreSQL or SQLite >= 3.35 (INSERT ... ON CONFLICT ... RETURNING)."""
    connection = connections["default"]
    if connection.vendor == "postgresql":
        return []
    if connection.vendor == "sqlite":
        import sqlite3

        if tuple(int(p) for p in sqlite3.sqlite_version.split(".")[:2]) >= (3, 35):
            return []
        return [
            Error(
                f"SQLite {sqlite3.sqlite_version} is too old for the rate-limit counters (3.35 or newer needed)",
                id="limits.E001",
            )
        ]
    return [Error(f"the rate-limit counters support PostgreSQL and SQLite, not {connection.vendor}", id="limits.E002")]
