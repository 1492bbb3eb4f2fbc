"""Worker quality (ParaBank §5.3): attention checks, disqualification, the figures the admin shows.

An attention check is a judgment of a reference's own copy (system ``"0"``, or a candidate whose text
is the reference); it passes when the slider reached its batch's ``attention_pass_mark`` (a batch
setting, default 85: a tap near 100 on a phone passes; ParaBank passed only 100; an N/A slider fails).
A batch made before the setting existed, and imported judgments, keep the campaign's ``attention_pass_mark``
(100, the paper's). A worker who has seen at least ``min_attention_checks``
checks in a campaign and failed more than ``max_attention_failure_rate`` of them is disqualified:
their judgments stay stored, aggregation leaves them out (``Worker.disqualified``), the local provider
bars their account and MTurk associates the block qualification (``provider.disqualify``).

The attention rule misses raters who give every copy 100 and anything to the rest. So HITs also carry
degraded checks (``annotation.batches.making`` and ``annotation.quality.degraded``, pseudo-system ``"degraded"``: a real
candidate of the HIT with a span replaced by another sentence's phrase, made to look like the candidates
around it): once a worker has judged at least ``min_degraded_checks`` of them, a one-sided Mann-Whitney U
test on their own scores asks whether their degraded items score lower than the real candidates they
judged (not the copies). The checks are compared with every real candidate, not only with the sources
they were made from: at the first test (5 checks) five source scores are too few (over 100 HITs, 39 of
200 simulated careful raters barred against 0 of 200, careless ones caught as often: bench/quality.py,
"Derived checks"). p above
``degraded_p_max`` disqualifies them like the attention rule. The test compares ranks within one
worker, so it needs no pass mark and is blind to a worker's offset and scale. N/A counts as the lowest
score (calling a degraded sentence nonsensical is the right call). Below the minimum the worker is
"not yet tested" (``degraded_p`` None), never passed.

A worker who can tell the checks themselves from the real candidates (a careful cheater reading whole pages,
issue 46: disguise lowers how well that works, but a gradient-boosted classifier on page features still
finds most checks, bench/quality.py) passes both rules while scoring the real candidates anyhow. So a third
rule needs no check at all: the real candidates are their own, indistinguishable by construction. Once a
worker has scored at least ``min_agreement_items`` real candidates that other (counted, not disqualified)
workers scored too, a one-sided test (Fisher's z of Pearson's r between their scores and the others' mean
per candidate) asks whether their scores rise with the others'; p above ``agreement_p_max`` disqualifies
them. A worker whose scores on those candidates never vary (100 everywhere) shows no agreement (p = 1).
On ParaBank's released judgments it bars 2 of the 37 workers it can test (r 0.06 over 33 candidates, -0.03
over 49); the rest agree at r 0.27-0.88 (bench/quality.py, "Agreement").

Only verified judgments feed these rules (``Judgment.objects.counted()``): a forged crowd submission
under a real worker's id can never disqualify them (``annotation.quality.verification``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from annotation.models import (
    CAMPAIGN_DEFAULTS,
    DEGRADED_SYSTEM,
    Assignment,
    Batch,
    Campaign,
    Candidate,
    Judgment,
    Verification,
    Worker,
    attention_copy_q,
    rater_name,
)

log = logging.getLogger(__name__)

# Sent after the flag changed, so that the worker's platform can follow (the block qualification on MTurk,
# the blocklist group on Prolific); the platforms listen, so that quality never depends on them.
worker_disqualified = Signal()  # worker, reason
worker_reinstated = Signal()  # worker

# What a worker is told when the rules bar them: never which rule, nor that there is more than the
# instructed attention check (a rater who learns of the degraded copies learns to look for them).
WORKER_BARRED_MESSAGE = (
    "Your answers did not meet this campaign's quality standards, so you can no longer take "
    "its HITs. If you think this is a mistake, contact the researcher."
)

ATTENTION_Q = attention_copy_q("candidate__")
DEGRADED_Q = Q(candidate__systems__system=DEGRADED_SYSTEM)


def real_judgments(judgments):
    """The judgments of real candidates: neither an attention copy nor a degraded one."""
    return judgments.exclude(ATTENTION_Q).exclude(DEGRADED_Q)


@dataclasses.dataclass
class WorkerQuality:
    worker_id: int
    judgments: int = 0
    attention_passed: int = 0
    attention_failed: int = 0
    seconds_per_hit: float | None = None
    agreement: float | None = None  # Pearson r of the worker's scores with other workers' mean, per real candidate
    degraded_checks: int = 0  # degraded copies judged
    real_judged: int = 0  # real candidates judged (what the degraded items are compared with)
    degraded_p: float | None = None  # the Mann-Whitney p-value; None: not yet tested (too few degraded checks)
    min_degraded_checks: int = int(CAMPAIGN_DEFAULTS["min_degraded_checks"])
    agreement_items: int = 0  # real candidates the worker scored that others scored too
    agreement_p: float | None = None  # the agreement test's p-value; None: not yet tested
    min_agreement_items: int = int(CAMPAIGN_DEFAULTS["min_agreement_items"])

    @property
    def attention_checks(self) -> int:
        return self.attention_passed + self.attention_failed

    @property
    def failure_rate(self) -> float | None:
        return self.attention_failed / self.attention_checks if self.attention_checks else None


def attention_passed(score: int | None, pass_mark: int) -> bool:
    return score is not None and score >= pass_mark


def batch_pass_marks(batch_ids: Iterable[int | None]) -> dict[int, int]:
    """The stated ``attention_pass_mark`` of each of these batches that has one (one query). A batch without
    one (made before it was a batch setting) is left out: its checks keep their campaign's pass mark."""
    ids = {pk for pk in batch_ids if pk is not None}
    rows = Batch.objects.filter(pk__in=ids).values_list("pk", "settings") if ids else []
    return {pk: int(s["attention_pass_mark"]) for pk, s in rows if (s or {}).get("attention_pass_mark") is not None}


