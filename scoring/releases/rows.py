"""What fills a release's files: the pairs of the scored shards that pass the screen and the filters, and the
verified judgments of the campaigns behind the release, read one at a time.

The screen is the one rule of ``generation.screening`` a HIT batch applies too: a paraphrase identical to its
reference (``is_copy``) or a near-copy of it (``filters.copy_kind``: the same but for punctuation and one character) is
left out unless the filters keep copies, and one with a non-word unless they keep
non-words (kept, its score is emptied and its ``caveat`` is ``non_words``). Every pair without an honest score
has a ``caveat`` and a null score (also ``long_reference``, a reference longer than any the regressor was trained
on, and ``unscored``). ``counts`` (the manifest's) are kept as the rows go.

Calibration: a pair's ``raw_score`` is the regressor's prediction and its ``score`` that prediction through the
regressor's calibration map (``scoring.regressor.held_out``: the expected mean human similarity of held-out pairs
predicted alike), or the prediction itself when the regressor has no map (trained before it was kept, or on too
few held-out pairs). It is mapped here, before the filters, so ``--min-score``, ``rerank=score``, ``top`` and the
parabank2 layout's order all act on the score a user sees in the file. A pair with a caveat has neither.

Streaming: pairs come from the scored shards one record at a time (shard order) and judgments from a database
cursor, so memory stays flat whatever the resource's size.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import Max

from annotation.models import LENGTH_BUCKETS, Campaign, CandidateSystem, Judgment, Reference
from generation.english import Vocabulary
from generation.models import Resource
from generation.screening import NON_WORD, NON_WORD_RULE, screen_verdicts, screen_vocabulary
from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from scoring.aggregation import counted_workers, system_sort_key
from scoring.models import ScoredResource
from scoring.regressor.held_out import ScoreCalibration, score_calibration_of
from scoring.releases.columns import LONG_REFERENCE, NON_WORDS, UNSCORED
from scoring.releases.filters import (
    COPY,
    COPY_RULE,
    NEAR_COPY,
    NEAR_COPY_RULE,
    ReleaseFilters,
    copy_kind,
    filter_candidates,
)

# the manifest's counts, in the order it lists them
COUNT_KEYS = (
    "references_read",
    "pairs_read",
    "references",
    "pairs",
    "pairs_unscored",
    "copies_read",
    "copies",
    "near_copies_read",
    "near_copies",
    "non_words_read",
    "non_words",
    "long_reference_pairs",
    "judgments",
)


def release_campaigns(scored: ScoredResource) -> list[Campaign]:
    """The campaigns whose judgments go with the release: those that evaluated a sample of the resource's
    generation job, and the campaign the regressor was trained on."""
    ids = set()
    if scored.resource.job_id:
        ids |= set(Campaign.objects.filter(job_id=scored.resource.job_id).values_list("pk", flat=True))
    if scored.regressor.campaign_id:
        ids.add(scored.regressor.campaign_id)
    return list(Campaign.objects.filter(pk__in=ids).order_by("name"))


@dataclasses.dataclass(frozen=True)
class PairScreen:
    """What a release checks in each pair besides the filters: the non-word vocabulary of the resource's corpus
    (``generation.screening``, as a HIT batch; None: not screened, ``note`` says why) and the longest reference
    the regressor was trained on (``length_limit`` tokens: past it no judgment backs a score)."""

    vocabulary: Vocabulary | None
    note: str
    length_limit: int

    def as_dict(self) -> dict[str, Any]:
        """The manifest's record of the screen."""
        return {
            "copy_rule": COPY_RULE,
            "near_copy_rule": NEAR_COPY_RULE,
            "non_word_rule": NON_WORD_RULE,
            "vocabulary": self.vocabulary.source if self.vocabulary is not None else None,
            "note": None if self.vocabulary is not None else self.note,
            "length_limit": self.length_limit,
        }


def pair_screen(scored: ScoredResource) -> PairScreen:
    """The screen of ``scored``'s release: its corpus's vocabulary and its regressor's training lengths (the
    longest reference bucket judged in its campaign; without a campaign, the longest bucket a batch samples)."""
    vocabulary, note = screen_vocabulary(scored.resource.corpus)
    campaign = scored.regressor.campaign_id
    longest = (
        Reference.objects.filter(campaign_id=campaign).aggregate(m=Max("length_bucket"))["m"] if campaign else None
    )
    return PairScreen(vocabulary=vocabulary, note=note, length_limit=longest or max(LENGTH_BUCKETS))


def release_calibration(scored: ScoredResource) -> ScoreCalibration | None:
    """The map a release's scores go through: its regressor's, when one was fitted; None: the raw scores are
    released (the manifest's ``calibration`` and the card say why)."""
    found = score_calibration_of(scored.regressor.metrics)
    return found if found is not None and found.fitted else None


def _calibrated(candidates: list[dict[str, Any]], calibration: ScoreCalibration | None) -> list[dict[str, Any]]:
    """Each candidate with its prediction as ``raw_score`` and ``score`` calibrated (the prediction itself without
    a map); a null score (a caveat) stays null in both."""
    raw = [c.get("score") for c in candidates]
    scores = calibration.apply(raw) if calibration is not None else raw
    return [{**c, "score": s, "raw_score": r} for c, s, r in zip(candidates, scores, raw)]


