"""Worker quality (ParaBank §5.3): attention checks, disqualification, the figures the admin shows.

An attention check is a judgment of a reference's own copy (system ``"0"``, or a candidate whose text
is the reference); it passes when the slider reached the campaign's ``attention_pass_mark`` (default
100, as in the paper; an N/A slider fails). A worker who has seen at least ``min_attention_checks``
checks in a campaign and failed more than ``max_attention_failure_rate`` of them is disqualified:
their judgments stay stored, aggregation leaves them out (``Worker.disqualified``), the local provider
bars their account and MTurk associates the block qualification (``provider.disqualify``).

Only verified judgments feed these rules (``Judgment.objects.counted()``): a forged crowd submission
under a real worker's id can never disqualify them (``annotation.verification``).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections import defaultdict

from django.db.models import F, Q
from django.utils import timezone

from .models import ATTENTION_SYSTEM, Assignment, Campaign, Judgment, Provider, Worker

log = logging.getLogger(__name__)

ATTENTION_Q = Q(candidate__systems__system=ATTENTION_SYSTEM) | Q(candidate__text=F("candidate__reference__text"))


@dataclasses.dataclass
class WorkerQuality:
    worker_id: int
    judgments: int = 0
    attention_passed: int = 0
    attention_failed: int = 0
    seconds_per_hit: float | None = None
    agreement: float | None = None  # Pearson r of the worker's scores with other workers' mean, per candidate

    @property
    def attention_checks(self) -> int:
        return self.attention_passed + self.attention_failed

    @property
    def failure_rate(self) -> float | None:
        return self.attention_failed / self.attention_checks if self.attention_checks else None


def attention_passed(score: int | None, pass_mark: int) -> bool:
    return score is not None and score >= pass_mark


def _attention_counts(judgments, pass_marks: dict[int, int]) -> tuple[int, int]:
    passed = failed = 0
    rows = (judgments.filter(ATTENTION_Q).distinct()
            .values_list("pk", "score", "candidate__reference__campaign_id"))
    for _, score, campaign_id in rows:
        if attention_passed(score, pass_marks[campaign_id]):
            passed += 1
        else:
            failed += 1
    return passed, failed


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _agreement(worker: Worker, judgments) -> float | None:
    mine = dict(judgments.filter(score__isnull=False).values_list("candidate_id", "score"))
    if not mine:
        return None
    others: dict[int, list[int]] = defaultdict(list)
    for cid, score in (Judgment.objects.counted().filter(candidate_id__in=list(mine), score__isnull=False)
                       .exclude(worker=worker).values_list("candidate_id", "score")):
        others[cid].append(score)
    pairs = [(mine[c], statistics.fmean(v)) for c, v in others.items()]
    return _pearson([p[0] for p in pairs], [p[1] for p in pairs])


def _seconds_per_hit(worker: Worker, campaign: Campaign | None) -> float | None:
    assignments = Assignment.objects.counted().filter(worker=worker, accepted_at__isnull=False,
                                                      submitted_at__isnull=False)
    if campaign is not None:
        assignments = assignments.filter(campaign=campaign)
    spans = [(s - a).total_seconds() for a, s in assignments.values_list("accepted_at", "submitted_at")]
    spans = [s for s in spans if s >= 0]
    return statistics.median(spans) if spans else None


def worker_quality(*, worker: Worker, campaign: Campaign | None = None, figures: bool = True) -> WorkerQuality:
    """The worker's figures in one campaign (or across all: each check against its campaign's pass mark).

    ``figures=False`` leaves out time per HIT and agreement (not needed by the disqualification rule)."""
    judgments = Judgment.objects.counted().filter(worker=worker)
    if campaign is not None:
        judgments = judgments.filter(candidate__reference__campaign=campaign)
        pass_marks = {campaign.pk: int(campaign.setting("attention_pass_mark"))}
    else:
        pass_marks = {c.pk: int(c.setting("attention_pass_mark")) for c in Campaign.objects.filter(
            pk__in=judgments.values("candidate__reference__campaign_id"))}
    passed, failed = _attention_counts(judgments, pass_marks)
    quality = WorkerQuality(worker_id=worker.pk, judgments=judgments.count(), attention_passed=passed,
                            attention_failed=failed)
    if figures:
        quality.seconds_per_hit = _seconds_per_hit(worker, campaign)
        quality.agreement = _agreement(worker, judgments)
    return quality


def disqualification_reason(*, quality: WorkerQuality, campaign: Campaign) -> str | None:
    """Why the campaign's rule disqualifies this worker, or None."""
    min_checks = int(campaign.setting("min_attention_checks"))
    max_rate = float(campaign.setting("max_attention_failure_rate"))
    rate = quality.failure_rate
    if quality.attention_checks < min_checks or rate is None or rate <= max_rate:
        return None
    return (f"failed {quality.attention_failed} of {quality.attention_checks} attention checks in campaign "
            f"{campaign.name!r} ({rate:.0%} > {max_rate:.0%})")


def _provider_of(worker: Worker):
    from .providers import get_provider

    if worker.provider == Provider.IMPORT:
        return None
    last = (Assignment.objects.filter(worker=worker, hit__isnull=False).select_related("hit__batch")
            .order_by("-id").first())
    return get_provider(last.hit.batch if last is not None else worker.provider)


def worker_disqualify(*, worker: Worker, reason: str) -> Worker:
    """Mark the worker disqualified (kept judgments are excluded from aggregates), then tell the provider.

    The database flag is what counts: a provider failure (e.g. MTurk unreachable) is logged, not raised,
    so that the submission that triggered it is not lost; the admin action can repeat it."""
    Worker.objects.filter(pk=worker.pk).update(disqualified=True, disqualified_reason=reason,
                                               disqualified_at=timezone.now())
    worker.refresh_from_db()
    try:
        provider = _provider_of(worker)
        if provider is not None:
            provider.disqualify(worker=worker, reason=reason)
    except Exception:  # noqa: BLE001 - the flag is stored; the provider call can be repeated from the admin
        log.exception("the provider could not disqualify worker %s", worker)
    return worker


def worker_reinstate(*, worker: Worker) -> Worker:
    Worker.objects.filter(pk=worker.pk).update(disqualified=False, disqualified_reason="", disqualified_at=None)
    worker.refresh_from_db()
    provider = _provider_of(worker)
    if provider is not None:
        provider.reinstate(worker=worker)
    return worker


def worker_quality_apply(*, worker: Worker, campaign: Campaign) -> str | None:
    """Evaluate the rule after a submission; disqualifies and returns the reason when it triggers."""
    if worker.disqualified:
        return None
    quality = worker_quality(worker=worker, campaign=campaign, figures=False)
    reason = disqualification_reason(quality=quality, campaign=campaign)
    if reason:
        worker_disqualify(worker=worker, reason=reason)
    return reason