def attention_rule_fails(passed: int, failed: int, *, min_checks: int, max_failure_rate: float) -> bool:
    """ParaBank's rule: more than ``max_failure_rate`` of at least ``min_checks`` attention checks failed."""
    checks = passed + failed
    return checks >= min_checks and checks > 0 and failed / checks > max_failure_rate


def degraded_p_value(degraded: Sequence[int | None], real: Sequence[int | None]) -> float | None:
    """One-sided Mann-Whitney U p-value of "this worker's degraded items score lower than the real candidates
    they judged" (N/A as 0). 1.0 when every score ties (a constant rater shows nothing); None when either
    list is empty."""
    low = [0 if s is None else s for s in degraded]
    high = [0 if s is None else s for s in real]
    if not low or not high:
        return None
    from scipy.stats import mannwhitneyu  # heavy (1.5 s): loaded when a worker is tested, not with the app

    p = float(mannwhitneyu(low, high, alternative="less").pvalue)
    return 1.0 if math.isnan(p) else p


def degraded_test(degraded: Sequence[int | None], real: Sequence[int | None], *, min_checks: int) -> float | None:
    """The p-value once at least ``min_checks`` degraded items (and one real candidate) were judged, else None
    ("not yet tested")."""
    if len(degraded) < max(1, min_checks):
        return None
    return degraded_p_value(degraded, real)


def degraded_rule_fails(p: float | None, *, p_max: float) -> bool:
    """The degraded rule fails a tested worker whose p-value is above ``p_max``; an untested one never."""
    return p is not None and p > p_max


def _attention_counts(judgments, pass_marks: dict[int, int]) -> tuple[int, int]:
    """(passed, failed) attention checks, each against its batch's pass mark (else its campaign's)."""
    passed = failed = 0
    rows = list(
        judgments.filter(ATTENTION_Q)
        .distinct()
        .values_list("pk", "score", "candidate__reference__campaign_id", "assignment__hit__batch_id")
    )
    stated = batch_pass_marks(row[3] for row in rows)
    for _, score, campaign_id, batch_id in rows:
        if attention_passed(score, stated.get(batch_id, pass_marks[campaign_id])):
            passed += 1
        else:
            failed += 1
    return passed, failed