def _marked(
    record: dict[str, Any],
    screen: PairScreen,
    filters: ReleaseFilters,
    counts: dict[str, int],
    calibration: ScoreCalibration | None = None,
) -> list[dict]:
    """The record's candidates less its non-words (unless ``filters.keep_non_words``), each pair without an
    honest score given a null score and its ``caveat``, the others' scores calibrated (``_calibrated``); counts
    the non-words and the long references."""
    candidates = record.get("candidates") or []
    pairs = [(record["reference"], c["text"]) for c in candidates]
    verdicts = screen_verdicts(pairs, screen.vocabulary, cached=False)  # a whole resource: read once
    long_reference = (record.get("length") or 0) > screen.length_limit
    kept = []
    for c, (verdict, _) in zip(candidates, verdicts):
        if verdict == NON_WORD:
            counts["non_words_read"] += 1
            if not filters.keep_non_words:
                continue
            c = {**c, "score": None, "caveat": NON_WORDS}
        elif long_reference:
            c = {**c, "score": None, "caveat": LONG_REFERENCE}
        elif c.get("score") is None:
            c = {**c, "caveat": UNSCORED}
        kept.append(c)
    return _calibrated(kept, calibration)


def kept_records(
    scored: ScoredResource,
    filters: ReleaseFilters,
    counts: dict[str, int],
    screen: PairScreen,
    arrange: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each scored record (shard order, one at a time) with its candidates that pass the screen and ``filters``,
    marked (``_marked``), then ``arrange``d (a layout's order and cap, e.g. ParaBank 2's five); counts what is
    released as it goes."""
    storage = get_storage()
    calibration = release_calibration(scored)
    for entry in sorted(scored.shards, key=lambda e: e["index"]):
        for record in read_jsonl_gz(entry["key"], storage=storage):
            candidates = record.get("candidates") or []
            counts["references_read"] += 1
            counts["pairs_read"] += len(candidates)
            kinds = Counter(copy_kind(record["reference"], c["text"]) for c in candidates)
            counts["copies_read"] += kinds[COPY]
            counts["near_copies_read"] += kinds[NEAR_COPY]
            kept = filter_candidates(
                filters, {**record, "candidates": _marked(record, screen, filters, counts, calibration)}
            )
            if arrange is not None:
                kept = arrange(kept)
            if not kept:
                continue
            counts["references"] += 1
            counts["pairs"] += len(kept)
            counts["pairs_unscored"] += sum(c.get("score") is None for c in kept)
            counts["non_words"] += sum(c.get("caveat") == NON_WORDS for c in kept)
            counts["long_reference_pairs"] += sum(c.get("caveat") == LONG_REFERENCE for c in kept)
            if filters.keep_copies:
                kept_kinds = Counter(copy_kind(record["reference"], c["text"]) for c in kept)
                counts["copies"] += kept_kinds[COPY]
                counts["near_copies"] += kept_kinds[NEAR_COPY]
            yield record, kept


# where ``judgment_rows`` counts each campaign's judgments in ``counts`` (``release_write`` takes it out again)
BY_CAMPAIGN = "_judgments_by_campaign"


def judgment_sources(scored: ScoredResource, campaigns: list[Campaign], by_campaign: dict[str, int]) -> list[dict]:
    """Whose judgments the release ships, per campaign: how many, whether they judged this resource's own pairs
    (a campaign of its generation job) or another resource's (then which), and whether the regressor was
    trained on them. The card says it in words (issue 48: a diverse release's card read as if its own pairs
    had been judged, when it shipped only the regressor's training campaign, of another resource)."""
    sources = []
    for campaign in campaigns:
        own = campaign.job_id is not None and campaign.job_id == scored.resource.job_id
        judged = None if own else Resource.objects.filter(job_id=campaign.job_id).values_list("name", flat=True).first()
        sources.append(
            {
                "campaign": campaign.name,
                "judgments": by_campaign.get(campaign.name, 0),
                "pairs_judged": "this resource" if own else "another resource",
                "resource": scored.resource.name if own else judged,
                "trained_the_regressor": campaign.pk == scored.regressor.campaign_id,
            }
        )
    return sources


def judgment_rows(campaigns: list[Campaign], counts: dict[str, int]) -> Iterator[tuple]:
    """The release's judgments in ``JUDGMENT_COLUMNS`` order, ``systems`` as a list (database cursor): every
    verified judgment of ``campaigns``, workers anonymised as 1, 2, ... per campaign in order of appearance
    (each campaign's number in ``counts[BY_CAMPAIGN]``)."""
    by_campaign = counts.setdefault(BY_CAMPAIGN, {})
    for campaign in campaigns:
        by_campaign.setdefault(campaign.name, 0)
        counted = counted_workers(campaign)
        systems: dict[int, list[str]] = {}
        for cid, system in (
            CandidateSystem.objects.filter(candidate__reference__campaign=campaign)
            .values_list("candidate_id", "system")
            .order_by("candidate_id", "system")
        ):
            systems.setdefault(cid, []).append(system)
        anonymous: dict[int, int] = {}
        rows = (
            Judgment.objects.counted()
            .filter(candidate__reference__campaign=campaign)
            .order_by("candidate__reference__length_bucket", "candidate__reference_id", "candidate_id", "pk")
            .values_list(
                "worker_id",
                "candidate_id",
                "candidate__reference__ref_id",
                "candidate__reference__length_bucket",
                "candidate__reference__text",
                "candidate__text",
                "candidate__nll",
                "score",
                "fluency",
            )
        )
        for worker, cid, ref_id, bucket, ref_text, text, nll, score, fluency in rows.iterator(chunk_size=2000):
            anon = anonymous.setdefault(worker, len(anonymous) + 1)
            sys_ids = sorted(systems.get(cid, []), key=system_sort_key)
            counts["judgments"] += 1
            by_campaign[campaign.name] += 1
            yield (campaign.name, anon, worker in counted, ref_id, bucket, ref_text, sys_ids, text, nll, score, fluency)
