"""Human-judgment aggregation of a campaign (ParaBank §5.3 similarity, §5.5 meaningful-and-grammatical).

Rules (the README's "report" section states the same):

* Only judgments of verified assignments exist here (``Judgment.objects.counted()``): a crowd
  submission the platform has not confirmed (or denied) is left out everywhere.
* Counted workers: not disqualified, and at least ``min_judgments`` judgments in the campaign (all
  their judgments count toward the minimum: attention copies and N/A sliders included). The minimum is
  the campaign's ``min_judgments_per_worker`` unless overridden.
* Candidates are merged by (reference, exact text) across the campaign, attention copies included: a
  system output identical to its reference is the same candidate as the attention-check copy and
  shares all its judgments; a merged candidate counts for every system that produced it. The
  pseudo-system "0" (the attention copy) is never a row.
* Similarity of a candidate = mean of its counted numeric judgments (N/A sliders excluded); of a
  system in a length bucket = mean over its candidates that have one; ``avg`` = mean of the system's
  bucket means; ``std`` = sample standard deviation (n-1) of the system's candidate means over all
  buckets (null with fewer than 2); ``n`` = the number of candidates averaged.
* Fluency: a candidate with at least one counted judgment is good when no counted judgment marked it
  0 (nonsensical, N/A slider) or 1 (ungrammatical); per bucket the percentage of good candidates;
  ``avg`` = mean of the bucket percentages; ``std`` = sample SD of the candidates' 0/100 outcomes;
  ``n`` = the number of judged candidates.
* Quality-control items: the pseudo-systems "0" (attention copy) and "degraded" (a degraded copy of the
  reference) are never a row. A candidate carrying the "degraded" marker is left out of every row and
  aggregate (its judgments were collected as a check, not as a judgment of a system's output).
* Bias-corrected (``zscore``) similarity estimate, so that a harsh or lenient worker's offset and
  spread do not move the candidates they happened to judge: each counted worker's counted non-N/A
  scores in the campaign (attention copies included, degraded items not) are standardised by that
  worker's own mean and population SD; a worker whose SD is 0 (one score, or always the same score) is
  left out of this estimate and counted in ``workers_sd0``. A candidate's value is the mean of its
  z-scores mapped back to 0-100 as ``M + S * mean z``, M and S the population mean and SD of the
  scores the estimate uses (a linear map, not clipped: a value can lie a little outside 0-100). System
  and bucket cells are then formed exactly as for the raw means.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Count

from annotation.models import (
    DEGRADED_SYSTEM,
    LENGTH_BUCKETS,
    QUALITY_CONTROL_SYSTEMS,
    Campaign,
    Candidate,
    CandidateSystem,
    Judgment,
    is_attention_copy,
)
from generation.constraints.systems import system_sort_key


@dataclasses.dataclass
class CandidateData:
    id: int
    reference_id: int
    reference_text: str
    text: str
    bucket: int
    systems: frozenset
    scores: list = dataclasses.field(default_factory=list)  # counted numeric scores (N/A excluded)
    fluencies: list = dataclasses.field(default_factory=list)  # counted fluency choices (0/1/2)
    workers: list = dataclasses.field(default_factory=list)  # the worker pk of each entry of ``scores``

    @property
    def is_attention_copy(self) -> bool:
        """The reference itself (``annotation.models.is_attention_copy``), whichever systems also produced it."""
        return is_attention_copy(text=self.text, reference_text=self.reference_text, systems=self.systems)

    @property
    def is_degraded(self) -> bool:
        return DEGRADED_SYSTEM in self.systems


@dataclasses.dataclass
class CampaignData:
    campaign: Campaign
    min_judgments: int
    counted_workers: set
    candidates: list
    most_judgments: int = 0  # the most counted judgments any rater in good standing has (what would count them)

    @property
    def buckets(self) -> list[int]:
        """The standard buckets 5/10/20/40 and any other bucket the campaign's references use."""
        return sorted(set(LENGTH_BUCKETS) | {c.bucket for c in self.candidates})

    @property
    def systems(self) -> list[str]:
        return sorted(
            {s for c in self.candidates for s in c.systems if s not in QUALITY_CONTROL_SYSTEMS}, key=system_sort_key
        )

    def of_system(self, system: str) -> list[CandidateData]:
        """The system's candidates; degraded copies never count for a system (see the module docstring)."""
        return [c for c in self.candidates if system in c.systems and not c.is_degraded]


def worker_judgment_counts(campaign: Campaign) -> dict[int, int]:
    """Counted judgments in the campaign per worker who is not disqualified: what the minimum is held against."""
    counts = (
        Judgment.objects.counted()
        .filter(candidate__reference__campaign=campaign, worker__disqualified=False)
        .values("worker")
        .annotate(n=Count("id"))
    )
    return {row["worker"]: row["n"] for row in counts}


def counted_workers(campaign: Campaign, min_judgments: int | None = None) -> set[int]:
    """Pks of the workers whose judgments count in the campaign."""
    minimum = campaign.min_judgments_per_worker if min_judgments is None else int(min_judgments)
    return _at_least(worker_judgment_counts(campaign), minimum)


def _at_least(counts: dict[int, int], minimum: int) -> set[int]:
    return {worker for worker, n in counts.items() if n >= minimum}