def agreement_p_value(pairs: Sequence[tuple[float, float]]) -> float | None:
    """One-sided p-value that the first scores of ``pairs`` (a worker's) rise with the second (the other
    workers' mean per candidate): Fisher's z of Pearson's r, ``sqrt(n - 3) * atanh(r)`` against the normal.
    1.0 when the worker's own scores never vary (they say nothing about the candidates); None when the
    others' means never vary or there are fewer than 4 pairs (nothing to compare with)."""
    if len(pairs) < 4 or len({y for _, y in pairs}) < 2:
        return None
    if len({x for x, _ in pairs}) < 2:
        return 1.0
    r = _pearson([x for x, _ in pairs], [y for _, y in pairs])
    z = math.sqrt(len(pairs) - 3) * math.atanh(max(-0.999999, min(0.999999, r)))
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def agreement_test(pairs: Sequence[tuple[float, float]], *, min_items: int) -> float | None:
    """``agreement_p_value`` once the worker has ``min_items`` pairs, else None (not yet tested)."""
    return agreement_p_value(pairs) if len(pairs) >= min_items else None


def agreement_rule_fails(p: float | None, *, p_max: float) -> bool:
    return p is not None and p > p_max


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r, or None where it says nothing: fewer than 3 pairs, or one side constant."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import pearsonr  # heavy: loaded when used, not with the app

    return float(pearsonr(xs, ys).statistic)


def _agreement_pairs(worker: Worker, judgments) -> list[tuple[float, float]]:
    """(the worker's score, the other counted, not disqualified workers' mean) per real candidate both scored.
    Real candidates only: everyone's 100 on the copies would make any two workers look in agreement."""
    mine = dict(real_judgments(judgments).filter(score__isnull=False).values_list("candidate_id", "score"))
    if not mine:
        return []
    others: dict[int, list[int]] = defaultdict(list)
    for cid, score in (
        Judgment.objects.counted()
        .filter(candidate_id__in=list(mine), score__isnull=False, worker__disqualified=False)
        .exclude(worker=worker)
        .values_list("candidate_id", "score")
    ):
        others[cid].append(score)
    return [(float(mine[c]), statistics.fmean(v)) for c, v in others.items()]


def median_seconds(assignments, *, limit: int | None = None) -> float | None:
    """The median seconds from taking to submitting over the counted ones of ``assignments`` that have both
    times (the first ``limit`` of them in the queryset's order); None when there are none."""
    timed = assignments.filter(
        verification=Verification.VERIFIED, accepted_at__isnull=False, submitted_at__isnull=False
    ).values_list("accepted_at", "submitted_at")
    spans = [(s - a).total_seconds() for a, s in (timed if limit is None else timed[:limit])]
    spans = [s for s in spans if s >= 0]
    return statistics.median(spans) if spans else None


def _seconds_per_hit(worker: Worker, campaign: Campaign | None) -> float | None:
    assignments = Assignment.objects.filter(worker=worker)
    if campaign is not None:
        assignments = assignments.filter(campaign=campaign)
    return median_seconds(assignments)


