"""What the admin's campaign pages show, in words: the campaign's settings as labelled rows (defaults filled in and
marked), its model by name (a path on the server says how that machine is laid out and means nothing to a
reader: ``infra.local_paths.local_name``), and the comments its workers left on their HITs, in one list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from annotation.models import CAMPAIGN_DEFAULTS, Assignment, Campaign, rater_name
from annotation.quality.workers import batch_pass_marks
from infra.local_paths import local_name

# what each setting means, in the words the dashboard and the quality-control page use
SETTING_LABELS = {
    "min_judgments_per_worker": "judgments a worker gives before theirs count",
    "redundancy": "different workers per candidate",
    "attention_pass_mark": "score an attention copy needs to pass",
    "max_attention_failure_rate": "share of failed checks that disqualifies a worker",
    "min_attention_checks": "checks a worker does before that share counts",
    "min_degraded_checks": "degraded copies a worker judges before they are tested",
    "degraded_p_max": "p above which a worker's degraded copies count as not scored lower",
    "min_agreement_items": "real candidates a worker scores, that others scored too, before their agreement is tested",
    "agreement_p_max": "p above which a worker's scores count as not following the other workers'",
    "system_names": "system names in reports",
    "source_format": "imported from",
}


def setting_value(value: Any) -> str:
    """One setting's value as a reader writes it: rates as percentages, mappings as ``key: value`` pairs."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float) and 0 < value < 1:
        return f"{value:.0%}" if round(value * 100, 6).is_integer() else str(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {setting_value(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_value(v) for v in value) or "-"
    return str(local_name(value))


def campaign_settings_rows(campaign: Campaign) -> list[tuple[str, str, str]]:
    """(what it means, value, ``default`` or ``default: X``) for every default setting, then the others."""
    given = campaign.settings or {}
    rows = []
    for key in [*CAMPAIGN_DEFAULTS, *(k for k in given if k not in CAMPAIGN_DEFAULTS)]:
        default = CAMPAIGN_DEFAULTS.get(key)
        value = default if given.get(key) is None else given[key]
        if key not in CAMPAIGN_DEFAULTS:
            note = ""
        elif value == default:
            note = "default"
        else:
            note = f"default: {setting_value(default)}"
        shown = setting_value(value)
        if key == "attention_pass_mark":
            shown = batches_pass_mark(campaign, shown)
        rows.append((SETTING_LABELS.get(key, key.replace("_", " ")), shown, note))
    return rows


def batches_pass_mark(campaign: Campaign, campaign_mark: str) -> str:
    """The pass mark as the checks were scored: each batch's own (``annotation.quality.workers.batch_pass_marks``),
    then the campaign's, which only imported judgments and batches made before the setting use. A campaign
    page saying 100 while every batch checks at 85 misleads whoever reads the disqualifications."""
    marks = batch_pass_marks(campaign.batches.values_list("pk", flat=True))
    if not marks:
        return campaign_mark
    by_mark: dict[int, list[int]] = {}
    for pk, mark in sorted(marks.items()):
        by_mark.setdefault(mark, []).append(pk)
    batches = "; ".join(
        f"{mark} in batch{'es' if len(pks) > 1 else ''} {', '.join(str(pk) for pk in pks)}"
        for mark, pks in sorted(by_mark.items())
    )
    return f"{batches} (each batch's own); {campaign_mark} for imported judgments and batches without their own"


def campaign_model_name(campaign: Campaign) -> str | None:
    """The model that decoded the campaign's sample, by name (a hub id, a folder from the project root, or a
    folder's name), or None for a campaign of imported judgments."""
    model = ((campaign.job.params or {}) if campaign.job_id else {}).get("model")
    return local_name(model) if model else None


def campaign_description(campaign: Campaign) -> str:
    """The description, with the model's server path (written there by older versions) replaced by its name."""
    text = campaign.description or ""
    model = ((campaign.job.params or {}) if campaign.job_id else {}).get("model")
    return text.replace(model, str(local_name(model))) if model else text


@dataclass(frozen=True)
class WorkerComment:
    assignment: Assignment
    rater: str
    batch_id: int | None
    reference: str
    submitted_at: datetime | None
    text: str


def campaign_comments(campaign: Campaign) -> list[WorkerComment]:
    """Every non-empty comment a worker left on the campaign's HITs, newest first."""
    found = (
        Assignment.objects.filter(campaign=campaign)
        .exclude(comment="")
        .select_related("worker__user", "hit__reference")
        .order_by("-submitted_at", "-pk")
    )
    return [
        WorkerComment(
            assignment=a,
            rater=rater_name(
                provider=a.worker.provider,
                external_id=a.worker.external_id,
                username=a.worker.user.username if a.worker.user else None,
            ),
            batch_id=a.hit.batch_id if a.hit else None,
            reference=a.hit.reference.text if a.hit and a.hit.reference_id else "",
            submitted_at=a.submitted_at,
            text=a.comment,
        )
        for a in found
    ]
