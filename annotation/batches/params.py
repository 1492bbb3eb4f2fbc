"""A HIT batch's making as one frozen parameters class (``jobs.params``): what ``hit_batch_create`` takes.

Why: the same dozen settings were written four times (``create_hit_batch``'s options, the admin's batch form,
the API's body, ``hit_batch_create``'s keywords) with their checks spread over them. :class:`BatchParams` is
the one list: ``create_hit_batch`` builds its options from it (``jobs.params.add_arguments``), the admin's
batch form its fields (``jobs.forms.form_fields``), and the admin, the API and the command all hand
``hit_batch_create`` one checked object. Its checks run when it is made, whoever makes it, and raise
:class:`BatchError` with the messages the command has always printed (``--per-length must be at least 1``).

What a batch setting *is* (``Batch.settings``' keys, their types and ranges) stays in
``annotation.batch_settings``; the ``settings`` field is checked there (``batch_settings_clean``), the label by
its ``batch_label_check``. The API's serializer keeps its own fields (its error JSON names them), over the
same names (``tests/annotation/test_batch_params.py`` holds them together).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings as django_settings

from annotation.batch_settings import LABEL_RULE, MAX_LABEL, BatchSettingsError, batch_label_check, batch_settings_clean
from annotation.models import LENGTH_BUCKETS
from api.numbers import MAX_INT
from jobs.params import ParamsError, check_bounds, int_at_least, param

PROVIDER_NAMES = ("local", "mturk-sandbox", "mturk", "prolific")
HIT_SIZE = 5
DEFAULT_DEGRADED_RATE = 0.1


class BatchError(ParamsError):
    """Arguments that cannot make a batch (the message says why)."""


def provider_name_check(provider: str) -> str:
    """``provider`` if a batch can be made on it (``PROVIDER_NAMES``), else a ``BatchError`` listing them."""
    if provider not in PROVIDER_NAMES:
        raise BatchError(f"unknown provider {provider!r}: choose one of {', '.join(PROVIDER_NAMES)}")
    return provider


def _rate(value: Any) -> bool:
    """A share (0 to 1) given as a number (a JSON true is not one)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0.0 <= value <= 1.0


@dataclasses.dataclass(frozen=True)
class BatchParams:
    """How to make one batch of a campaign (see ``annotation.batches.making`` for what each does).

    ``degraded_rate`` None means the ``settings``' ``degraded_rate``, else ``DEFAULT_DEGRADED_RATE``; made, the
    object holds the share that applies. ``settings`` are the batch settings (``annotation.batch_settings``),
    held cleaned."""

    # the command's --provider is its own: its default is a setting (PARAFORGE_HIT_PROVIDER), the form's too
    provider: str = dataclasses.field(
        metadata=param(
            choices=PROVIDER_NAMES, cli=False, form_options={"initial": lambda: django_settings.PARAFORGE_HIT_PROVIDER}
        )
    )
    per_length: int = dataclasses.field(
        default=100,
        # (a campaign pays for every item: 100,000 references a bucket is past any budget a study has)
        metadata=param(
            help="references per length bucket", form_options={"required": True}, minimum=1, maximum=100_000
        ),
    )
    lengths: tuple[int, ...] = dataclasses.field(
        default=LENGTH_BUCKETS,
        metadata=param(
            help="length buckets, comma-separated",
            kind=str,
            form_options={"required": True, "initial": ",".join(map(str, LENGTH_BUCKETS))},
            minimum=1,
            maximum=1000,
        ),
    )
    assignments: int = dataclasses.field(
        default=3,
        metadata=param(help="different workers per HIT (R)", form_options={"required": True}, minimum=1, maximum=100),
    )
    attention_rate: float = dataclasses.field(
        default=0.1,
        metadata=param(
            help="share of HITs with an attention check",
            form_options={"required": True},
            minimum=0,
            maximum=1,
        ),
    )
    degraded_rate: float | None = dataclasses.field(
        default=None,
        metadata=param(
            help="share of HITs with a degraded check (a damaged copy of a candidate)",
            form_options={"required": True, "initial": DEFAULT_DEGRADED_RATE},
            minimum=0,
            maximum=1,
        ),
    )
    seed: int = dataclasses.field(
        default=0, metadata=param(form_options={"required": True}, minimum=-MAX_INT, maximum=MAX_INT)
    )
    baseline: str | None = dataclasses.field(
        default=None,
        metadata=param(help="TSV of baseline outputs (ref_id, candidate[, sys_id]) to add first", form=False),
    )
    baseline_system: str = dataclasses.field(
        default="35", metadata=param(help="system id of --baseline rows without sys_id", form=False)
    )
    label: str = dataclasses.field(default="", metadata=param(help=LABEL_RULE, form_options={"max_length": MAX_LABEL}))
    settings: dict = dataclasses.field(
        default_factory=dict,
        metadata=param(help="the batch settings (annotation.batch_settings)", cli=False, form=False),
    )
    hit_size: int = dataclasses.field(
        default=HIT_SIZE, metadata=param(help="candidates per HIT", cli=False, form=False, minimum=2, maximum=100)
    )

    def __post_init__(self) -> None:
        # the order of hit_batch_create's checks before this class: the settings, the label, the rates ...
        try:
            settings = batch_settings_clean(self.settings)
            label = batch_label_check(self.label)
        except BatchSettingsError as exc:
            raise BatchError(str(exc)) from None
        given = settings.get("degraded_rate")
        degraded_rate = self.degraded_rate
        if degraded_rate is not None and given is not None and float(degraded_rate) != given:
            raise BatchError(
                f"--degraded-rate {degraded_rate} and batch setting 'degraded_rate' {given} disagree: give one"
            )
        if degraded_rate is None:
            degraded_rate = DEFAULT_DEGRADED_RATE if given is None else given
        if not _rate(degraded_rate):
            raise BatchError("--degraded-rate must be between 0 and 1")
        if self.per_length < 1:
            raise BatchError("--per-length must be at least 1")
        if self.assignments < 1:
            raise BatchError("--assignments must be at least 1")
        if not 0.0 <= self.attention_rate <= 1.0:
            raise BatchError("--attention-rate must be between 0 and 1")
        if self.hit_size < 2:
            raise BatchError("a HIT needs at least 2 candidates")
        lengths = tuple(int_at_least("lengths", x, 1, error=BatchError) for x in self.lengths)  # digits 0-9 only
        if not lengths:
            raise BatchError("no length buckets given")
        provider_name_check(self.provider)
        for name, value in (
            ("settings", settings),
            ("label", label),
            ("degraded_rate", float(degraded_rate)),
            ("lengths", lengths),
        ):
            object.__setattr__(self, name, value)
        check_bounds(self, error=BatchError)
