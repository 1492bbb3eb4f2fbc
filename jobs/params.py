"""A job kind's parameters as one frozen dataclass, from which everything else is built.

Why: a setting used to be written five times (the command's ``add_argument``, a list of names to store, a
many-keyword checking function, its rebuild in the plan, the command's call), and the copies drifted. Here a
setting is one field; its :func:`param` metadata says how a person types it. From the class come:

* the command's options (:func:`add_arguments`: ``batch_size`` is ``--batch-size``, ASCII numbers only),
* the admin's and the API's form fields (``jobs.forms.form_fields``, apart: this module imports no Django),
* the JSON a job stores (:func:`to_json`: fields in declaration order; ``stored="if_set"`` leaves a None
  out and ``stored="non_default"`` a default out, so jobs stored before a setting existed read the same),
* the worker's reading of stored JSON (:func:`from_values`: absent or None keys keep the default, which is
  how a job of an older shape still runs; unknown keys are ignored, they belong to the job, not the settings).

A field whose type is itself such a dataclass and whose metadata says ``flatten=True`` (``DecodeOptions``
inside the generate job's params) contributes its own fields to the options, the JSON and the reading, at the
top level, as jobs have always stored them. Such a group may be optional: default None, ``kind`` its class
(``DiverseOptions``, a mode's settings): :func:`from_values` builds it from the mapping all the same (the
owner's ``__post_init__`` decides whether it applies, and sets None where it does not), and :func:`to_json`
stores none of its fields while it is None.

Checks stay in each class's ``__post_init__``: a value that cannot work is refused when the object is made,
whoever makes it. :func:`int_at_least`, :func:`finite` and :func:`true_false_or_unset` are the number checks
every params class shares, raising a :class:`ParamsError` (or the class's subclass of it) that names the
setting as stored (``batch_size``) and, in :attr:`ParamsError.option_message`, as the command spells it
(``--batch-size``). This module imports neither torch, nor Django, nor any domain app: the Django-free
decoder's options use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from api.numbers import cli_float, cli_int, is_ascii_int

T = TypeVar("T")
STORED_RULES = ("always", "if_set", "non_default")


class ParamsError(ValueError):
    """A setting that cannot work. ``str()`` names fields as stored and as keywords (``batch_size``),
    :attr:`option_message` as the commands' options (``--batch-size``); :attr:`field` is the setting it is
    about (the first :func:`fail` names), for a form to show it there."""

    def __init__(self, message: str, option_message: str | None = None, *, field: str | None = None) -> None:
        super().__init__(message)
        self.option_message = option_message or message
        self.field = field  # the setting it is about, as stored (a form shows the message under it); None: several


def option_flag(field: str) -> str:
    """``batch_size`` -> ``--batch-size``: a field's command-line option."""
    return "--" + field.replace("_", "-")


def fail(template: str, *fields: str, error: type[ParamsError] = ParamsError, **values: Any) -> ParamsError:
    """An ``error`` whose message is ``template`` with ``{0}``, ``{1}`` ... standing for the fields' names,
    said both ways (as stored, and as options)."""
    return error(
        template.format(*fields, **values),
        template.format(*(option_flag(f) for f in fields), **values),
        field=fields[0] if fields else None,
    )


