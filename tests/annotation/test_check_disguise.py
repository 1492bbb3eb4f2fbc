"""Degraded checks cannot be picked out from their text (issue 36.1), and the planner never gives a reference
a second HIT with a lone candidate (issue 37.7).

The old check was the reference with one 2-6-word run swapped: "same length as the reference and one
contiguous differing run of 2-6 words" found 22 of 22 checks and no real candidate."""

from __future__ import annotations

import random

import pytest

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.hits.submissions import JudgmentInput, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import Campaign, Candidate, CandidateSystem, HitItem, Reference, Worker
from annotation.quality.degraded import detectability, reference_rule_flags

from .builders import platform_confirms, published_batch

pytestmark = pytest.mark.django_db

WORDS = (
    "the a city council voted on Monday to close old bridge after years of debate about its cost "
    "children played in park near river while parents watched from benches under tall trees "
    "scientists found new evidence that ancient people traded shells across wide sea long ago"
).split()
SWAPS = {"the": "this", "voted": "decided", "close": "shut", "old": "aging", "years": "decades", "cost": "price"}


def paraphrase(reference: str, rng: random.Random) -> str:
    """A paraphrase-like edit of ``reference``: words swapped, dropped, added or moved at a few places (as
    constrained decoding varies a reference), so the real candidates' lengths and edges vary."""
    tokens = reference.split()
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(tokens))
        kind = rng.random()
        if kind < 0.4:
            tokens[i] = SWAPS.get(tokens[i].lower(), rng.choice(WORDS))
        elif kind < 0.6 and len(tokens) > 4:
            del tokens[i]
        elif kind < 0.8:
            tokens.insert(i, rng.choice(WORDS))
        else:
            tokens.insert(rng.randrange(len(tokens)), tokens.pop(i))
    return " ".join(tokens)


def realistic_campaign(n_refs: int = 40, per_ref: int = 8, seed: int = 0) -> Campaign:
    rng = random.Random(seed)
    campaign = Campaign.objects.create(name="disguise")
    for r in range(n_refs):
        n = rng.choice((6, 9, 12, 16, 20))
        text = " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."
        ref = Reference.objects.create(campaign=campaign, ref_id=f"r{r}", length_bucket=10, text=text)
        texts = {paraphrase(text, rng) for _ in range(per_ref)} - {text}
        for k, cand_text in enumerate(sorted(texts)):
            cand = Candidate.objects.create(reference=ref, text=cand_text)
            CandidateSystem.objects.create(candidate=cand, system=str(k + 1))
    return campaign


def test_neither_the_text_rule_nor_a_classifier_on_length_runs_and_edges_separates_checks_from_candidates():
    batch = hit_batch_create(
        campaign=realistic_campaign(),
        params=BatchParams(provider="local", lengths=(10,), attention_rate=0, degraded_rate=0.5, seed=4),
    )
    items = list(HitItem.objects.filter(hit__batch=batch).select_related("candidate", "hit__reference"))
    measured = detectability([(i.hit.reference.text, i.candidate.text, i.is_degraded_check) for i in items])
    assert measured.checks >= 30 and measured.real >= 200
    # the old checks: 100% found
    assert measured.rule_auc <= 0.65 and measured.rule_finds < measured.checks / 2, measured
    assert measured.classifier_auc <= 0.65, measured


def submit(hit, worker: str, score) -> str | None:
    aid = f"{worker}-{hit.pk}"
    assignment_submit(
        hit=hit,
        assignment_id=aid,
        worker_id=worker,
        judgments=[JudgmentInput(candidate=i.candidate_id, score=score(i), fluency=2) for i in hit.items.all()],
        token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker),
    )
    platform_confirms(aid)
    return Worker.objects.get(external_id=worker).disqualified_reason or None


def test_the_rater_who_scores_what_the_text_rule_flags_0_and_the_rest_100_is_barred():
    """The issue's bot: 100 everywhere (the copies pass) except 0 on what the rule flags; it stayed qualified
    and was the only counted rater of a release when the rule found every check."""
    campaign = realistic_campaign(n_refs=30, per_ref=4)
    campaign.settings = {**campaign.settings, "min_judgments_per_worker": 1}
    campaign.save()
    batch = published_batch(campaign, lengths=(10,), attention_rate=0, degraded_rate=1.0, seed=2)
    checked = [h for h in batch.hits.order_by("id") if h.items.filter(is_degraded_check=True).exists()]
    assert len(checked) >= 20

    def bot(item) -> int:
        return 0 if reference_rule_flags(item.hit.reference.text, item.candidate.text) else 100

    reason = None
    for hit in checked:
        reason = submit(hit, "BOT", bot)
        if reason:
            break
    assert reason is not None and "Mann-Whitney" in reason and "attention" not in reason


def test_a_reference_never_gets_a_second_hit_with_a_lone_candidate():
    campaign = Campaign.objects.create(name="lone")
    sizes = {"five": 5, "six": 6, "eleven": 11, "seven": 7}
    for name, n in sizes.items():
        ref = Reference.objects.create(
            campaign=campaign, ref_id=name, length_bucket=10, text=f"The reference called {name} is here today."
        )
        for k in range(n):
            Candidate.objects.create(reference=ref, text=f"Paraphrase {k} of the {name} reference is here.")
    for attention, degraded in ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.5, 0.5)):
        batch = hit_batch_create(
            campaign=campaign,
            params=BatchParams(provider="local", lengths=(10,), attention_rate=attention, degraded_rate=degraded),
        )
        real: dict[str, list[int]] = {}
        for hit in batch.hits.prefetch_related("items"):
            shown = [i for i in hit.items.all() if not (i.is_attention_check or i.is_degraded_check)]
            real.setdefault(hit.reference.ref_id, []).append(len(shown))
            assert len(hit.items.all()) <= 5
        for ref, sizes_shown in real.items():  # every candidate once, in HITs of sizes differing by one at most
            assert sum(sizes_shown) == sizes[ref] and max(sizes_shown) - min(sizes_shown) <= 1, (ref, sizes_shown)
            assert len(sizes_shown) == 1 or min(sizes_shown) >= 2, (ref, sizes_shown)
        if attention == degraded == 0:  # as few HITs as hold them: 6 -> 3 + 3, never 5 + a lone 1
            assert {ref: sorted(n) for ref, n in real.items()} == {
                "five": [5],
                "six": [3, 3],
                "eleven": [3, 4, 4],
                "seven": [3, 4],
            }
        if attention == 1.0:  # a full reference is cut to leave its check a place: 5 -> 3 + 2 and the copy
            copies = HitItem.objects.filter(hit__batch=batch, is_attention_check=True)
            assert {i.hit.reference.ref_id for i in copies} == set(sizes)
            assert sorted(real["five"]) == [2, 3]
        if degraded == 1.0:
            checks = HitItem.objects.filter(hit__batch=batch, is_degraded_check=True)
            assert {i.hit.reference.ref_id for i in checks} == set(sizes)
