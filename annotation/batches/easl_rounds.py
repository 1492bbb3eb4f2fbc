"""EASL rounds of a batch: read its judgments, compute the posteriors, create the next round's HITs.

A batch runs in EASL mode when ``Batch.settings["mode"] == "easl"``. Its options live in
``Batch.settings["easl"]`` (defaults in ``EASL_DEFAULTS``; ``items_per_hit`` falls back on the
batch's ``hit_size``); each HIT's ``round`` says which round made it (HITs a batch builder made are
round 0). The items are the real candidates of the batch's references (or, for an empty batch, of its
campaign): attention copies and degraded copies are quality control, never estimated. Checks join each
round at the batch's ``attention_rate`` and ``degraded_rate``, spread over the round's HITs. New HITs are
plain unpublished ``Hit`` rows, so the provider publishes them like any others (``mturk publish BATCH``;
the local pool picks them up).
"""

from __future__ import annotations

import random
from collections import defaultdict

from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotation.batch_settings import BatchSettingsError, easl_settings_clean, rate_check
from annotation.batches import easl
from annotation.batches.making import (
    attention_copy,
    degraded_copy,
    degraded_for_hit,
    loop_screen,
    non_word_screen,
    spread_order,
)
from annotation.batches.params import DEFAULT_DEGRADED_RATE
from annotation.models import (
    DEGRADED_SYSTEM,
    JUDGED_STATUSES,
    AssignmentStatus,
    Batch,
    Candidate,
    CandidateSystem,
    Hit,
    HitItem,
    Judgment,
    Reference,
    is_attention_copy,
)

EASL_DEFAULTS = {
    "g": easl.DEFAULT_G,
    "items_per_hit": easl.DEFAULT_ITEMS_PER_HIT,
    "variance_threshold": easl.DEFAULT_VARIANCE_THRESHOLD,
    "judgment_budget": None,  # judgments (N/A included) after which no round is created
    "hits_per_round": None,  # None: as many HITs as round 0 needs (items / items_per_hit)
    "assignments_per_hit": 1,
}


class EaslError(Exception):
    """The batch cannot get an EASL round (not EASL mode, or its last round is not finished)."""


def easl_config(batch: Batch) -> dict:
    """The batch's EASL options with the defaults filled in; a bad number raises ``EaslError`` naming the
    key (the same check ``hit_batch_create`` makes when the batch is created)."""
    try:
        given = easl_settings_clean((batch.settings or {}).get("easl"))
    except BatchSettingsError as exc:
        raise EaslError(f"batch {batch.pk}: {exc}") from exc
    defaults = {**EASL_DEFAULTS, "items_per_hit": (batch.settings or {}).get("hit_size") or easl.DEFAULT_ITEMS_PER_HIT}
    return {key: default if given.get(key) is None else given[key] for key, default in defaults.items()}


def _is_quality_control(candidate: Candidate, systems: set[str]) -> bool:
    """An attention copy or a degraded copy: shown to test the rater, never an item EASL estimates."""
    return DEGRADED_SYSTEM in systems or is_attention_copy(
        text=candidate.text, reference_text=candidate.reference.text, systems=systems
    )


def batch_items(batch: Batch) -> dict[int, list[int]]:
    """{reference pk: [candidate pks]} of the items EASL scores (attention and degraded copies, and candidates
    with non-words or loops unless the batch keeps them, left out)."""
    ref_ids = set(batch.hits.values_list("reference_id", flat=True))
    refs = Reference.objects.filter(pk__in=ref_ids) if ref_ids else Reference.objects.filter(campaign=batch.campaign)
    systems: dict[int, set[str]] = defaultdict(set)
    for cand_id, system in CandidateSystem.objects.filter(candidate__reference__in=refs).values_list(
        "candidate_id", "system"
    ):
        systems[cand_id].add(system)
    # the candidates the batch left out of its first HITs as non-words or loops stay out of every later round too
    # (a batch made before the loop screen recorded no drop_loops and showed its loops)
    settings = batch.settings or {}
    left_out, _ = non_word_screen(batch.campaign, list(refs), drop=settings.get("drop_non_words") is not False)
    left_out |= loop_screen(list(refs), drop=settings.get("drop_loops") is True)[0]
    groups: dict[int, list[int]] = defaultdict(list)
    for cand in Candidate.objects.filter(reference__in=refs).select_related("reference").order_by("id"):
        if not _is_quality_control(cand, systems[cand.pk]) and cand.pk not in left_out:
            groups[cand.reference_id].append(cand.pk)
    return dict(groups)


def batch_judgments(batch: Batch, items: set[int]) -> list[tuple[int, int, int | None]]:
    """(worker, candidate, score) of the batch's counted judgments: disqualified workers, rejected and
    not (yet) verified assignments left out."""
    rows = (
        Judgment.objects.counted()
        .filter(assignment__hit__batch=batch, candidate_id__in=items, worker__disqualified=False)
        .exclude(assignment__status=AssignmentStatus.REJECTED)
        .values_list("worker_id", "candidate_id", "score")
        .order_by("id")
    )
    return list(rows)


