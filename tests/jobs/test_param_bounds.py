"""Issue 46 (3): every number a job takes is bounded where it is declared. The walk finds the parameters classes
itself (every dataclass of the apps declaring a field with ``jobs.params.param`` metadata), so a class or a
field added later without a range fails here; and the range is one rule read by the command, the forms and
the class's own check."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from pathlib import Path

import pytest

from jobs.forms import form_fields
from jobs.params import ParamsError, add_arguments, check_bounds, field_bounds, field_kind, field_param, param

ROOT = Path(__file__).resolve().parents[2]
APPS = ("annotation", "api", "bench", "generation", "infra", "jobs", "scoring")


def params_classes() -> list[type]:
    """Every dataclass defined in an app module whose source declares ``metadata=param(`` fields."""
    found: dict[str, type] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or "param(" not in path.read_text(encoding="utf-8"):
                continue
            module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
            for obj in vars(module).values():
                if (
                    isinstance(obj, type)
                    and dataclasses.is_dataclass(obj)
                    and obj.__module__ == module.__name__
                    and any("param" in f.metadata for f in dataclasses.fields(obj))
                ):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


def is_number(field: dataclasses.Field) -> bool:
    """A field holding numbers: an int or float, or a list of ints typed as text (``lengths``, ``systems``)."""
    meta = field_param(field)
    if meta["flatten"] or meta["choices"] or field_kind(field) is bool:
        return False
    text = field.type if isinstance(field.type, str) else str(field.type)
    return field_kind(field) in (int, float) or "int" in text.replace("|", " ").split("[")[-1]


def test_the_walk_finds_the_parameters_classes():
    names = {cls.__name__ for cls in params_classes()}
    assert {"GenerateParams", "DecodeOptions", "DiverseOptions", "BatchParams", "ScoreResourceParams"} <= names


def test_every_numeric_field_of_every_parameters_class_has_a_range():
    unbounded = [
        f"{cls.__module__}.{cls.__name__}.{field.name}"
        for cls in params_classes()
        for field in dataclasses.fields(cls)
        if "param" in field.metadata and is_number(field) and None in field_bounds(field)
    ]
    assert unbounded == [], "numeric settings without minimum= and maximum= in their param(): " + ", ".join(unbounded)


@dataclasses.dataclass(frozen=True)
class Throttled:
    """A parameters class as an app declares one: its range in the metadata, its own check reading it."""

    pause: float = dataclasses.field(default=0.0, metadata=param(help="seconds", minimum=0, maximum=60))
    sizes: tuple[int, ...] = dataclasses.field(default=(5,), metadata=param(kind=str, minimum=1, maximum=40))

    def __post_init__(self) -> None:
        check_bounds(self)


def test_one_declared_range_is_read_by_the_class_the_command_and_the_form():
    with pytest.raises(ParamsError, match=r"^pause must be between 0 and 60, not 1000000000.0$") as caught:
        Throttled(pause=1e9)
    assert caught.value.option_message.startswith("--pause must be between 0 and 60")
    with pytest.raises(ParamsError, match=r"sizes must be between 1 and 40, not 41"):
        Throttled(sizes=(5, 41))
    assert Throttled(pause=60, sizes=(1, 40)).pause == 60

    parser = argparse.ArgumentParser()
    add_arguments(parser, Throttled)
    assert "between 0 and 60" in parser.format_help()

    field = form_fields(Throttled)["pause"]
    assert (field.min_value, field.max_value) == (0, 60)
    with pytest.raises(Exception, match="less than or equal to 60"):
        field.clean("61")
