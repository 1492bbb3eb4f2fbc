"""JSON fields that take only their own JSON type, for every API input serializer.

DRF's fields are lenient: an ``IntegerField`` takes "50", 50.0 and true, a ``FloatField`` takes "0.2", a
``BooleanField`` takes "yes" and 1, a ``CharField`` takes 5. The API description says "integer",
"number", "boolean", "string", and a client that sends another type has a bug it should hear about (the
schemathesis run sends such values and expects them refused)."""

from __future__ import annotations

from rest_framework import serializers


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: "50", 50.0 and true are refused."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number only (an integer is a number): "0.2" and true are refused."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false only: "yes", 1 and "true" are refused."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string only: 5 and true are refused."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
