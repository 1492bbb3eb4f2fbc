"""Numbers typed into query strings and forms: ASCII digits only, in range, or a clear ``ValueError``.

Python's ``int()`` and ``float()`` take far more than a researcher types: ``int("١٢")`` (Arabic-Indic
digits) is 12, ``float("١٢")`` is 12.0, ``"²".isdigit()`` is True yet ``int("²")`` raises, and
``float("nan")`` / ``float("1e999")`` are not numbers a page can use. A page parsing a parameter by hand
uses these instead, turns the ``ValueError`` into a 400 or a form error, and never reaches a 500.
"""

from __future__ import annotations

import math
import re

MAX_INT = 2**63 - 1  # the database's 64-bit integer range

_INT = re.compile(r"[+-]?[0-9]{1,19}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")


def ascii_int(text: str, *, name: str, minimum: int | None = None, maximum: int = MAX_INT) -> int:
    """``text`` (surrounding spaces allowed) as an int in [minimum, maximum]; ``ValueError`` naming ``name``."""
    value = str(text).strip()
    lowest = -MAX_INT if minimum is None else minimum
    if _INT.fullmatch(value):
        number = int(value)
        if lowest <= number <= maximum:
            return number
    whole = "a whole number" if minimum is None else f"a whole number >= {minimum}"
    raise ValueError(f"{name} must be {whole} written in digits 0-9 (at most {maximum}), not {value!r}")


def ascii_float(text: str, *, name: str) -> float:
    """``text`` as a finite float written in ASCII (``12``, ``-0.5``, ``1e3``); ``ValueError`` naming ``name``."""
    value = str(text).strip()
    if _FLOAT.fullmatch(value):
        number = float(value)
        if math.isfinite(number):
            return number
    raise ValueError(f"{name} must be a number written in digits 0-9 (e.g. 1.5), not {value!r}")
