"""How the CLIs find a corpus, an IDF table or a resource: by its name, else by its primary key."""

from __future__ import annotations

from typing import TypeVar

from django.db import models

from api.numbers import ascii_int

M = TypeVar("M", bound=models.Model)


def named_or_numbered(model: type[M], name_or_id) -> M | None:
    """The row of ``model`` named ``name_or_id``, else the one with that primary key; None if neither.
    (The name wins: a corpus may be called "3" while another has id 3.)"""
    value = str(name_or_id)
    found = model.objects.filter(name=value).first()
    if found is None:
        try:  # "²".isdigit() is True and int("²") raises; int() of 4,301 digits raises too
            pk = ascii_int(value, name="an id", minimum=1)
        except ValueError:
            return None
        found = model.objects.filter(pk=pk).first()
    return found