def worker_quality(
    *, worker: Worker, campaign: Campaign | None = None, figures: bool = True, pending_assignments: Sequence[int] = ()
) -> WorkerQuality:
    """The worker's figures in one campaign (or across all: each check against its campaign's pass mark).

    ``figures=False`` leaves out time per HIT and agreement (not needed by the disqualification rule).
    ``pending_assignments``: unverified assignments to count as well (a Prolific session's own, to end it
    early; never to disqualify the worker)."""
    judgments = Judgment.objects.filter(worker=worker).filter(
        Q(assignment__verification=Verification.VERIFIED) | Q(assignment_id__in=list(pending_assignments))
    )
    if campaign is not None:
        judgments = judgments.filter(candidate__reference__campaign=campaign)
        campaigns = [campaign]
    else:
        campaigns = list(Campaign.objects.filter(pk__in=judgments.values("candidate__reference__campaign_id")))
    pass_marks = {c.pk: int(c.setting("attention_pass_mark")) for c in campaigns}
    passed, failed = _attention_counts(judgments, pass_marks)
    quality = WorkerQuality(
        worker_id=worker.pk, judgments=judgments.count(), attention_passed=passed, attention_failed=failed
    )
    # across campaigns (the admin's list) a worker counts as tested from the smallest minimum among them
    quality.min_degraded_checks = min(
        (int(c.setting("min_degraded_checks")) for c in campaigns), default=quality.min_degraded_checks
    )
    degraded = list(judgments.filter(DEGRADED_Q).distinct().values_list("pk", "score"))
    real = list(real_judgments(judgments).values_list("score", flat=True))
    quality.degraded_checks, quality.real_judged = len(degraded), len(real)
    quality.degraded_p = degraded_test([score for _, score in degraded], real, min_checks=quality.min_degraded_checks)
    quality.min_agreement_items = min(
        (int(c.setting("min_agreement_items")) for c in campaigns), default=quality.min_agreement_items
    )
    # the rule alone (after every verified submission) needs no query before the worker has judged enough
    # real candidates to be tested: the pairs are at most those candidates
    needed = figures or quality.real_judged >= quality.min_agreement_items
    pairs = _agreement_pairs(worker, judgments) if needed else []
    quality.agreement_items = len(pairs)
    quality.agreement_p = agreement_test(pairs, min_items=quality.min_agreement_items)
    if figures:
        quality.seconds_per_hit = _seconds_per_hit(worker, campaign)
        quality.agreement = _pearson([x for x, _ in pairs], [y for _, y in pairs])
    return quality


def rater_names(worker_ids: Iterable[int]) -> dict[int, str]:
    """``rater_name`` of each of these workers, in one query."""
    rows = Worker.objects.filter(pk__in=list(worker_ids)).values_list("pk", "provider", "external_id", "user__username")
    return {pk: rater_name(provider=p, external_id=e, username=u) for pk, p, e, u in rows}


