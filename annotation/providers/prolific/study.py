"""A batch's Prolific study, without talking to Prolific: its settings with their defaults, its two completion
codes, its studies (one per EASL round), the study's external URL, and how a session's assignments are named.
``gateway`` (the API calls) and ``sessions`` (a participant's way through the HITs) both read them here."""

from __future__ import annotations

import math
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import DurationField, ExpressionWrapper, F

from annotation.batch_settings import BatchSettingsError, batch_settings_clean, reward_usd_check, setting_list
from annotation.quality.workers import median_seconds

from ..common import provider_state, provider_state_save
from ..errors import ProviderConfigurationError, ProviderError

if TYPE_CHECKING:
    from annotation.models import Assignment, Batch, Campaign

# Prolific's submission statuses: finished (identity and work confirmed), still running, withdrawn
FINISHED = {"AWAITING REVIEW", "APPROVED", "REJECTED"}
RUNNING = {"ACTIVE", "RESERVED", "PROCESSING"}


def start_url(public_url: str, batch_id: int) -> str:
    """The study's external URL with Prolific's placeholders."""
    return (
        f"{public_url}/prolific/{batch_id}/start/"
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )


def completion_url(code: str) -> str:
    return f"https://app.prolific.com/submissions/complete?cc={code}"


def session_id(external_assignment_id: str) -> str:
    """A Prolific assignment is named ``<session id>:<hit id>:<nonce>`` (``sessions.session_next``)."""
    return external_assignment_id.split(":", 1)[0]


def session_of(assignment: Assignment) -> str:
    return session_id(assignment.external_assignment_id)


def session_assignments(assignment: Assignment):
    """Every assignment of the session ``assignment`` belongs to (Prolific pays and rejects per session)."""
    from annotation.models import Assignment

    return Assignment.objects.filter(
        hit__batch_id=assignment.hit.batch_id,
        worker=assignment.worker,
        external_assignment_id__startswith=f"{session_of(assignment)}:",
    )


def suggested_minutes(*, hits_per_session: int, seconds_per_hit: float | None = None) -> int:
    """A session's estimated time: ``seconds_per_hit`` (the measured ``median_seconds_per_hit``), else
    ``PROLIFIC_SECONDS_PER_HIT``, never under ``PROLIFIC_MIN_SECONDS_PER_HIT``, times the session's HITs, in
    whole minutes rounded up (an estimate that is too short underpays: Prolific pays by the estimate)."""
    per_hit = max(float(seconds_per_hit or settings.PROLIFIC_SECONDS_PER_HIT), settings.PROLIFIC_MIN_SECONDS_PER_HIT)
    return max(1, math.ceil(per_hit * hits_per_session / 60 - 1e-9))


def median_seconds_per_hit(*, campaign: Campaign | None = None) -> float | None:
    """The median time from taking to submitting a HIT over the latest 5,000 HIT assignments that show a human's
    pace: verified (quality's rule, ``annotation.quality.workers.median_seconds``: not unverified, not flagged), done on
    a HIT here (not imported), by a worker who is not disqualified, and not faster than
    ``PROLIFIC_MIN_SECONDS_PER_HIT`` (no careful human is: a script, or someone who did not read). ``campaign``:
    only its assignments. None when none qualifies."""
    from annotation.models import Assignment, Provider

    took = ExpressionWrapper(F("submitted_at") - F("accepted_at"), output_field=DurationField())
    assignments = (
        Assignment.objects.filter(
            hit__isnull=False, worker__disqualified=False, accepted_at__isnull=False, submitted_at__isnull=False
        )
        .exclude(provider=Provider.IMPORT)
        .annotate(took=took)
        .filter(took__gte=timedelta(seconds=settings.PROLIFIC_MIN_SECONDS_PER_HIT))
    )
    if campaign is not None:
        assignments = assignments.filter(campaign=campaign)
    return median_seconds(assignments.order_by("-id"), limit=5000)


def session_size_fit(batch_settings: dict, *, hits: int) -> dict:
    """A fixed batch's settings with ``hits_per_session`` (given, else ``PROLIFIC_HITS_PER_SESSION``) no larger
    than the batch's ``hits``: a participant does each HIT at most once, so a 10-HIT session of a 9-HIT batch
    could never be done as the study describes it. An EASL batch (its rounds' sizes vary) is left as given."""
    if batch_settings.get("mode") == "easl" or hits < 1:
        return batch_settings
    asked = int(batch_settings.get("hits_per_session") or settings.PROLIFIC_HITS_PER_SESSION)
    return batch_settings if asked <= hits else {**batch_settings, "hits_per_session": hits}


def batch_prolific_config(batch_settings: dict) -> dict:
    """The study's settings with the defaults filled in (``PROLIFIC_*`` Django settings)."""
    try:
        given = batch_settings_clean(batch_settings or {})
    except BatchSettingsError as exc:
        raise ProviderConfigurationError(str(exc)) from exc

    def pick(key, default):
        return default if given.get(key) is None else given[key]

    hits_per_session = int(pick("hits_per_session", settings.PROLIFIC_HITS_PER_SESSION))
    estimated = given.get("estimated_minutes") or suggested_minutes(hits_per_session=hits_per_session)
    return {
        "title": pick("title", "Rate how well sentences paraphrase a reference sentence"),
        "description": pick(
            "description",
            (
                "Read a sentence and five rewrites of it; move a slider to say how close in meaning each rewrite is, "
                f"and whether it is fluent English. You will do {hits_per_session} such pages in a row."
            ),
        ),
        "reward_per_session": reward_usd_check(
            pick("reward_per_session", settings.PROLIFIC_REWARD_PER_SESSION), key="reward_per_session"
        ),
        "hits_per_session": hits_per_session,
        "estimated_minutes": int(estimated),
        "max_minutes": int(given.get("max_minutes") or max(4 * int(estimated), 60)),
        "min_approval_rate": int(pick("min_approval_rate", settings.PROLIFIC_MIN_APPROVAL_RATE)),
        "min_approved_submissions": int(pick("min_approved_submissions", settings.PROLIFIC_MIN_APPROVED_SUBMISSIONS)),
        "first_languages": setting_list(pick("first_languages", settings.PROLIFIC_FIRST_LANGUAGES)),
        "countries": setting_list(pick("countries", settings.PROLIFIC_COUNTRIES)),
        "public_url": pick("public_url", settings.PARAFORGE_PUBLIC_URL),
    }


def study_codes(batch: Batch) -> dict:
    """The batch's provider state with the study's two completion codes, made once (before the study is
    created, so that a retried creation uses the same ones; or when a participant first arrives)."""
    state = provider_state(batch)
    if state.get("completion_code") and state.get("failed_code"):
        return state
    return provider_state_save(
        batch, completion_code=f"C{secrets.token_hex(4).upper()}", failed_code=f"F{secrets.token_hex(4).upper()}"
    )


def prolific_batch_required(batch: Batch) -> None:
    if batch.provider != "prolific":
        raise ProviderError(f"batch {batch.pk} is on provider {batch.provider!r}, not prolific")


def batch_studies(batch: Batch) -> dict[int, str]:
    """The batch's studies by EASL round (a fixed batch has round 0 only): {round: Prolific study id}."""
    return {int(r): sid for r, sid in (provider_state(batch).get("studies") or {}).items()}


def studies_required(batch: Batch) -> dict[int, str]:
    studies = batch_studies(batch)
    if not studies:
        raise ProviderError(
            f"batch {batch.pk} has no Prolific study yet: publish it first "
            f"(`python manage.py crowd publish {batch.pk}`)"
        )
    return studies
