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
"""
from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

from django.db.models import Count

from annotation.models import ATTENTION_SYSTEM, LENGTH_BUCKETS, Campaign, Candidate, CandidateSystem, Judgment


@dataclasses.dataclass
class CandidateData:
    id: int
    reference_id: int
    reference_text: str
    text: str
    bucket: int
    systems: frozenset
    scores: list = dataclasses.field(default_factory=list)      # counted numeric scores (N/A excluded)
    fluencies: list = dataclasses.field(default_factory=list)   # counted fluency choices (0/1/2)


@dataclasses.dataclass
class CampaignData:
    campaign: Campaign
    min_judgments: int
    counted_workers: set
    candidates: list

    @property
    def buckets(self) -> list[int]:
        """The standard buckets 5/10/20/40 and any other bucket the campaign's references use."""
        return sorted(set(LENGTH_BUCKETS) | {c.bucket for c in self.candidates})

    @property
    def systems(self) -> list[str]:
        return sorted({s for c in self.candidates for s in c.systems if s != ATTENTION_SYSTEM}, key=system_sort_key)

    def of_system(self, system: str) -> list[CandidateData]:
        return [c for c in self.candidates if system in c.systems]


def system_sort_key(system: str):
    return (0, int(system), "") if system.isdigit() else (1, 0, system)


def counted_workers(campaign: Campaign, min_judgments: int | None = None) -> set[int]:
    """Pks of the workers whose judgments count in the campaign."""
    minimum = campaign.min_judgments_per_worker if min_judgments is None else int(min_judgments)
    counts = (Judgment.objects.counted().filter(candidate__reference__campaign=campaign, worker__disqualified=False)
              .values("worker").annotate(n=Count("id")))
    return {row["worker"] for row in counts if row["n"] >= minimum}


def load_campaign(campaign: Campaign, min_judgments: int | None = None) -> CampaignData:
    minimum = campaign.min_judgments_per_worker if min_judgments is None else int(min_judgments)
    workers = counted_workers(campaign, minimum)
    systems = defaultdict(set)
    pairs = CandidateSystem.objects.filter(candidate__reference__campaign=campaign).values_list("candidate_id", "system")
    for cid, system in pairs:
        systems[cid].add(system)
    candidates = {}
    rows = (Candidate.objects.filter(reference__campaign=campaign)
            .values_list("pk", "reference_id", "reference__text", "text", "reference__length_bucket")
            .order_by("reference__length_bucket", "reference_id", "pk"))
    for pk, ref_pk, ref_text, text, bucket in rows:
        candidates[pk] = CandidateData(pk, ref_pk, ref_text, text, bucket, frozenset(systems.get(pk, ())))
    judgments = (Judgment.objects.counted().filter(candidate__reference__campaign=campaign)
                 .values_list("candidate_id", "worker_id", "score", "fluency").order_by("pk"))
    for cid, worker, score, fluency in judgments.iterator(chunk_size=5000):
        if worker not in workers:
            continue
        c = candidates[cid]
        if score is not None:
            c.scores.append(score)
        c.fluencies.append(fluency)
    return CampaignData(campaign, minimum, workers, list(candidates.values()))


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _sd(values):
    return statistics.stdev(values) if len(values) >= 2 else None


def similarity_rows(data: CampaignData) -> list[dict]:
    rows = []
    for system in data.systems:
        per_bucket: dict[int, list[float]] = defaultdict(list)
        for c in data.of_system(system):
            if c.scores:
                per_bucket[c.bucket].append(statistics.fmean(c.scores))
        by_length = {str(b): _mean(per_bucket.get(b, [])) for b in data.buckets}
        means = [m for b in data.buckets for m in per_bucket.get(b, [])]
        rows.append({"system": system, "by_length": by_length, "avg": _mean(by_length.values()),
                     "std": _sd(means), "n": len(means)})
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
        rows.append({"system": system, "by_length": by_length, "avg": _mean(by_length.values()),
                     "std": _sd(outcomes), "n": len(outcomes)})
    return rows
