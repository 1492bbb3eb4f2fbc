"""Before publishing: what a HIT batch being designed should give, cost and take (the batch form's *Preview*).

Reliability model. Each real candidate has a true similarity drawn from a normal distribution of variance
``between_var``; each rating is that plus independent noise of variance ``noise_var`` (the noise holds the
rater's own offset too: a candidate's R ratings come from R different people). Ratings are not clipped to
0-100 (reliability is a ratio of variances; the clipping of real sliders mostly shrinks both). One rating
then has reliability rho1 = between / (between + noise), and a candidate's mean of R ratings
R rho1 / (1 + (R - 1) rho1) (Spearman-Brown): ``expected_reliability``.

What the campaign's dashboard shows of the collected table is its split-half reliability, the rule of
``annotation.quality.split_half``: split each candidate's R ratings in two halves (R//2 and R - R//2), take Spearman's
rho of the half means across the candidates, and step it up to R ratings. ``split_half_draws`` simulates
exactly that statistic for the batch's own number of candidates (one split per simulated batch, where the
dashboard averages 20 splits of its one batch: its figure varies a little less than the simulated range), so
the preview shows the figure the dashboard will show and the spread a batch of that size gives, next to the
model's expectation. Spearman's rho of normal half means runs slightly below their Pearson correlation, so the
simulated median sits a little under ``expected_reliability``.

The variances come from the campaign's own counted judgments of real candidates when it has enough of them
(``variance_components``: one-way random-effects ANOVA over candidates), else from ParaBank's released
judgments (``PARABANK_NOISE``).

Time: the measured pace (``pace_seconds_per_hit``) x HITs x assignments, shared by the raters working at
once, each working without pause; a HIT needs that many different raters, so fewer than the assignments per
HIT cannot finish it. Pay (Prolific): reward per session / estimated minutes x 60 against Prolific's minimum
hourly reward (``PROLIFIC_MIN_HOURLY_REWARD``).

The model functions at the top are pure; the gatherers at the bottom read the database (and never write:
the batch is planned inside a transaction that is rolled back).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_UP, ROUND_UP, Decimal
from typing import TYPE_CHECKING

import numpy as np

from annotation.quality.split_half import half_sizes, spearman_brown, spearman_rows, split_half_label, stepped_up

if TYPE_CHECKING:
    from annotation.batches.params import BatchParams

# --- the model (pure) ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NoiseModel:
    """Variance components of ratings on the 0-100 slider, and where they come from."""

    between_var: float  # variance of the candidates' true similarity
    noise_var: float  # variance of one rating around its candidate's true similarity
    source: str

    @property
    def rho1(self) -> float:
        """Reliability of one rating."""
        total = self.between_var + self.noise_var
        return self.between_var / total if total > 0 else 0.0


# ParaBank's released development judgments (../shared/data/parabank-eval/candidates.tsv, Hu et al. 2019:
# 300 references, 17,385 judgments, 44 workers), real candidates only (attention copies and N/A sliders out),
# merged by (reference, text): 3,929 candidates, 3,921 of them judged by 2 or more workers (mostly 3).
# ``variance_components`` over them gives 296.4 and 468.9, so one rating's reliability is 0.39 and a mean
# of 3 ratings' 0.65 (tests/annotation/test_preview.py recomputes them from that file when it is there).
PARABANK_BETWEEN_VAR = 296.4
PARABANK_NOISE_VAR = 468.9
PARABANK_NOISE = NoiseModel(
    between_var=PARABANK_BETWEEN_VAR,
    noise_var=PARABANK_NOISE_VAR,
    source="typical values from ParaBank's released judgments (no campaign judgments to estimate them from)",
)
MIN_OWN_CANDIDATES = 20  # candidates judged at least twice before a campaign's own variances are used
LOW_RELIABILITY = 0.7  # below it the preview says how many assignments would reach 0.8
SIMULATION_VALUES = 1_000_000  # true scores drawn at once by split_half_draws (x 3 arrays of float64)


def variance_components(ratings: Iterable[Sequence[float]]) -> tuple[float, float, int] | None:
    """(between_var, noise_var, candidates judged twice or more) by one-way random-effects ANOVA (method of
    moments, unbalanced: n0 = (N - sum n_i^2 / N) / (k - 1)) over the candidates' lists of ratings; the
    between part is clipped at 0. None when there is nothing to separate (fewer than two candidates, or no
    candidate judged twice)."""
    groups = [np.asarray(g, dtype=float) for g in ratings if len(g) > 0]
    k = len(groups)
    n = np.array([len(g) for g in groups], dtype=float)
    total = float(n.sum()) if k else 0.0
    repeated = int((n >= 2).sum()) if k else 0
    if k < 2 or total - k <= 0 or repeated == 0:
        return None
    means = np.array([g.mean() for g in groups])
    grand = float(np.concatenate(groups).mean())
    within = sum(float(((g - m) ** 2).sum()) for g, m in zip(groups, means)) / (total - k)
    between_ms = float((n * (means - grand) ** 2).sum()) / (k - 1)
    n0 = (total - float((n**2).sum()) / total) / (k - 1)
    between = max(0.0, (between_ms - within) / n0) if n0 > 0 else 0.0
    return between, within, repeated


def expected_reliability(model: NoiseModel, raters: int) -> float:
    """The expected reliability of a candidate's mean similarity over ``raters`` ratings."""
    return spearman_brown(model.rho1, raters)


