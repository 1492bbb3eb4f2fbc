"""What a batch is on MTurk, before any call: its HIT settings with their defaults (``batch_mturk_config``),
the worker qualifications they ask for, and the ExternalQuestion that frames our HIT page. Pure translation of
``Batch.settings`` into MTurk's request shapes, apart from the gateway (``gateway``) that sends them."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from django.conf import settings

from annotation.batch_settings import BatchSettingsError, batch_settings_clean

from .fees import MTurkConfigurationError, usd_amount

if TYPE_CHECKING:
    from annotation.models import Batch, Hit

# MTurk's system qualification types
QUAL_APPROVAL_RATE = "000000000000000000L0"  # PercentAssignmentsApproved
QUAL_APPROVED_HITS = "00000000000000000040"  # NumberHITsApproved
QUAL_LOCALE = "00000000000000000071"  # Worker_Locale


EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
)

# Batch.settings keys this provider reads (top level), with their defaults in ``batch_mturk_config``.
BATCH_SETTING_KEYS = (
    "reward_usd",
    "assignment_duration_s",
    "auto_approval_delay_s",
    "lifetime_s",
    "title",
    "description",
    "keywords",
    "min_approval_rate",
    "min_approved_hits",
    "locales",
    "frame_height",
    "public_url",
)


def batch_mturk_config(batch: Batch, *, sandbox: bool) -> dict:
    """The batch's HIT settings with the defaults filled in (a sandbox asks for no approved-HIT count,
    since sandbox workers -- the researcher testing -- have none)."""
    defaults = {
        "reward_usd": settings.MTURK_REWARD_USD,
        "assignment_duration_s": settings.MTURK_ASSIGNMENT_DURATION_S,
        "auto_approval_delay_s": settings.MTURK_AUTO_APPROVAL_DELAY_S,
        "lifetime_s": settings.MTURK_LIFETIME_S,
        "title": "Rate how well sentences paraphrase a reference sentence",
        "description": (
            "Read a sentence and five rewrites of it; move a slider to say how close in meaning each "
            "rewrite is, and whether it is fluent English."
        ),
        "keywords": "paraphrase, similarity, sentence, rating, slider, English",
        "min_approval_rate": settings.MTURK_MIN_APPROVAL_RATE,
        "min_approved_hits": 0 if sandbox else settings.MTURK_MIN_APPROVED_HITS,
        "locales": list(settings.MTURK_LOCALES),
        "frame_height": 0,  # 0: MTurk sizes the frame to the worker's window (phones included)
        "public_url": settings.PARAFORGE_PUBLIC_URL,
    }
    try:
        given = batch_settings_clean(batch.settings or {})  # the same check as when the batch was made
    except BatchSettingsError as exc:
        raise MTurkConfigurationError(f"batch {batch.pk}: {exc}") from exc
    config = {key: default if given.get(key) is None else given[key] for key, default in defaults.items()}
    config["reward_usd"] = usd_amount(config["reward_usd"])
    for key in (
        "assignment_duration_s",
        "auto_approval_delay_s",
        "lifetime_s",
        "min_approval_rate",
        "min_approved_hits",
        "frame_height",
    ):
        config[key] = int(config[key])
    if isinstance(config["locales"], str):
        config["locales"] = [c.strip() for c in config["locales"].split(",") if c.strip()]
    return config


def external_question_xml(url: str, *, frame_height: int) -> str:
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{escape(url)}</ExternalURL><FrameHeight>{int(frame_height)}</FrameHeight>"
        "</ExternalQuestion>"
    )


def hit_page_url(public_url: str, hit: Hit) -> str:
    return f"{public_url.rstrip('/')}/hits/{hit.pk}/"


def qualification_requirements(config: dict, *, block_qualification_id: str) -> list[dict]:
    guard = "DiscoverPreviewAndAccept"
    reqs = []
    if config["min_approval_rate"] > 0:
        reqs.append(
            {
                "QualificationTypeId": QUAL_APPROVAL_RATE,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [config["min_approval_rate"]],
                "ActionsGuarded": guard,
            }
        )
    if config["min_approved_hits"] > 0:
        reqs.append(
            {
                "QualificationTypeId": QUAL_APPROVED_HITS,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [config["min_approved_hits"]],
                "ActionsGuarded": guard,
            }
        )
    locales = [{"Country": c.upper()} for c in config["locales"]]
    if len(locales) == 1:
        reqs.append(
            {
                "QualificationTypeId": QUAL_LOCALE,
                "Comparator": "EqualTo",
                "LocaleValues": locales,
                "ActionsGuarded": guard,
            }
        )
    elif locales:
        reqs.append(
            {"QualificationTypeId": QUAL_LOCALE, "Comparator": "In", "LocaleValues": locales, "ActionsGuarded": guard}
        )
    reqs.append({"QualificationTypeId": block_qualification_id, "Comparator": "DoesNotExist", "ActionsGuarded": guard})
    return reqs