def _posteriors(batch: Batch) -> tuple[dict[int, list[int]], dict[int, easl.BetaPosterior], int]:
    groups = batch_items(batch)
    items = {c for cands in groups.values() for c in cands}
    judgments = batch_judgments(batch, items)
    scores: dict[int, list] = defaultdict(list)
    for _, cand, score in judgments:
        scores[cand].append(score)
    return groups, easl.posteriors_from_scores(scores, items), len(judgments)


def easl_status(*, batch: Batch) -> dict:
    """Where the batch stands: rounds, judgments, largest variance, and why it would stop (or None)."""
    config = easl_config(batch)
    _, posteriors, judgments = _posteriors(batch)
    rounds = _rounds(batch)
    reason = (
        easl.stopping_reason(
            posteriors,
            variance_threshold=config["variance_threshold"],
            judgments=judgments,
            judgment_budget=config["judgment_budget"],
        )
        if rounds
        else None
    )
    return {
        "batch": batch.pk,
        "rounds": len(rounds),
        "items": len(posteriors),
        "judgments": judgments,
        "max_variance": round(max((p.variance for p in posteriors.values()), default=0.0), 6),
        "stop_reason": reason,
    }


def _rounds(batch: Batch) -> list[list[int]]:
    """The batch's HIT ids by round, in round order."""
    by_round: dict[int, list[int]] = defaultdict(list)
    for hit_id, number in batch.hits.order_by("id").values_list("id", "round"):
        by_round[number].append(hit_id)
    return [by_round[number] for number in sorted(by_round)]


def _round_finished(hit_ids: list[int]) -> bool:
    now = timezone.now()
    hits = Hit.objects.filter(pk__in=hit_ids).annotate(
        done=Count("assignments", filter=Q(assignments__status__in=JUDGED_STATUSES))
    )
    return all(h.done >= h.max_assignments or (h.expires_at is not None and h.expires_at <= now) for h in hits)


