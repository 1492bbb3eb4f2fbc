"""The schema of ``Batch.settings`` and its one check, shared by every path that makes or uses a batch:
``hit_batch_create`` (the CLI and the admin), the MTurk provider's ``batch_mturk_config`` and the EASL
rounds' ``easl_config``.

``Batch.settings`` holds what the researcher chose, and nothing else (what a provider learns lives in
``Batch.provider_state``). Every key is in ``SCHEMA`` with its type; an unknown key is refused with the
list of known ones, so a misspelt setting never silently does nothing.

A value of ``None`` (or a key left out) means the default. Integers may be given as JSON integers or
integer strings ("1800"); the cleaned settings hold plain ints, so nothing downstream has to convert.
Ranges are MTurk's own where MTurk has one (an assignment lasts 30 s to 365 days, auto-approval within
30 days, a HIT lives 30 s to 365 days); the local provider uses the same assignment duration range.
No module here imports Django models, so providers can use it freely.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

# key: (minimum, maximum or None, unit shown in messages)
INT_SETTINGS: dict[str, tuple[int, int | None, str]] = {
    "assignment_duration_s": (30, 31_536_000, "seconds"),
    "auto_approval_delay_s": (0, 2_592_000, "seconds"),
    "lifetime_s": (30, 31_536_000, "seconds"),
    "min_approval_rate": (0, 100, "percent"),  # MTurk and Prolific
    "min_approved_hits": (0, None, "HITs"),
    "frame_height": (0, None, "pixels"),
    # Prolific: a study's session is hits_per_session HITs in a row; its times are in minutes
    "hits_per_session": (1, 1000, "HITs"),
    "estimated_minutes": (1, 1440, "minutes"),
    "max_minutes": (1, 1440, "minutes"),
    "min_approved_submissions": (0, None, "submissions"),
}
EASL_INT_SETTINGS: dict[str, tuple[int, int | None, str]] = {
    "items_per_hit": (2, None, "candidates"),
    "judgment_budget": (1, None, "judgments"),
    "hits_per_round": (1, None, "HITs"),
    "assignments_per_hit": (1, None, "assignments"),
}
# shares of a batch's HITs that get a quality-control item (the attention copy, a degraded copy): 0 to 1
RATE_SETTINGS = ("attention_rate", "degraded_rate")
# key: (minimum, whether the minimum itself is allowed)
EASL_FLOAT_SETTINGS: dict[str, tuple[float, bool]] = {
    "g": (0.0, False),
    "variance_threshold": (0.0, True),
}


TEXT_SETTINGS = ("title", "description", "keywords", "public_url")
LIST_SETTINGS = ("locales", "countries", "first_languages")
FLAG_SETTINGS = ("sandbox", "slider_must_move", "drop_non_words")
MODES = ("fixed", "easl")
# key -> what it holds (the schema; numbers also have their ranges above)
SCHEMA: dict[str, str] = {
    "reward_usd": "the reward per assignment in US dollars (MTurk)",
    "reward_per_session": 'the reward per session in the Prolific account\'s currency, e.g. "1.50" (Prolific)',
    **{key: f"a whole number of {unit}" for key, (_, _, unit) in INT_SETTINGS.items()},
    "attention_rate": "the share of HITs with an attention copy (0-1)",
    "degraded_rate": "the share of HITs with a degraded copy (0-1)",
    "title": "the HIT's or study's title (MTurk, Prolific)",
    "description": "the HIT's or study's description (MTurk, Prolific)",
    "keywords": "the HIT's keywords (MTurk)",
    "public_url": "the https address of the slider pages (MTurk, Prolific)",
    "locales": "countries workers must be in (MTurk): a list or comma-separated",
    "countries": "countries of residence participants must be in, as Prolific names them (Prolific)",
    "first_languages": "participants' first languages, as Prolific names them (Prolific)",
    "sandbox": "true on MTurk's requester sandbox",
    "slider_must_move": "true (the default): a worker moves or clicks every slider before Submit, so an untouched "
    "slider is never stored as a judgment; false: ParaBank's page (sliders start at 50 and count as set)",
    "mode": "fixed (R workers per HIT) or easl (rounds)",
    "easl": "EASL options (a JSON object)",
    "drop_non_words": "false keeps candidates with non-words in the HITs, as ParaBank did (default true: left out)",
    # recorded by hit_batch_create: how the batch was made
    "per_length": "references per length bucket",
    "lengths": "the length buckets",
    "assignments": "workers per HIT (R)",
    "seed": "the sampling seed",
    "hit_size": "candidates per HIT",
    "non_words": "the candidates left out for non-words: how many, a few examples, the vocabulary checked against",
}


class BatchSettingsError(ValueError):
    """A batch setting of the wrong type or out of range; the message names the key."""


def _int_setting(key: str, value: Any, lo: int, hi: int | None, unit: str) -> int:
    number = None
    if isinstance(value, bool):
        pass  # JSON true/false is not a number
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise BatchSettingsError(f"batch setting {key!r}: expected a whole number of {unit}, got {value!r}")
    if number < lo or (hi is not None and number > hi):
        bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise BatchSettingsError(f"batch setting {key!r}: {number} is out of range (must be {bounds})")
    return number


def _float_setting(key: str, value: Any, lo: float, inclusive: bool) -> float:
    number = None
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise BatchSettingsError(f"batch setting {key!r}: expected a number, got {value!r}")
    if number < lo or (number == lo and not inclusive):
        bound = f"at least {lo}" if inclusive else f"more than {lo}"
        raise BatchSettingsError(f"batch setting {key!r}: {number} is out of range (must be {bound})")
    return number


def rate_check(key: str, value: Any) -> float:
    """A share of HITs between 0 and 1 (a JSON number or a numeric string); the message names the key."""
    number = _float_setting(key, value, -math.inf, True)
    if not 0.0 <= number <= 1.0:
        raise BatchSettingsError(f"batch setting {key!r}: {number} is out of range (must be between 0 and 1)")
    return number


def setting_list(value: Any) -> list[str]:
    """A list setting's values (given as a list or comma-separated text), stripped, empty ones dropped."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(item).strip() for item in items if str(item).strip()]