def workers_quality(workers: Iterable[Worker]) -> dict[int, WorkerQuality]:
    """``worker_quality(worker=w)`` of each worker (across campaigns, with time per HIT and agreement) from a
    few queries over all their judgments at once instead of several per worker: the admin's worker list
    shows a page of them. The same rules: each attention check against its batch's pass mark, the
    degraded test from the smallest minimum among the worker's campaigns, agreement with the other workers'
    mean over the real candidates they scored (a candidate judged twice by the worker: the later judgment)."""
    ids = [w.pk for w in workers]
    quality = {pk: WorkerQuality(worker_id=pk) for pk in ids}
    # a judgment's campaign is its assignment's (the same as its candidate's, by construction), sparing joins
    rows = list(
        Judgment.objects.counted()
        .filter(worker_id__in=ids)
        .order_by("assignment_id", "id")
        .values_list("worker_id", "candidate_id", "score", "assignment__campaign_id", "assignment__hit__batch_id")
    )
    campaigns = {c.pk: c for c in Campaign.objects.filter(pk__in={row[3] for row in rows})}
    candidates = Candidate.objects.filter(reference__campaign_id__in=list(campaigns))
    attention = set(candidates.filter(attention_copy_q()).values_list("pk", flat=True))
    degraded = set(candidates.filter(systems__system=DEGRADED_SYSTEM).values_list("pk", flat=True))
    pass_marks = {pk: int(c.setting("attention_pass_mark")) for pk, c in campaigns.items()}
    stated = batch_pass_marks({row[4] for row in rows})
    min_checks = {pk: int(c.setting("min_degraded_checks")) for pk, c in campaigns.items()}
    seen: dict[int, set[int]] = defaultdict(set)  # the campaigns each worker judged in
    scores: dict[int, dict[str, list[int | None]]] = defaultdict(lambda: {"degraded": [], "real": []})
    mine: dict[int, dict[int, int]] = defaultdict(dict)  # worker -> real candidate -> score
    for worker_id, candidate_id, score, campaign_id, batch_id in rows:
        q = quality[worker_id]
        q.judgments += 1
        seen[worker_id].add(campaign_id)
        if candidate_id in attention:
            if attention_passed(score, stated.get(batch_id, pass_marks[campaign_id])):
                q.attention_passed += 1
            else:
                q.attention_failed += 1
        if candidate_id in degraded:
            scores[worker_id]["degraded"].append(score)
        elif candidate_id not in attention:
            scores[worker_id]["real"].append(score)
            if score is not None:
                mine[worker_id][candidate_id] = score
    for worker_id, q in quality.items():
        q.min_degraded_checks = min((min_checks[c] for c in seen[worker_id]), default=q.min_degraded_checks)
        low, high = scores[worker_id]["degraded"], scores[worker_id]["real"]
        q.degraded_checks, q.real_judged = len(low), len(high)
        q.degraded_p = degraded_test(low, high, min_checks=q.min_degraded_checks)
    spans: dict[int, list[float]] = defaultdict(list)
    timed = Assignment.objects.filter(
        worker_id__in=ids, verification=Verification.VERIFIED, accepted_at__isnull=False, submitted_at__isnull=False
    ).values_list("worker_id", "accepted_at", "submitted_at")
    for worker_id, accepted, submitted in timed:
        if (seconds := (submitted - accepted).total_seconds()) >= 0:
            spans[worker_id].append(seconds)
    for worker_id, values in spans.items():
        quality[worker_id].seconds_per_hit = statistics.median(values)
    for worker_id, agreement in _agreements(mine).items():
        quality[worker_id].agreement = agreement
    return quality


def _agreements(mine: dict[int, dict[int, int]]) -> dict[int, float | None]:
    """Each worker's Pearson r with the other (not disqualified) workers' mean over the real candidates they
    scored (``_agreement_pairs`` for many workers): every counted score of those candidates read once, each
    worker's own taken out."""
    total: dict[int, list[int]] = {}  # candidate -> [sum, n] over every counted worker
    own: dict[tuple[int, int], list[int]] = {}  # (candidate, worker) -> [sum, n]
    scored = {c for scores in mine.values() for c in scores}
    theirs = Judgment.objects.filter(worker_id__in=list(mine)).values("candidate_id")
    # every judgment of the candidates these workers judged (a subquery: a page of workers judged thousands),
    # its assignment's verification read rather than filtered on: SQLite then plans from the candidates
    rows = (
        Judgment.objects.filter(candidate_id__in=theirs, score__isnull=False)
        .order_by()
        .values_list("candidate_id", "worker_id", "score", "assignment__verification", "worker__disqualified")
    )
    for candidate_id, worker_id, score, verification, disqualified in rows:
        if verification != Verification.VERIFIED or candidate_id not in scored or disqualified:
            continue  # not counted, not real, or a disqualified worker's (no part of anyone's consensus)
        t = total.setdefault(candidate_id, [0, 0])
        t[0] += score
        t[1] += 1
        if worker_id in mine:
            o = own.setdefault((candidate_id, worker_id), [0, 0])
            o[0] += score
            o[1] += 1
    result = {}
    for worker_id, their_scores in mine.items():
        xs, ys = [], []
        for candidate_id, score in their_scores.items():
            s, n = total.get(candidate_id, (0, 0))
            s_own, n_own = own.get((candidate_id, worker_id), (0, 0))
            if n > n_own:
                xs.append(score)
                ys.append((s - s_own) / (n - n_own))
        result[worker_id] = _pearson(xs, ys)
    return result


