"""Fixed-window hit counters in the database: every web process (and machine) shares them.

``hit(key, window_s)`` counts one hit of ``key`` and returns the count in the key's current window,
this hit included, and when that window ends. A window starts with the first hit after the previous
one ended and lasts ``window_s`` seconds. Counting is one statement, an atomic upsert (``INSERT ... ON
CONFLICT (key) DO UPDATE SET n = n + 1 ... RETURNING``; PostgreSQL, SQLite >= 3.35), so concurrent
hits from any number of processes each get a distinct count and a limit of N admits exactly N hits
per window. Ended windows are deleted now and then by a hit (``PURGE_CHANCE``) or by ``purge_expired()``.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router

from .models import Counter

PURGE_CHANCE = 0.01  # share of hits that also delete the ended windows (one indexed DELETE)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])[a-z]*\s*$", re.IGNORECASE)


class Hit(NamedTuple):
    count: int  # hits in the window so far, this one included
    retry_after: int  # whole seconds (at least 1) until the window ends: a Retry-After value


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` -> (30, 60): at most 30 hits per 60 s. Also ``"20/10m"``, ``"5/s"``, ``"1000/day"``."""
    match = _RATE.match(str(rate))
    if not match:
        raise ImproperlyConfigured(f"bad rate {rate!r}: write N/PERIOD, e.g. 30/min, 100/hour, 20/10m")
    count, multiple, unit = match.groups()
    return int(count), int(multiple or 1) * _UNITS[unit.lower()]


def _stored_key(key: str, window_s: int) -> str:
    """The counter's row key: as given when it is short printable ASCII, else a digest. Keys carry what a
    client sent (a worker id), and a NUL byte or other control character is no text PostgreSQL stores."""
    stored = f"{key}/{window_s}"
    if len(stored) > 255 or not (stored.isascii() and stored.isprintable()):
        digest = hashlib.sha256(stored.encode("utf-8", "surrogatepass")).hexdigest()
        safe = "".join(ch if ch.isascii() and ch.isprintable() else "?" for ch in stored[:180])
        stored = f"{safe}#sha256:{digest}"
    return stored


def hit(key: str, window_s: int) -> Hit:
    """Count a hit of ``key`` in its current ``window_s``-second window (a new one if none is running)."""
    if window_s < 1:
        raise ValueError(f"window_s must be at least 1 second, not {window_s}")
    now_ms = int(time.time() * 1000)
    connection = connections[router.db_for_write(Counter)]
    quote = connection.ops.quote_name
    table = quote(Counter._meta.db_table)
    key_col, end_col, n_col = (quote(Counter._meta.get_field(f).column) for f in ("key", "resets_at_ms", "n"))
    # Every SET expression reads the row as it was: an ended window starts again at 1 with a new end.
    sql = (
        f"INSERT INTO {table} ({key_col}, {end_col}, {n_col}) VALUES (%s, %s, 1) "
        f"ON CONFLICT ({key_col}) DO UPDATE SET "
        f"{n_col} = CASE WHEN {table}.{end_col} <= %s THEN 1 ELSE {table}.{n_col} + 1 END, "
        f"{end_col} = CASE WHEN {table}.{end_col} <= %s THEN excluded.{end_col} ELSE {table}.{end_col} END "
        f"RETURNING {n_col}, {end_col}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_stored_key(key, window_s), now_ms + window_s * 1000, now_ms, now_ms])
        count, resets_at_ms = cursor.fetchone()
    if random.random() < PURGE_CHANCE:
        purge_expired()
    return Hit(count=count, retry_after=max(1, math.ceil((resets_at_ms - now_ms) / 1000)))


def hit_count(key: str, window_s: int) -> int:
    """Count a hit of ``key``; the number of hits in its current window, this one included."""
    return hit(key, window_s).count


def over_limit(key: str, rate: str) -> int | None:
    """Count a hit of ``key`` against ``rate`` (``"30/min"``): None while within it, else the seconds until
    its window ends (a Retry-After value). The one check every limit (API throttles, logins) makes."""
    limit, window_s = parse_rate(rate)
    counted = hit(key, window_s)
    return None if counted.count <= limit else counted.retry_after


def purge_expired() -> int:
    """Delete the counters whose window has ended; the number deleted."""
    deleted, _ = Counter.objects.filter(resets_at_ms__lte=int(time.time() * 1000)).delete()
    return deleted