def reward_usd_check(value: Any, *, key: str = "reward_usd") -> Decimal:
    """A reward in US dollars (a number or a decimal string, at least 0); the message names the key."""
    amount = None
    if not isinstance(value, bool) and isinstance(value, (int, float, str, Decimal)):
        try:
            amount = Decimal(str(value).strip())
        except (InvalidOperation, ValueError):
            amount = None
    if amount is None or not amount.is_finite():
        raise BatchSettingsError(
            f'batch setting {key!r}: expected an amount in US dollars such as "0.50", got {value!r}'
        )
    if amount < 0:
        raise BatchSettingsError(f"batch setting {key!r}: {value!r} is negative")
    return amount


def easl_settings_clean(given: Any) -> dict:
    """``Batch.settings["easl"]`` checked (type and range of every number); returns a cleaned copy."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise BatchSettingsError(f"batch setting 'easl': expected a JSON object of EASL options, got {given!r}")
    cleaned = dict(given)
    for key, (lo, hi, unit) in EASL_INT_SETTINGS.items():
        if cleaned.get(key) is not None:
            cleaned[key] = _int_setting(f"easl.{key}", cleaned[key], lo, hi, unit)
    for key, (lo, inclusive) in EASL_FLOAT_SETTINGS.items():
        if cleaned.get(key) is not None:
            cleaned[key] = _float_setting(f"easl.{key}", cleaned[key], lo, inclusive)
    return cleaned


def batch_settings_clean(settings: Any) -> dict:
    """Check every numeric batch setting (type and range) and return a cleaned copy (integers as ints).

    Raises ``BatchSettingsError`` naming the first bad key; the settings are never half-applied."""
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise BatchSettingsError(f"batch settings must be a JSON object, got {settings!r}")
    unknown = sorted(set(settings) - set(SCHEMA))
    if unknown:
        raise BatchSettingsError(
            f"unknown batch setting(s) {', '.join(map(repr, unknown))}: the settings are {', '.join(SCHEMA)}"
        )
    cleaned = dict(settings)
    for key in TEXT_SETTINGS:
        if cleaned.get(key) is not None and not isinstance(cleaned[key], str):
            raise BatchSettingsError(f"batch setting {key!r}: expected text, got {cleaned[key]!r}")
    for key in FLAG_SETTINGS:
        if cleaned.get(key) is not None and not isinstance(cleaned[key], bool):
            raise BatchSettingsError(f"batch setting {key!r}: expected true or false, got {cleaned[key]!r}")
    if cleaned.get("mode") is not None and cleaned["mode"] not in MODES:
        raise BatchSettingsError(f"batch setting 'mode': {cleaned['mode']!r} is not one of {', '.join(MODES)}")
    for key in LIST_SETTINGS:
        values = cleaned.get(key)
        if values is not None and not (
            isinstance(values, str) or (isinstance(values, list) and all(isinstance(c, str) for c in values))
        ):
            what = "country codes" if key == "locales" else "names as Prolific writes them"
            raise BatchSettingsError(
                f"batch setting {key!r}: expected {what} (a list or comma-separated text), got {values!r}"
            )
    if cleaned.get("reward_usd") is not None:
        reward_usd_check(cleaned["reward_usd"])
    if cleaned.get("reward_per_session") is not None:
        reward_usd_check(cleaned["reward_per_session"], key="reward_per_session")
    for key, (lo, hi, unit) in INT_SETTINGS.items():
        if cleaned.get(key) is not None:
            cleaned[key] = _int_setting(key, cleaned[key], lo, hi, unit)
    for key in RATE_SETTINGS:
        if cleaned.get(key) is not None:
            cleaned[key] = rate_check(key, cleaned[key])
    if "easl" in cleaned:
        cleaned["easl"] = easl_settings_clean(cleaned["easl"])
    return cleaned