def raters_for(model: NoiseModel, target: float) -> int | None:
    """The fewest ratings per candidate whose expected reliability reaches ``target``; None if none can."""
    rho1 = model.rho1
    if rho1 <= 0 or not 0 < target < 1:
        return None
    return max(1, math.ceil(target * (1 - rho1) / (rho1 * (1 - target)) - 1e-9))


def split_half_draws(
    model: NoiseModel, *, candidates: int, raters: int, draws: int = 400, seed: int = 0
) -> np.ndarray | None:
    """The dashboard's split-half reliability (``annotation.quality.split_half``: Spearman's rho of the half means,
    stepped up to ``raters``) of ``draws`` simulated batches of ``candidates`` candidates each judged ``raters``
    times, each batch split once; None with fewer than 2 raters or 3 candidates (nothing to split or
    correlate). The half means are drawn directly (a mean of k draws of N(0, v) is N(0, v/k))."""
    if raters < 2 or candidates < 3:
        return None
    a, b = half_sizes(raters)
    rng = np.random.default_rng(seed)
    correlations: list[float] = []
    step = max(1, SIMULATION_VALUES // candidates)  # batches drawn at once: memory stays bounded
    for start in range(0, draws, step):
        shape = (min(step, draws - start), candidates)
        true = rng.normal(0.0, math.sqrt(model.between_var), size=shape)
        half_a = true + rng.normal(0.0, math.sqrt(model.noise_var / a), size=shape)
        half_b = true + rng.normal(0.0, math.sqrt(model.noise_var / b), size=shape)
        correlations.extend(float(r) for r in spearman_rows(half_a, half_b) if not math.isnan(r))
    return np.array([stepped_up(r, raters) for r in correlations])


@dataclasses.dataclass(frozen=True)
class ReliabilityPreview:
    expected: float  # Spearman-Brown expectation
    median: float | None  # of the simulated split-half reliabilities, the dashboard's figure (None: one rater)
    low: float | None  # 5th percentile
    high: float | None  # 95th percentile
    raters: int
    candidates: int
    rho1: float
    for_080: int | None  # ratings per candidate for an expected 0.8
    for_090: int | None
    source: str

    @property
    def label(self) -> str:
        """The figure's name, as the dashboard names the figure it shows (``split_half_label``)."""
        return split_half_label(self.raters)


def reliability_preview(model: NoiseModel, *, candidates: int, raters: int, seed: int = 0) -> ReliabilityPreview:
    """The expected and simulated split-half reliability of a batch's similarity table (see the module docstring)."""
    draws = split_half_draws(model, candidates=candidates, raters=raters, seed=seed)
    low = median = high = None
    if draws is not None and len(draws):
        low, median, high = (float(x) for x in np.percentile(draws, [5, 50, 95]))
    return ReliabilityPreview(
        expected=expected_reliability(model, raters),
        median=median,
        low=low,
        high=high,
        raters=raters,
        candidates=candidates,
        rho1=model.rho1,
        for_080=raters_for(model, 0.8),
        for_090=raters_for(model, 0.9),
        source=model.source,
    )


def finish_hours(*, seconds_per_hit: float, hits: int, assignments: int, raters_at_once: int) -> float | None:
    """Hours until every assignment is done when ``raters_at_once`` raters work without pause at the measured
    pace; None when fewer raters than assignments per HIT (a HIT needs that many different people)."""
    if raters_at_once < max(1, assignments):
        return None
    return seconds_per_hit * hits * assignments / raters_at_once / 3600


def duration_text(hours: float) -> str:
    """Hours as a person reads them: minutes under an hour, days from two days on."""
    if hours < 1:
        return f"{max(1, round(hours * 60))} min"
    if hours < 48:
        return f"{hours:.1f} hours"
    return f"{hours / 24:.1f} days"


CENT = Decimal("0.01")


def hourly_pay(reward_per_session: Decimal, minutes: int) -> Decimal:
    """What a session's reward pays per hour at its estimated time (as Prolific computes it)."""
    return (Decimal(reward_per_session) * 60 / Decimal(max(1, int(minutes)))).quantize(CENT, rounding=ROUND_HALF_UP)


def pay_below_minimum(pay_per_hour: Decimal, minimum: Decimal) -> bool:
    return Decimal(pay_per_hour) < Decimal(minimum)


def reward_for_hourly(per_hour: Decimal, minutes: int) -> Decimal:
    """The least reward per session, to the cent, that pays ``per_hour`` at ``minutes`` (rounded up)."""
    return (Decimal(per_hour) * max(1, int(minutes)) / 60).quantize(CENT, rounding=ROUND_UP)


# --- gatherers (read the database) ---------------------------------------------------------------------


def campaign_noise(campaign) -> NoiseModel:
    """The campaign's own variance components from its counted judgments of real candidates by workers not
    disqualified (N/A out), when at least ``MIN_OWN_CANDIDATES`` candidates were judged twice; else
    ``PARABANK_NOISE``, saying why."""
    from annotation.models import Judgment
    from annotation.quality.workers import real_judgments

    rows = real_judgments(
        Judgment.objects.counted().filter(
            candidate__reference__campaign=campaign, worker__disqualified=False, score__isnull=False
        )
    ).values_list("candidate_id", "score")
    by_candidate: dict[int, list[float]] = defaultdict(list)
    for candidate, score in rows.iterator(chunk_size=5000):
        by_candidate[candidate].append(float(score))
    found = variance_components(by_candidate.values())
    if found is None or found[2] < MIN_OWN_CANDIDATES:
        repeated = 0 if found is None else found[2]
        return dataclasses.replace(
            PARABANK_NOISE,
            source=(
                f"typical values from ParaBank's released judgments (candidates judged twice or more in this "
                f"campaign: {repeated}; its own are used from {MIN_OWN_CANDIDATES})"
            ),
        )
    between, noise, repeated = found
    return NoiseModel(
        between_var=between,
        noise_var=noise,
        source=f"this campaign's own judgments ({repeated} candidates judged twice or more)",
    )


def pace_seconds_per_hit(campaign=None) -> tuple[float, str]:
    """(seconds per HIT, how it was found, as a phrase): the median of verified human timings
    (``median_seconds_per_hit``) of the campaign, else of every campaign, else ``PROLIFIC_SECONDS_PER_HIT``;
    never under ``PROLIFIC_MIN_SECONDS_PER_HIT``."""
    from django.conf import settings

    from annotation.providers.prolific.study import median_seconds_per_hit

    floor = float(settings.PROLIFIC_MIN_SECONDS_PER_HIT)
    measured, scope = None, "all campaigns'"
    if campaign is not None:
        measured, scope = median_seconds_per_hit(campaign=campaign), "this campaign's"
    if measured is None:
        measured, scope = median_seconds_per_hit(), "all campaigns'"
    if measured is not None:
        how = f"the median of {measured:.0f} s per HIT of {scope} verified human work"
    else:
        measured = float(settings.PROLIFIC_SECONDS_PER_HIT)
        how = f"{measured:.0f} s per HIT until one is measured (PROLIFIC_SECONDS_PER_HIT)"
    if measured < floor:
        return floor, f"{floor:.0f} s per HIT, the floor (PROLIFIC_MIN_SECONDS_PER_HIT; {how})"
    return measured, how


def campaign_raters(campaign) -> int:
    """People who did verified HIT work on the campaign (not imported, not disqualified): the default of how
    many work at once."""
    from annotation.models import Assignment, Provider

    return (
        Assignment.objects.counted()
        .filter(campaign=campaign, hit__isnull=False, worker__disqualified=False)
        .exclude(provider=Provider.IMPORT)
        .values("worker")
        .distinct()
        .count()
    )


def prolific_minimum_hourly() -> Decimal:
    """``PROLIFIC_MIN_HOURLY_REWARD`` (Prolific's published minimum: GBP 6.00 / USD 8.00 an hour)."""
    from django.conf import settings

    return Decimal(str(settings.PROLIFIC_MIN_HOURLY_REWARD))


@dataclasses.dataclass(frozen=True)
class PlannedBatch:
    hits: int
    real_candidates: int  # real candidates shown (each in one HIT), judged ``assignments`` times each
    attention_checks: int
    degraded_checks: int
    cost: Decimal | None  # the provider's estimate (None: free)
    currency: str
    places: int | None  # Prolific: places of the study
    attention_pass_mark: int | None = None  # the score an attention copy needs (the batch setting, as stored)
    per_length: int = 0  # references asked for per length bucket
    available: dict[int, int] = dataclasses.field(default_factory=dict)  # the campaign's references per bucket
    left_out: int = 0  # candidates left out for non-words
    settings: dict = dataclasses.field(default_factory=dict)  # the batch's settings as they would be stored

    @property
    def sample_note(self) -> str:
        """Where the HITs come from: the references taken per length bucket out of those asked for, and what
        their candidates make (a batch form's defaults ask for more references than a small campaign has)."""
        taken = {length: min(n, self.per_length) for length, n in self.available.items()}
        total = sum(taken.values())
        asked = f"{self.per_length} reference{plural(self.per_length)} per length bucket asked"
        if any(n < self.per_length for n in self.available.values()):
            have = join_and([f"{n} of {length} tokens" for length, n in self.available.items()])
            where = f"; the campaign has {have}, so the batch takes {total} reference{plural(total)}"
        else:
            where = f": {total} reference{plural(total)}"
        dropped = f" ({self.left_out} left out for non-words)" if self.left_out else ""
        size = int(self.settings.get("hit_size") or 5)
        return (
            f"{asked}{where}. Their {self.real_candidates} candidate{plural(self.real_candidates)}{dropped} fill "
            f"{self.hits} HIT{plural(self.hits)} of up to {size} sentences, each HIT showing one reference."
        )


def plural(n: int) -> str:
    """The plural ending for a count: "1 check", "2 checks"."""
    return "" if n == 1 else "s"


def join_and(items: Sequence[str]) -> str:
    """The items as a sentence lists them: a; a and b; a, b and c."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


class _RollBack(Exception):
    pass


def references_per_length(campaign, lengths: Iterable[int]) -> dict[int, int]:
    """How many references the campaign has in each of ``lengths`` (in that order; 0 where it has none)."""
    from django.db.models import Count

    from annotation.models import Reference

    counts = dict(
        Reference.objects.filter(campaign=campaign, length_bucket__in=list(lengths))
        .values_list("length_bucket")
        .annotate(n=Count("id"))
    )
    return {int(length): int(counts.get(length, 0)) for length in lengths}


def batch_plan(*, campaign, params: BatchParams) -> PlannedBatch:
    """What ``hit_batch_create(campaign=campaign, params=params)`` would make and the provider's cost estimate of it
    (``batch_cost_estimate_usd``), made inside a transaction that is then rolled back: nothing stays. Raises
    what they raise (``BatchError``, a provider's error for settings it cannot price)."""
    from django.db import transaction

    from annotation.batches.making import batch_cost_estimate_usd, hit_batch_create
    from annotation.models import HitItem
    from annotation.providers import get_provider

    found: list[PlannedBatch] = []
    try:
        with transaction.atomic():
            batch = hit_batch_create(campaign=campaign, params=params)
            items = HitItem.objects.filter(hit__batch=batch)
            provider = get_provider(batch)
            cost = batch_cost_estimate_usd(batch=batch)
            found.append(
                PlannedBatch(
                    hits=batch.hits.count(),
                    real_candidates=items.filter(is_attention_check=False, is_degraded_check=False).count(),
                    attention_checks=items.filter(is_attention_check=True).count(),
                    degraded_checks=items.filter(is_degraded_check=True).count(),
                    cost=None if cost is None else Decimal(cost),
                    currency=str(getattr(provider, "currency", "USD")),
                    places=provider.places(batch=batch) if hasattr(provider, "places") else None,
                    attention_pass_mark=batch.settings.get("attention_pass_mark"),
                    per_length=int(batch.settings["per_length"]),
                    available=references_per_length(campaign, batch.settings["lengths"]),
                    left_out=int((batch.settings.get("non_words") or {}).get("left_out") or 0),
                    settings=dict(batch.settings),
                )
            )
            raise _RollBack
    except _RollBack:
        pass
    return found[0]


@dataclasses.dataclass(frozen=True)
class ProlificPay:
    reward_per_session: Decimal
    estimated_minutes: int
    per_hour: Decimal
    minimum: Decimal
    currency: str

    @property
    def below_minimum(self) -> bool:
        return pay_below_minimum(self.per_hour, self.minimum)


def prolific_pay(batch_settings: dict) -> ProlificPay:
    """The hourly pay a Prolific batch's settings imply (their defaults filled in as the study will be made)."""
    from django.conf import settings

    from annotation.providers.prolific.study import batch_prolific_config

    config = batch_prolific_config(batch_settings)
    return ProlificPay(
        reward_per_session=config["reward_per_session"],
        estimated_minutes=config["estimated_minutes"],
        per_hour=hourly_pay(config["reward_per_session"], config["estimated_minutes"]),
        minimum=prolific_minimum_hourly(),
        currency=settings.PROLIFIC_CURRENCY,
    )


def publish_url_problem(provider: str, batch_settings: dict) -> str | None:
    """Why Publish would refuse a crowd batch for its public address (the batch's ``public_url``, else
    ``PARAFORGE_PUBLIC_URL``: the platform sends workers there over https), or None; the local provider needs
    none. Creating and previewing a draft never need it, so the preview says so before the researcher
    publishes."""
    from django.conf import settings

    from annotation.providers import ProviderError
    from annotation.providers.common import public_url_check

    if provider not in ("prolific", "mturk", "mturk-sandbox"):
        return None
    platform = "Prolific" if provider == "prolific" else "MTurk"
    try:
        public_url_check(batch_settings.get("public_url") or settings.PARAFORGE_PUBLIC_URL, platform=platform)
    except ProviderError as exc:
        return str(exc)
    return None


def session_note(asked_settings: dict, batch_settings: dict, *, hits: int) -> str:
    """A Prolific session's size as the study will state it, and why it is smaller than asked when it is."""
    from django.conf import settings

    asked = int(asked_settings.get("hits_per_session") or settings.PROLIFIC_HITS_PER_SESSION)
    size = int(batch_settings.get("hits_per_session") or settings.PROLIFIC_HITS_PER_SESSION)
    if size < asked:
        return (
            f"A Prolific session is {size} HIT{plural(size)}, not the {asked} asked: the batch has only {hits} "
            f"HIT{plural(hits)} and a participant does each at most once."
        )
    return f"A Prolific session is {size} HIT{plural(size)} in a row."


@dataclasses.dataclass(frozen=True)
class BatchPreview:
    plan: PlannedBatch
    assignments: int
    reliability: ReliabilityPreview
    seconds_per_hit: float
    pace_source: str
    raters_at_once: int
    raters_source: str
    hours: float | None
    pay: ProlificPay | None
    warnings: list[str]  # what makes the batch fail: pay below Prolific's minimum, too few people to finish
    advice: list[str]  # what would make it better: more assignments for a low reliability
    notes: list[str] = dataclasses.field(default_factory=list)  # why the batch is what it is (sample, session)

    @property
    def duration(self) -> str | None:
        return None if self.hours is None else duration_text(self.hours)


def batch_preview(*, campaign, params: BatchParams, raters_at_once: int | None = None) -> BatchPreview:
    """The power, cost and time of the batch ``hit_batch_create(campaign=campaign, params=params)`` would make,
    without making it (see the module docstring for the model and what it assumes)."""
    plan = batch_plan(campaign=campaign, params=params)
    assignments = params.assignments
    reliability = reliability_preview(campaign_noise(campaign), candidates=plan.real_candidates, raters=assignments)
    seconds, pace_source = pace_seconds_per_hit(campaign)
    if raters_at_once:
        raters, raters_source = raters_at_once, "as given"
    else:
        known = campaign_raters(campaign)
        raters, raters_source = (
            (known, "the people who have done this campaign's HITs so far")
            if known
            else (assignments, "the assignments per HIT: the fewest people who can finish it")
        )
    hours = finish_hours(seconds_per_hit=seconds, hits=plan.hits, assignments=assignments, raters_at_once=raters)
    prolific = params.provider == "prolific"
    pay = prolific_pay(plan.settings) if prolific else None
    warnings = []
    if pay is not None and pay.below_minimum:
        warnings.append(
            f"{pay.reward_per_session} {pay.currency} for {pay.estimated_minutes} min pays {pay.per_hour} "
            f"{pay.currency} an hour, below Prolific's minimum of {pay.minimum} {pay.currency}: Prolific will "
            f"not accept the study; raise the reward to at least "
            f"{reward_for_hourly(pay.minimum, pay.estimated_minutes)} {pay.currency}"
        )
    if hours is None:
        warnings.append(
            f"{raters} people working at once cannot finish it: each HIT needs {assignments} different people"
        )
    refused = publish_url_problem(params.provider, plan.settings)
    if refused is not None:
        warnings.append(
            f"Publish will refuse this batch until it has an https public address: {refused}. You can still "
            "design, preview and create the draft; publishing checks the address again."
        )
    notes = [plan.sample_note]
    if prolific:
        notes.append(session_note(params.settings, plan.settings, hits=plan.hits))
    advice = []
    if reliability.expected < LOW_RELIABILITY and reliability.for_080:
        advice.append(
            f"expected reliability {reliability.expected:.2f} is low: {reliability.for_080} assignments per HIT "
            "would reach 0.8"
        )
    return BatchPreview(
        plan=plan,
        assignments=assignments,
        reliability=reliability,
        seconds_per_hit=seconds,
        pace_source=pace_source,
        raters_at_once=raters,
        raters_source=raters_source,
        hours=hours,
        pay=pay,
        warnings=warnings,
        advice=advice,
        notes=notes,
    )