def easl_round_create(*, batch: Batch, seed: int | None = None, force: bool = False) -> dict | None:
    """Create the next round's HITs; None when the stopping rule says stop (see ``easl_status``).

    Raises ``EaslError`` for a batch not in EASL mode, or while the last round still has open HITs
    (``force`` creates the round anyway, from the judgments in so far)."""
    if (batch.settings or {}).get("mode") != "easl":
        raise EaslError(f"batch {batch.pk} is not in EASL mode (settings['mode'] is not 'easl')")
    config = easl_config(batch)
    groups, posteriors, judgments = _posteriors(batch)
    if not groups:
        raise EaslError(f"batch {batch.pk} has no candidates to judge")
    rounds = _rounds(batch)
    if rounds and not force and not _round_finished(rounds[-1]):
        raise EaslError(f"round {len(rounds) - 1} of batch {batch.pk} still has HITs waiting for assignments")
    if rounds and easl.stopping_reason(
        posteriors,
        variance_threshold=config["variance_threshold"],
        judgments=judgments,
        judgment_budget=config["judgment_budget"],
    ):
        return None
    per_hit = int(config["items_per_hit"])
    seed = int(seed if seed is not None else len(rounds))
    if not rounds:
        plans = easl.first_round(groups, items_per_hit=per_hit, seed=seed)
    else:
        n_hits = config["hits_per_round"] or -(-len(posteriors) // per_hit)
        if config["judgment_budget"] is not None:
            # never plan past the budget: fewer HITs, and at the very end one smaller HIT
            left = (int(config["judgment_budget"]) - judgments) // max(1, int(config["assignments_per_hit"]))
            n_hits = min(n_hits, left // per_hit)
            if n_hits == 0:
                n_hits, per_hit = 1, max(1, left)
        plans = easl.next_round(
            groups, posteriors, n_hits=int(n_hits), items_per_hit=per_hit, g=float(config["g"]), seed=seed
        )
    number = (batch.hits.aggregate(last=Max("round"))["last"] + 1) if rounds else 0
    hit_ids = _create_hits(batch, plans, config=config, seed=seed, number=number)
    return {
        "batch": batch.pk,
        "round": number,
        "hits": len(hit_ids),
        "hit_ids": hit_ids,
        "items": sum(len(p.items) for p in plans),
        "judgments": judgments,
        "max_variance": round(max((p.variance for p in posteriors.values()), default=0.0), 6),
    }


def _degraded_texts(batch: Batch, references: dict[int, Reference], *, seed: int, number: int):
    """A function giving (text, source) of a reference's degraded check for a HIT showing these candidate pks
    (or None; ``annotation.batches.making.degraded_for_hit``): phrases come from the batch's references, the source
    is one of the HIT's real items; each round draws a new text, so a worker who judged last round's check
    can take the HIT."""
    ref_ids = set(batch.hits.values_list("reference_id", flat=True)) | set(references)
    donors = list(Reference.objects.filter(pk__in=ref_ids).values_list("text", flat=True))
    avoid: dict[int, set[str]] = defaultdict(set)
    peers: dict[int, list[str]] = defaultdict(list)
    degraded = set(
        CandidateSystem.objects.filter(candidate__reference__in=list(references), system=DEGRADED_SYSTEM).values_list(
            "candidate_id", flat=True
        )
    )
    candidates = {c.pk: c for c in Candidate.objects.filter(reference__in=list(references)).order_by("pk")}
    for pk, cand in candidates.items():
        if pk not in degraded:
            avoid[cand.reference_id].add(cand.text)
            if cand.text != references[cand.reference_id].text:
                peers[cand.reference_id].append(cand.text)

    def text_for(ref: Reference, shown: list[int]) -> tuple[str, Candidate] | None:
        return degraded_for_hit(
            ref,
            [candidates[pk] for pk in shown if pk in candidates and pk not in degraded],
            peers=peers[ref.pk],
            donors=donors,
            avoid=avoid[ref.pk],
            rng=random.Random(f"degraded:{batch.pk}:{seed}:{number}:{ref.ref_id}"),
        )

    return text_for


def _create_hits(batch: Batch, plans: list[easl.HitPlan], *, config: dict, seed: int, number: int) -> list[int]:
    """The round's Hit/HitItem rows in one transaction; attention and degraded copies at the batch's rates,
    spread over the round (in round 0 only where a HIT has room, so that every item is still shown; later
    the last partner makes room; a share not placed carries over to the next HIT)."""
    rng = random.Random(seed * 7919 + 1)
    settings = batch.settings or {}
    rate = float(settings.get("attention_rate", 0.1))
    try:
        degraded_rate = (
            rate_check("degraded_rate", settings["degraded_rate"])
            if settings.get("degraded_rate") is not None
            else DEFAULT_DEGRADED_RATE
        )
    except BatchSettingsError as exc:
        raise EaslError(f"batch {batch.pk}: {exc}") from exc
    references = Reference.objects.in_bulk({p.group for p in plans})
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)
        if locked.hits.filter(round__gte=number).exists():
            raise EaslError(f"another round of batch {batch.pk} was created meanwhile; run it again")
        text_for = _degraded_texts(batch, references, seed=seed, number=number) if degraded_rate > 0 else None
        owed = {"attention": rng.random()}
        owed["degraded"] = (owed["attention"] + 0.5) % 1.0  # half a period apart: rarely both in one HIT
        shown: list[tuple[easl.HitPlan, list[tuple[int, str | None]]]] = []
        degraded_refs: set[int] = set()  # one degraded copy per reference and round (one text per round)
        for plan in plans:
            ref = references[plan.group]
            items: list[tuple[int, str | None]] = [(cand, None) for cand in plan.items]
            owed["attention"] += rate
            owed["degraded"] += degraded_rate
            for kind in ("attention", "degraded"):
                if owed[kind] < 1.0:
                    continue
                full = len(items) >= int(config["items_per_hit"])
                partners = [i for i, (cand, check) in enumerate(items) if check is None and cand != plan.anchor]
                if full and not (plan.anchor is not None and partners):
                    continue
                if kind == "attention":
                    copy = attention_copy(ref)
                else:
                    # its source is one of the items the HIT keeps, so that the rater judges both
                    kept = [
                        cand
                        for i, (cand, check) in enumerate(items)
                        if check is None and not (full and i == max(partners))
                    ]
                    made = text_for(ref, kept) if text_for is not None and ref.pk not in degraded_refs else None
                    if made is None:
                        continue
                    copy = degraded_copy(ref, *made)
                    degraded_refs.add(ref.pk)
                if full:
                    items.pop(max(partners))
                items.insert(rng.randrange(len(items) + 1), (copy.pk, kind))
                owed[kind] -= 1.0
            shown.append((plan, items))
        hit_ids = []
        for index in spread_order([any(check for _, check in items) for _, items in shown], rng):
            plan, items = shown[index]
            hit = Hit.objects.create(
                batch=locked,
                reference=references[plan.group],
                round=number,
                max_assignments=int(config["assignments_per_hit"]),
            )
            HitItem.objects.bulk_create(
                [
                    HitItem(
                        hit=hit,
                        candidate_id=cand,
                        position=pos,
                        is_attention_check=check == "attention",
                        is_degraded_check=check == "degraded",
                    )
                    for pos, (cand, check) in enumerate(items)
                ]
            )
            hit_ids.append(hit.pk)
    return hit_ids
