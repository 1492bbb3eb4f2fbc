"""Django form fields built from a job kind's parameters class (``jobs.params``): the admin's forms and the API's
serializers made from them offer each setting with the help, initial value and range its field declares, so a
setting added to the class appears on the form without another edit."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from django import forms

from api.forms import AsciiFloatField, AsciiIntegerField

from .params import field_bounds, field_default, field_kind, field_param, settings_fields


def form_fields(cls: type, *, only: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """Django form fields for the settings the forms offer (``form=True``), keyed by field name, in
    declaration order: numbers written in ASCII digits (``api.forms``), choices as a select, flags as a
    check box; each optional unless it has no default. Initial values are the class's defaults."""
    out: dict[str, Any] = {}
    for field in settings_fields(cls, only, exclude):
        meta = field_param(field)
        if not meta["form"]:
            continue
        default = field_default(field)
        kind = field_kind(field)
        options: dict[str, Any] = {"help_text": meta["help"], "required": default is dataclasses.MISSING}
        if default not in (None, dataclasses.MISSING):
            options["initial"] = default
        minimum, maximum = field_bounds(field)
        if kind in (int, float) and not meta["choices"]:
            options.update({k: v for k, v in (("min_value", minimum), ("max_value", maximum)) if v is not None})
        options.update(meta["form_options"])
        if kind is bool:
            options["required"] = False
            out[field.name] = forms.BooleanField(**options)
        elif meta["choices"]:
            out[field.name] = forms.ChoiceField(choices=[(c, c) for c in meta["choices"]], **options)
        elif kind is int:
            out[field.name] = AsciiIntegerField(**options)
        elif kind is float:
            out[field.name] = AsciiFloatField(**options)
        else:
            out[field.name] = forms.CharField(**options)
    return out
