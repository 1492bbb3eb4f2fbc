"""Numbers typed into query strings and forms: ASCII digits only, in range, or a clear ``ValueError``.

Python's ``int()`` and ``float()`` take far more than a researcher types: ``int("١٢")`` (Arabic-Indic
digits) is 12, ``float("١٢")`` is 12.0, ``"²".isdigit()`` is True yet ``int("²")`` raises, and
``float("nan")`` / ``float("1e999")`` are not numbers a page can use. A page parsing a parameter by hand
uses these instead, turns the ``ValueError`` into a 400 or a form error, and never reaches a 500.
"""

from __future__ import annotations

import argparse
import math
import re
from decimal import Decimal

MAX_INT = 2**63 - 1  # the database's 64-bit integer range
SHOWN_CHARS = 40  # of a refused value, the message repeats this many characters (a 5,000-digit value is not echoed)

_INT = re.compile(r"[+-]?[0-9]{1,19}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})")
_FORM_INT = re.compile(r"[+-]?[0-9]{1,40}")  # a form field's validators then say its range


def shown(value: object) -> str:
    """``value`` as an error message repeats it: its ``repr``, cut to ``SHOWN_CHARS`` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(str(value))} characters)"


def ascii_int(text: str, *, name: str, minimum: int | None = None, maximum: int = MAX_INT) -> int:
    """``text`` (surrounding spaces allowed) as an int in [minimum, maximum]; ``ValueError`` naming ``name``."""
    value = str(text).strip()
    lowest = -MAX_INT if minimum is None else minimum
    if _INT.fullmatch(value):
        number = int(value)
        if lowest <= number <= maximum:
            return number
    whole = "a whole number" if minimum is None else f"a whole number >= {minimum}"
    raise ValueError(f"{name} must be {whole} written in digits 0-9 (at most {maximum}), not {shown(value)}")


def ascii_float(text: str, *, name: str) -> float:
    """``text`` as a finite float written in ASCII (``12``, ``-0.5``, ``1e3``); ``ValueError`` naming ``name``."""
    value = str(text).strip()
    if _FLOAT.fullmatch(value):
        number = float(value)
        if math.isfinite(number):
            return number
    raise ValueError(f"{name} must be a number written in digits 0-9 (e.g. 1.5), not {shown(value)}")


def ascii_decimal(text: str, *, name: str) -> Decimal:
    """``text`` as an amount written in ASCII (``1.50``, at most 20 digits each side of the point); ``Decimal``
    takes ``"١٢"`` and ``"1_0"`` too. ``ValueError`` naming ``name``."""
    value = str(text).strip()
    if _DECIMAL.fullmatch(value):
        return Decimal(value)
    raise ValueError(f"{name} must be an amount written in digits 0-9 (e.g. 1.50), not {shown(value)}")


def is_ascii_int(text: str) -> bool:
    """Whether ``text`` is a whole number written in digits 0-9 (an optional sign), of at most 40 digits: the
    check of a form field whose own validators then say the range."""
    return _FORM_INT.fullmatch(str(text).strip()) is not None


def is_ascii_decimal(text: str) -> bool:
    """Whether ``text`` is an amount ``ascii_decimal`` takes."""
    return _DECIMAL.fullmatch(str(text).strip()) is not None


def cli_int(text: str) -> int:
    """An ``argparse`` type for a whole-number option: ``type=int`` takes ``١٢`` and ``1_000``."""
    try:
        return ascii_int(text, name="the value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cli_decimal(text: str) -> Decimal:
    """An ``argparse`` type for an amount of money (``0.25``): ``Decimal`` takes ``١٢`` and ``1_0``."""
    try:
        return ascii_decimal(text, name="the amount")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cli_float(text: str) -> float:
    """An ``argparse`` type for a number option: ``type=float`` takes ``١٢``, ``1_0``, ``nan`` and ``inf``."""
    try:
        return ascii_float(text, name="the value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