@dataclasses.dataclass
class RaterFigures:
    """One worker's quality-control figures in a campaign (the dashboard's per-rater plot and table)."""

    worker_id: int
    disqualified: bool
    name: str = ""  # ``rater_name``
    judgments: int = 0
    attention_passed: int = 0
    attention_failed: int = 0
    degraded_checks: int = 0
    real_judged: int = 0
    degraded_p: float | None = None  # as ``WorkerQuality.degraded_p``: None until tested
    degraded_mean: float | None = None  # mean slider score of the degraded copies they judged (N/A as 0)
    real_mean: float | None = None  # ... and of the real candidates (N/A as 0, as the test counts it)

    @property
    def attention_checks(self) -> int:
        return self.attention_passed + self.attention_failed

    @property
    def attention_pass_rate(self) -> float | None:
        return self.attention_passed / self.attention_checks if self.attention_checks else None


def campaign_rater_figures(campaign: Campaign) -> list[RaterFigures]:
    """Every worker with counted judgments in the campaign (disqualified ones included: the figures say why),
    by worker id, with the same rules as ``worker_quality``: attention checks against their batch's pass
    mark, the degraded-copy Mann-Whitney p-value from the campaign's minimum of checks, plus the mean scores
    the test compares. One query over the campaign's judgments instead of several per worker."""
    candidates = Candidate.objects.filter(reference__campaign=campaign)
    attention = set(candidates.filter(attention_copy_q()).values_list("pk", flat=True))
    degraded = set(candidates.filter(systems__system=DEGRADED_SYSTEM).values_list("pk", flat=True))
    pass_mark, min_checks = int(campaign.setting("attention_pass_mark")), int(campaign.setting("min_degraded_checks"))
    scores: dict[int, dict[str, list[int | None]]] = defaultdict(lambda: {"degraded": [], "real": []})
    figures: dict[int, RaterFigures] = {}
    rows = (
        Judgment.objects.counted()
        .filter(candidate__reference__campaign=campaign)
        .order_by("worker_id", "pk")
        .values_list("worker_id", "worker__disqualified", "candidate_id", "score", "assignment__hit__batch_id")
    )
    stated = batch_pass_marks(campaign.batches.values_list("pk", flat=True))
    for worker_id, disqualified, candidate_id, score, batch_id in rows.iterator(chunk_size=5000):
        rater = figures.setdefault(worker_id, RaterFigures(worker_id=worker_id, disqualified=disqualified))
        rater.judgments += 1
        if candidate_id in attention:
            if attention_passed(score, stated.get(batch_id, pass_mark)):
                rater.attention_passed += 1
            else:
                rater.attention_failed += 1
        if candidate_id in degraded:
            scores[worker_id]["degraded"].append(score)
        if candidate_id not in attention and candidate_id not in degraded:
            scores[worker_id]["real"].append(score)
    for worker_id, rater in figures.items():
        low, high = scores[worker_id]["degraded"], scores[worker_id]["real"]
        rater.degraded_checks, rater.real_judged = len(low), len(high)
        rater.degraded_p = degraded_test(low, high, min_checks=min_checks)
        rater.degraded_mean = statistics.fmean([s or 0 for s in low]) if low else None
        rater.real_mean = statistics.fmean([s or 0 for s in high]) if high else None
    names = rater_names(figures)
    for worker_id, rater in figures.items():
        rater.name = names[worker_id]
    return [figures[w] for w in sorted(figures)]


def _attention_fails(quality: WorkerQuality, campaign: Campaign) -> bool:
    """ParaBank's attention rule with the campaign's thresholds."""
    return attention_rule_fails(
        quality.attention_passed,
        quality.attention_failed,
        min_checks=int(campaign.setting("min_attention_checks")),
        max_failure_rate=float(campaign.setting("max_attention_failure_rate")),
    )


