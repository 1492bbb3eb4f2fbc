"""Number fields for the admin's forms: digits 0-9 only (``api.numbers``).

Django's ``IntegerField`` and ``FloatField`` parse with ``int()`` and ``float()``, which take
``"١٢"`` (Arabic-Indic digits) as 12, and ``int()`` takes ``"1_000"``; these take what a researcher types
in ASCII and give a clear form error for anything else."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from django import forms
from django.core.exceptions import ValidationError

from api.numbers import MAX_INT, ascii_float, is_ascii_decimal, is_ascii_int


class _AsciiDigits:
    """``to_python`` for a field whose text must pass ``written`` (``api.numbers``) before ``convert`` reads
    it; the range is the field's validators' (their message names the bound)."""

    written: Callable[[str], bool]
    convert: type

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, self.convert) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        if not self.written(text):
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return self.convert(text)


class AsciiIntegerField(_AsciiDigits, forms.IntegerField):
    """An ``IntegerField`` written in digits 0-9 (an optional sign); the range is the field's own
    ``min_value`` / ``max_value``."""

    written, convert = staticmethod(is_ascii_int), int
    default_error_messages = {"invalid": "Enter a whole number written in digits 0-9."}

    def __init__(self, *, max_value=MAX_INT, min_value=-MAX_INT, **kwargs):  # the database's 64-bit range
        super().__init__(max_value=max_value, min_value=min_value, **kwargs)


class AsciiDecimalField(_AsciiDigits, forms.DecimalField):
    """A ``DecimalField`` written in digits 0-9 (``Decimal("١٢")`` is 12 too); places and range as the field's."""

    written, convert = staticmethod(is_ascii_decimal), Decimal
    default_error_messages = {"invalid": "Enter an amount written in digits 0-9 (e.g. 1.50)."}


class AsciiFloatField(forms.FloatField):
    """A ``FloatField`` written in digits 0-9 (``0.2``, ``-1.5``, ``1e3``); NaN and infinities refused."""

    default_error_messages = {"invalid": "Enter a number written in digits 0-9 (e.g. 0.2)."}

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return ascii_float(str(value), name="value")
        except ValueError:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None