def int_at_least(field: str, value: Any, minimum: int, why: str = "", *, error: type[ParamsError] = ParamsError) -> int:
    """``value`` as an int of at least ``minimum`` (``why`` is added to the message of one below it)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise fail("{0} must be an integer, not {value!r}", field, error=error, value=value)
    if isinstance(value, str) and not is_ascii_int(value):  # int() takes "١٥", "１５" and "1_5": a setting does not
        raise fail("{0} must be an integer written in digits 0-9, not {value!r}", field, error=error, value=value)
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise fail("{0} must be an integer, not {value!r}", field, error=error, value=value) from None
    if n < minimum:
        raise fail("{0} must be at least {minimum}, not {n}" + why, field, error=error, minimum=minimum, n=n)
    return n


def finite(field: str, value: Any, *, error: type[ParamsError] = ParamsError) -> float:
    """``value`` as a float that JSON (a job's params) can hold: NaN and infinities are refused."""
    if isinstance(value, bool):
        raise fail("{0} must be a number, not {value!r}", field, error=error, value=value)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise fail("{0} must be a number, not {value!r}", field, error=error, value=value) from None
    if not math.isfinite(x):
        raise fail("{0} must be a finite number, not {value!r}", field, error=error, value=value)
    return x


def true_false_or_unset(field: str, value: Any, *, error: type[ParamsError] = ParamsError) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise fail("{0} must be true, false or unset, not {value!r}", field, error=error, value=value)


def param(
    *,
    help: str = "",
    cli: bool = True,
    form: bool = True,
    stored: str = "always",
    kind: type | None = None,
    choices: Iterable[str] | None = None,
    flatten: bool = False,
    metavar: str | None = None,
    form_options: Mapping[str, Any] | None = None,
    nargs: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    """A field's ``metadata``: ``help`` (the option's and the form field's), ``cli`` / ``form`` (whether the
    command / the forms offer it), ``stored`` (``always``, ``if_set``: not when None, ``non_default``: not when
    the default), ``kind`` (int, float, str or bool when the annotation does not say it plainly), ``choices``,
    ``flatten`` (a nested params dataclass whose fields sit at the top level), ``metavar``,
    ``form_options`` (keywords for the form field: ``min_value``, ``max_value``, ``initial`` ...), and ``nargs``
    (the option's, e.g. ``"+"`` for several words, which the class's ``__post_init__`` then joins).
    ``minimum`` / ``maximum``: a number's range, the one place it is declared: the command's option, the form
    field and :func:`check_bounds` (every surface, the worker's reading included) read it from here.
    ``scope``: which reader of the class the field belongs to, in the class's own words (the decoder's options:
    beam search's, shared, a process's knob): the lists of such fields are derived from it
    (:func:`fields_in_scope`), never written beside the class."""
    if stored not in STORED_RULES:
        raise ValueError(f"stored must be one of {STORED_RULES}, not {stored!r}")
    return {
        "param": {
            "help": help,
            "cli": cli,
            "form": form,
            "stored": stored,
            "kind": kind,
            "choices": tuple(choices) if choices is not None else None,
            "flatten": flatten,
            "metavar": metavar,
            "form_options": dict(form_options or {}),
            "nargs": nargs,
            "minimum": minimum,
            "maximum": maximum,
            "scope": scope,
        }
    }


def field_param(field: dataclasses.Field) -> dict[str, Any]:
    """A field's :func:`param` metadata (the defaults for a field declared without one)."""
    return field.metadata.get("param") or param()["param"]


def fields_in_scope(cls: type, *scopes: str) -> tuple[str, ...]:
    """The names of ``cls``' fields (a params dataclass, not flattened) whose ``scope`` is one of ``scopes``, in
    declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if field_param(f)["scope"] in scopes)


def field_bounds(field: dataclasses.Field) -> tuple[float | None, float | None]:
    """A field's declared ``(minimum, maximum)`` (None: that side unbounded)."""
    meta = field_param(field)
    return meta.get("minimum"), meta.get("maximum")


def bounds_text(field: str, minimum: float | None, maximum: float | None) -> str:
    """The rule of a field's range in words (``{0} must be between 1 and 64``), ``{0}`` standing for its name."""
    if minimum is not None and maximum is not None:
        return f"{{0}} must be between {minimum} and {maximum}"
    if maximum is not None:
        return f"{{0}} must be at most {maximum}"
    return f"{{0}} must be at least {minimum}"


def check_bounds(obj: Any, *, error: type[ParamsError] = ParamsError) -> None:
    """Refuse a number of ``obj`` (a params dataclass; its own fields, not a flattened group's, which checks
    itself) outside its field's declared range, naming the limit. Why here: the CLI, the admin, the API and a
    worker reading a stored job all build the class, so one check holds for every way a job is asked for."""
    for field in dataclasses.fields(obj):
        minimum, maximum = field_bounds(field)
        value = getattr(obj, field.name)
        if value is None or isinstance(value, bool) or (minimum is None and maximum is None):
            continue
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if not isinstance(item, (int, float)):
                continue
            if (minimum is not None and item < minimum) or (maximum is not None and item > maximum):
                raise fail(
                    bounds_text(field.name, minimum, maximum) + ", not {value!r}", field.name, error=error, value=item
                )


def field_default(field: dataclasses.Field) -> Any:
    """A field's default value (``dataclasses.MISSING`` when it has none)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def field_kind(field: dataclasses.Field) -> type:
    """The field's value type: its ``kind``, else read from the annotation (``int | None`` is int)."""
    declared = field_param(field)["kind"]
    if declared is not None:
        return declared
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    for name, kind in (("bool", bool), ("int", int), ("float", float)):
        if name in [part.strip() for part in text.replace("|", ",").split(",")]:
            return kind
    return str


def _flattened(cls: type) -> Iterator[tuple[dataclasses.Field, type | None]]:
    """``(field, nested class or None)`` for each field, nested ones expanded in place."""
    for field in dataclasses.fields(cls):
        meta = field_param(field)
        if meta["flatten"]:
            nested = field_default(field)
            unset = nested is dataclasses.MISSING or nested is None
            nested_cls = meta["kind"] or (None if unset else type(nested))
            if nested_cls is None:
                raise TypeError(f"{cls.__name__}.{field.name}: a flattened field needs a default (or a kind)")
            yield field, nested_cls
        else:
            yield field, None


def field_names(cls: type) -> list[str]:
    """The settings' names as stored and as keywords, nested ones included, in declaration order (a name a
    nested group shares with its owner, one value for both, once)."""
    names: list[str] = []
    for field, nested in _flattened(cls):
        names += field_names(nested) if nested else [field.name]
    return list(dict.fromkeys(names))


def settings_fields(
    cls: type, only: Iterable[str] | None = None, exclude: Iterable[str] = ()
) -> Iterator[dataclasses.Field]:
    """The fields of ``cls``'s settings, nested ones expanded in place, filtered by ``only`` / ``exclude``."""
    wanted = set(only) if only is not None else None
    skipped = set(exclude)
    for field, nested in _flattened(cls):
        if nested is not None:
            yield from settings_fields(nested, only, exclude)
        elif field.name not in skipped and (wanted is None or field.name in wanted):
            yield field


def add_arguments(
    parser, cls: type, *, only: Iterable[str] | None = None, exclude: Iterable[str] = (), **help_overrides: str
) -> None:
    """One option per field the command offers (``cli=True``), named ``--field-name``. Defaults are None
    (a flag: absent), so :func:`from_values` keeps the class's own default for a setting not given; the
    help says what that default is. ``help_overrides``: a field's help for this command."""
    for field in settings_fields(cls, only, exclude):
        meta = field_param(field)
        if not meta["cli"]:
            continue
        help_text = help_overrides.get(field.name, meta["help"])
        default = field_default(field)
        kind = field_kind(field)
        if kind is bool:
            action = "store_false" if default is True else "store_true"
            parser.add_argument(option_flag(field.name), action=action, default=None, dest=field.name, help=help_text)
            continue
        if default not in (None, dataclasses.MISSING, "", ()) and help_text and "default" not in help_text:
            help_text = f"{help_text} (default {default})"
        options: dict[str, Any] = {"default": None, "dest": field.name, "help": help_text}
        minimum, maximum = field_bounds(field)
        if minimum is not None or maximum is not None:
            limits = bounds_text(field.name, minimum, maximum).replace("{0} must be ", "")
            help_text = f"{help_text}; {limits}" if help_text else limits
            options["help"] = help_text
        if meta["choices"]:
            options["choices"] = meta["choices"]
        elif kind is int:
            options["type"] = cli_int
        elif kind is float:
            options["type"] = cli_float
        if meta["metavar"]:
            options["metavar"] = meta["metavar"]
        if meta.get("nargs"):
            options["nargs"] = meta["nargs"]
        if default is dataclasses.MISSING:
            options["required"] = True
        parser.add_argument(option_flag(field.name), **options)


def values_for(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords that make a ``cls`` from ``values``: its fields' values (absent or None keep the default;
    nested classes built from the same mapping); other keys ignored."""
    kwargs: dict[str, Any] = {}
    for field, nested in _flattened(cls):
        if nested is not None:
            kwargs[field.name] = from_values(nested, values)
        elif values.get(field.name) is not None:
            kwargs[field.name] = values[field.name]
    return kwargs


def from_values(cls: type[T], values: Mapping[str, Any], **overrides: Any) -> T:
    """A checked ``cls`` from a mapping that holds its settings among other things under their names (a
    command's parsed options, a cleaned form, a job's stored params), with ``overrides`` on top."""
    return cls(**{**values_for(cls, values), **overrides})


def to_json(obj: Any) -> dict[str, Any]:
    """The settings as a job stores them: flat, in declaration order, each by its ``stored`` rule (tuples as
    lists)."""
    out: dict[str, Any] = {}
    for field, nested in _flattened(type(obj)):
        value = getattr(obj, field.name)
        if nested is not None:
            if value is not None:  # (an optional group that is None stores nothing)
                out.update(to_json(value))
            continue
        rule = field_param(field)["stored"]
        if rule == "if_set" and value is None:
            continue
        if rule == "non_default" and value == field_default(field):
            continue
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out