def disqualification_reason(*, quality: WorkerQuality, campaign: Campaign) -> str | None:
    """Why the campaign's rules (attention copies, degraded copies, agreement) disqualify this worker, or None;
    each rule that fired is named with its figures and thresholds (the worker is told, and the admin lists it)."""
    reasons = []
    min_checks = int(campaign.setting("min_attention_checks"))
    max_rate = float(campaign.setting("max_attention_failure_rate"))
    if _attention_fails(quality, campaign):
        reasons.append(
            f"failed {quality.attention_failed} of {quality.attention_checks} attention checks in "
            f"campaign {campaign.name!r} ({quality.failure_rate:.0%} > {max_rate:.0%}; tested from "
            f"{min_checks} checks)"
        )
    p_max = float(campaign.setting("degraded_p_max"))
    if degraded_rule_fails(quality.degraded_p, p_max=p_max):
        reasons.append(
            f"degraded copies not scored lower than real candidates in campaign {campaign.name!r} "
            f"(one-sided Mann-Whitney U over {quality.degraded_checks} degraded and "
            f"{quality.real_judged} real judgments: p = {quality.degraded_p:.3g} > {p_max:g}; tested "
            f"from {int(campaign.setting('min_degraded_checks'))} degraded checks)"
        )
    agreement_p_max = float(campaign.setting("agreement_p_max"))
    if agreement_rule_fails(quality.agreement_p, p_max=agreement_p_max):
        reasons.append(
            f"scores not following the other workers' on the same real candidates in campaign {campaign.name!r} "
            f"(one-sided test of Pearson's r over {quality.agreement_items} candidates others scored too: "
            f"p = {quality.agreement_p:.3g} > {agreement_p_max:g}; tested from "
            f"{int(campaign.setting('min_agreement_items'))} candidates)"
        )
    return "; ".join(reasons) or None


def worker_disqualify(*, worker: Worker, reason: str) -> Worker:
    """Mark the worker disqualified (kept judgments are excluded from aggregates), then tell their platform
    (``worker_disqualified``; ``annotation.providers.platform_notices`` listens).

    The database flag is what counts: a platform failure (e.g. MTurk unreachable) is logged, not raised,
    so that the submission that triggered it is not lost; the admin action can repeat it."""
    Worker.objects.filter(pk=worker.pk).update(
        disqualified=True, disqualified_reason=reason, disqualified_at=timezone.now()
    )
    worker.refresh_from_db()
    for _, outcome in worker_disqualified.send_robust(sender=Worker, worker=worker, reason=reason):
        if isinstance(outcome, Exception):
            log.error("the platform could not disqualify worker %s: %s", worker, outcome, exc_info=outcome)
    return worker


def worker_reinstate(*, worker: Worker) -> Worker:
    """Lift the disqualification here and on the worker's platform (a platform error is raised)."""
    Worker.objects.filter(pk=worker.pk).update(disqualified=False, disqualified_reason="", disqualified_at=None)
    worker.refresh_from_db()
    worker_reinstated.send(sender=Worker, worker=worker)
    return worker


def session_check(*, worker: Worker, campaign: Campaign, assignment_ids: Sequence[int]) -> tuple[str | None, bool]:
    """Whether the campaign's rules fail the worker on their verified judgments plus these not yet verified
    ones (a Prolific session's): (the reason, or None; whether ParaBank's attention rule is among the rules
    that fired). The session then ends with the failed code. Nothing is stored: the worker is disqualified
    only by ``worker_quality_apply`` once the platform confirmed the session."""
    quality = worker_quality(worker=worker, campaign=campaign, figures=False, pending_assignments=assignment_ids)
    return disqualification_reason(quality=quality, campaign=campaign), _attention_fails(quality, campaign)


def worker_quality_apply(*, worker: Worker, campaign: Campaign) -> str | None:
    """Evaluate the rule after a submission; disqualifies and returns the reason when it triggers."""
    if worker.disqualified:
        return None
    quality = worker_quality(worker=worker, campaign=campaign, figures=False)
    reason = disqualification_reason(quality=quality, campaign=campaign)
    if reason:
        worker_disqualify(worker=worker, reason=reason)
    return reason