def load_campaign(campaign: Campaign, min_judgments: int | None = None) -> CampaignData:
    minimum = campaign.min_judgments_per_worker if min_judgments is None else int(min_judgments)
    counts = worker_judgment_counts(campaign)
    workers = _at_least(counts, minimum)
    systems = defaultdict(set)
    pairs = CandidateSystem.objects.filter(candidate__reference__campaign=campaign).values_list(
        "candidate_id", "system"
    )
    for cid, system in pairs:
        systems[cid].add(system)
    candidates = {}
    rows = (
        Candidate.objects.filter(reference__campaign=campaign)
        .values_list("pk", "reference_id", "reference__text", "text", "reference__length_bucket")
        .order_by("reference__length_bucket", "reference_id", "pk")
    )
    for pk, ref_pk, ref_text, text, bucket in rows:
        candidates[pk] = CandidateData(pk, ref_pk, ref_text, text, bucket, frozenset(systems.get(pk, ())))
    judgments = (
        Judgment.objects.counted()
        .filter(candidate__reference__campaign=campaign)
        .values_list("candidate_id", "worker_id", "score", "fluency")
        .order_by("pk")
    )
    for cid, worker, score, fluency in judgments.iterator(chunk_size=5000):
        if worker not in workers:
            continue
        c = candidates[cid]
        if score is not None:
            c.scores.append(score)
            c.workers.append(worker)
        c.fluencies.append(fluency)
    return CampaignData(campaign, minimum, workers, list(candidates.values()), max(counts.values(), default=0))


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _sd(values):
    return statistics.stdev(values) if len(values) >= 2 else None


ESTIMATES = ("raw", "zscore")


@dataclasses.dataclass
class WorkerScale:
    mean: float
    sd: float  # population SD


def worker_scales(candidates: Iterable[CandidateData]) -> tuple[dict[int, WorkerScale], int]:
    """Each worker's mean and population SD over their scores of these candidates, for the workers who can
    be standardised (SD > 0), and how many cannot (SD 0: left out of z-scores)."""
    by_worker: dict[int, list[float]] = defaultdict(list)
    for c in candidates:
        for worker, score in zip(c.workers, c.scores):
            by_worker[worker].append(float(score))
    scales = {w: WorkerScale(statistics.fmean(v), statistics.pstdev(v)) for w, v in by_worker.items()}
    usable = {w: scale for w, scale in scales.items() if scale.sd > 0}
    return usable, len(scales) - len(usable)


@dataclasses.dataclass
class ZScoreEstimate:
    means: dict  # candidate id -> bias-corrected similarity (0-100 scale); absent when no usable score
    workers_sd0: int  # counted workers left out because their SD is 0
    mean: float | None  # M and S of the map back to 0-100
    sd: float | None


def zscore_estimates(data: CampaignData, *, candidates: Iterable[CandidateData] | None = None) -> ZScoreEstimate:
    """The bias-corrected similarity of each candidate (rules in the module docstring). ``candidates``
    (default: every non-degraded candidate) are both where the worker scales come from and what is
    estimated."""
    pool = [c for c in (data.candidates if candidates is None else candidates) if not c.is_degraded]
    usable, workers_sd0 = worker_scales(pool)
    kept = [float(s) for c in pool for w, s in zip(c.workers, c.scores) if w in usable]
    if not kept:
        return ZScoreEstimate({}, workers_sd0, None, None)
    mean, sd = statistics.fmean(kept), statistics.pstdev(kept)
    means = {}
    for c in pool:
        z = [(s - usable[w].mean) / usable[w].sd for w, s in zip(c.workers, c.scores) if w in usable]
        if z:
            means[c.id] = mean + sd * statistics.fmean(z)
    return ZScoreEstimate(means, workers_sd0, mean, sd)


def similarity_rows(data: CampaignData, estimates: dict | None = None) -> list[dict]:
    """Tab. 4 top; ``estimates`` (candidate id -> value, e.g. ``zscore_estimates(data).means``) replaces
    the raw candidate means, cells formed the same way."""
    rows = []
    for system in data.systems:
        per_bucket: dict[int, list[float]] = defaultdict(list)
        for c in data.of_system(system):
            if estimates is not None:
                if c.id in estimates:
                    per_bucket[c.bucket].append(estimates[c.id])
            elif c.scores:
                per_bucket[c.bucket].append(statistics.fmean(c.scores))
        by_length = {str(b): _mean(per_bucket.get(b, [])) for b in data.buckets}
        means = [m for b in data.buckets for m in per_bucket.get(b, [])]
        rows.append(
            {
                "system": system,
                "by_length": by_length,
                "avg": _mean(by_length.values()),
                "std": _sd(means),
                "n": len(means),
            }
        )
    return rows


def fluency_rows(data: CampaignData) -> list[dict]:
    rows = []
    for system in data.systems:
        per_bucket: dict[int, list[float]] = defaultdict(list)
        for c in data.of_system(system):
            if c.fluencies:
                per_bucket[c.bucket].append(100.0 if all(f == 2 for f in c.fluencies) else 0.0)
        by_length = {str(b): _mean(per_bucket.get(b, [])) for b in data.buckets}
        outcomes = [o for b in data.buckets for o in per_bucket.get(b, [])]
        rows.append(
            {
                "system": system,
                "by_length": by_length,
                "avg": _mean(by_length.values()),
                "std": _sd(outcomes),
                "n": len(outcomes),
            }
        )
    return rows
