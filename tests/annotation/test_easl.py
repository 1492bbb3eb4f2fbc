"""EASL: the Beta update, match quality, round structure, the stopping rule, the z-score estimate, and
rounds created on a batch."""

from __future__ import annotations

import json
import math
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.batches.easl import (
    BetaPosterior,
    first_round,
    match_quality,
    next_round,
    posteriors_from_scores,
    stopping_reason,
    zscore_estimates,
)
from annotation.batches.easl_rounds import EaslError, easl_round_create, easl_status
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Campaign,
    Candidate,
    CandidateSystem,
    Hit,
    Judgment,
    Reference,
    Worker,
)

# --- the model ----------------------------------------------------------------------------------


def test_update_rule_and_na_scores():
    post = BetaPosterior().update(70)
    assert (post.a, post.b) == pytest.approx((1.7, 1.3))
    assert post.update(None) == post
    post = post.update(100).update(0)
    assert (post.a, post.b) == pytest.approx((2.7, 2.3))


def test_mode_mean_and_variance():
    assert BetaPosterior().mode == 0.5  # undefined at Beta(1, 1): the mean
    assert BetaPosterior(1.7, 1.3).mode == pytest.approx(0.7)
    assert BetaPosterior(3, 1).mode == pytest.approx(1.0)
    assert BetaPosterior(2, 2).variance == pytest.approx(4 / (16 * 5))
    # from Beta(1, 1) the mode is the mean of the slider values
    post = posteriors_from_scores({"x": [20, 50, 95, None]})["x"]
    assert post.mode == pytest.approx((0.20 + 0.50 + 0.95) / 3)
    assert post.variance < BetaPosterior().variance


def test_match_quality_formula():
    g = 0.1
    assert match_quality(0.5, 0.01, 0.5, 0.01, g=g) == pytest.approx(math.sqrt(0.02 / 0.04))
    expected = math.sqrt(0.02 / 0.04) * math.exp(-(0.2**2) / (2 * 0.04))
    assert match_quality(0.3, 0.01, 0.5, 0.01, g=g) == pytest.approx(expected)  # 0.4289
    assert match_quality(0.5, 0.01, 0.3, 0.01) == match_quality(0.3, 0.01, 0.5, 0.01)
    assert match_quality(0.5, 0.01, 0.9, 0.01) < match_quality(0.5, 0.01, 0.6, 0.01)
    assert match_quality(0.5, 0.05, 0.5, 0.05) < match_quality(0.5, 0.01, 0.5, 0.01)
    assert match_quality(0.5, 0.01, 0.5, 0.01, g=0.3) > match_quality(0.5, 0.01, 0.5, 0.01, g=0.1)


# --- rounds --------------------------------------------------------------------------------------

GROUPS = {"r1": ["a", "b", "c", "d", "e", "f", "g"], "r2": ["h", "i", "j"], "r3": ["k"]}


def test_round_zero_shows_every_item_once_in_even_hits_of_one_group():
    plans = first_round(GROUPS, items_per_hit=5, seed=3)
    shown = [item for plan in plans for item in plan.items]
    assert sorted(shown) == sorted(i for items in GROUPS.values() for i in items)
    assert all(set(plan.items) <= set(GROUPS[plan.group]) for plan in plans)
    assert sorted(len(p.items) for p in plans if p.group == "r1") == [3, 4]
    assert first_round(GROUPS, seed=3) == plans and first_round(GROUPS, seed=4) != plans


def test_later_rounds_anchor_on_highest_variance_and_stay_in_the_group():
    scores = {item: [50] * 6 for items in GROUPS.values() for item in items}
    scores["b"], scores["j"] = [50], [40, 60]  # the least judged are the most uncertain
    posts = posteriors_from_scores(scores)
    plans = next_round(GROUPS, posts, n_hits=2, items_per_hit=3, seed=1)
    assert [p.anchor for p in plans] == ["b", "j"]
    for plan in plans:
        assert plan.anchor in plan.items and len(set(plan.items)) == len(plan.items) == 3
        assert set(plan.items) <= set(GROUPS[plan.group])


def test_partners_are_drawn_by_match_quality():
    groups = {"r": ["anchor", "close", "far"]}
    posts = {"anchor": BetaPosterior(1.5, 1.5), "close": BetaPosterior(3.5, 3.5), "far": BetaPosterior(7.65, 1.35)}
    picks = Counter()
    for seed in range(400):
        (plan,) = next_round(groups, posts, n_hits=1, items_per_hit=2, seed=seed)
        assert plan.anchor == "anchor"
        picks[next(i for i in plan.items if i != "anchor")] += 1
    q_close = match_quality(0.5, posts["anchor"].variance, posts["close"].mode, posts["close"].variance)
    q_far = match_quality(0.5, posts["anchor"].variance, posts["far"].mode, posts["far"].variance)
    assert picks["close"] / 400 == pytest.approx(q_close / (q_close + q_far), abs=0.07)
    assert picks["close"] > picks["far"]


def test_stopping_rule():
    tight = {"x": BetaPosterior(20, 20), "y": BetaPosterior(30, 5)}
    loose = {**tight, "z": BetaPosterior(2, 2)}
    assert "variance" in stopping_reason(tight, variance_threshold=0.02)
    assert stopping_reason(loose, variance_threshold=0.02) is None
    assert "budget" in stopping_reason(loose, variance_threshold=0.02, judgments=100, judgment_budget=100)
    assert stopping_reason(loose, variance_threshold=0.02, judgments=99, judgment_budget=100) is None


def test_zscore_estimate_removes_worker_offset_and_scale():
    truth = {"a": 20, "b": 40, "c": 60, "d": 80}
    fair = [("fair", item, t) for item, t in truth.items()]
    harsh = [("harsh", item, 0.5 * t - 5) for item, t in truth.items()]  # offset and scale
    z = zscore_estimates(fair + harsh + [("fair", "e", None)])
    assert set(z) == set(truth)
    assert sorted(z, key=z.get) == ["a", "b", "c", "d"]
    # each worker's z-scores agree exactly, so the estimate is their common value
    assert z["a"] == pytest.approx(-1.3416, abs=1e-3) and z["d"] == pytest.approx(1.3416, abs=1e-3)
    # a raw mean is fooled when the harsh worker judges only the best item; z-scores are not
    mixed = [
        ("fair", "a", 20),
        ("fair", "b", 40),
        ("fair", "c", 60),
        ("harsh", "d", 35),
        ("harsh", "e", 10),
        ("harsh", "f", 15),
    ]
    z = zscore_estimates(mixed)
    assert z["d"] > z["b"]
    assert zscore_estimates([("same", "a", 50), ("same", "b", 50)]) == {"a": 0.0, "b": 0.0}


# --- on a batch ----------------------------------------------------------------------------------


@pytest.fixture
def easl_batch(db):
    campaign = Campaign.objects.create(name="easl")
    for r in range(2):
        ref = Reference.objects.create(campaign=campaign, ref_id=str(r), text=f"Reference {r}.", length_bucket=5)
        for c in range(6):
            Candidate.objects.create(reference=ref, text=f"Candidate {c} of {r}.")
        copy = Candidate.objects.create(reference=ref, text=ref.text)  # an attention copy is not an item
        CandidateSystem.objects.create(candidate=copy, system="0")
    return Batch.objects.create(
        campaign=campaign,
        provider="local",
        settings={"mode": "easl", "attention_rate": 0.0, "easl": {"variance_threshold": 0.03, "items_per_hit": 5}},
    )


def judge_round(batch: Batch, hit_ids, *, score=lambda cand: 50, worker="w1"):
    worker, _ = Worker.objects.get_or_create(provider="local", external_id=worker)
    for hit in Hit.objects.filter(pk__in=hit_ids).prefetch_related("items"):
        assignment = Assignment.objects.create(
            campaign=batch.campaign,
            hit=hit,
            worker=worker,
            provider="local",
            external_assignment_id=f"{worker.external_id}-{hit.pk}",
        )
        for item in hit.items.all():
            Judgment.objects.create(
                assignment=assignment,
                candidate_id=item.candidate_id,
                worker=worker,
                score=score(item.candidate_id),
                fluency=2,
            )


def test_round_zero_then_rounds_until_the_variance_rule_stops(easl_batch):
    first = easl_round_create(batch=easl_batch, seed=1)
    assert first["round"] == 0 and first["hits"] == 4  # 2 references x 6 candidates: HITs of 3
    shown = list(Hit.objects.filter(pk__in=first["hit_ids"]).values_list("items__candidate_id", flat=True))
    items = Candidate.objects.exclude(systems__system="0").values_list("id", flat=True)
    assert sorted(shown) == sorted(items)
    with pytest.raises(EaslError, match="still has HITs"):
        easl_round_create(batch=easl_batch)
    for hit_pk in first["hit_ids"]:  # taken but not submitted: the round is still open
        taker = Worker.objects.create(provider="local", external_id=f"taker-{hit_pk}")
        Assignment.objects.create(
            campaign=easl_batch.campaign,
            hit_id=hit_pk,
            worker=taker,
            provider="local",
            external_assignment_id=f"taken-{hit_pk}",
            status=AssignmentStatus.ACCEPTED,
        )
    with pytest.raises(EaslError, match="still has HITs"):
        easl_round_create(batch=easl_batch)
    judge_round(easl_batch, first["hit_ids"])
    second = easl_round_create(batch=easl_batch, seed=2)
    assert second["round"] == 1 and second["hits"] == 3  # ceil(12 items / 5)
    assert all(Hit.objects.get(pk=h).items.count() == 5 for h in second["hit_ids"])
    assert sorted(Hit.objects.filter(round=1).values_list("id", flat=True)) == sorted(second["hit_ids"])
    assert sorted(Hit.objects.filter(round=0).values_list("id", flat=True)) == sorted(first["hit_ids"])
    rounds, last = 1, second
    while True:
        judge_round(easl_batch, last["hit_ids"], worker=f"w{rounds}")
        last = easl_round_create(batch=easl_batch)
        if last is None:
            break
        rounds += 1
        assert last["round"] == rounds < 30
    status = easl_status(batch=easl_batch)
    assert "variance" in status["stop_reason"] and status["max_variance"] < 0.03


def test_judgment_budget_stops_and_the_cli_says_so(easl_batch):
    easl_batch.settings["easl"]["judgment_budget"] = 20
    easl_batch.save()
    out = StringIO()
    call_command("easl_round", str(easl_batch.pk), "--seed", "5", stdout=out)
    result = json.loads(out.getvalue())
    assert result["round"] == 0 and result["stopped"] is False
    judge_round(easl_batch, result["hit_ids"])  # 12 judgments
    call_command("easl_round", str(easl_batch.pk), stdout=(out := StringIO()))
    result = json.loads(out.getvalue())
    assert result["round"] == 1 and result["hits"] == 1  # only 8 judgments left in the budget: one HIT of 5
    judge_round(easl_batch, result["hit_ids"], worker="w2")
    call_command("easl_round", str(easl_batch.pk), stdout=(out := StringIO()))
    result = json.loads(out.getvalue())
    assert result["round"] == 2 and result["items"] == 3  # the last 3 judgments of the budget, no more
    judge_round(easl_batch, result["hit_ids"], worker="w3")
    call_command("easl_round", str(easl_batch.pk), stdout=(out := StringIO()))
    result = json.loads(out.getvalue())
    assert result["stopped"] is True and "budget" in result["reason"] and result["judgments"] == 20
    call_command("easl_round", str(easl_batch.pk), stdout=(out := StringIO()))
    assert json.loads(out.getvalue())["stopped"] is True


def test_disqualified_workers_and_rejected_assignments_do_not_count(easl_batch):
    first = easl_round_create(batch=easl_batch, seed=1)
    judge_round(easl_batch, first["hit_ids"], worker="cheat")
    assert easl_status(batch=easl_batch)["judgments"] == 12
    Worker.objects.filter(external_id="cheat").update(disqualified=True)
    assert easl_status(batch=easl_batch)["judgments"] == 0
    Worker.objects.filter(external_id="cheat").update(disqualified=False)
    Assignment.objects.update(status=AssignmentStatus.REJECTED)
    assert easl_status(batch=easl_batch)["judgments"] == 0


def test_attention_copies_join_later_rounds_at_the_batch_rate(easl_batch):
    easl_batch.settings["attention_rate"] = 1.0
    easl_batch.save()
    first = easl_round_create(batch=easl_batch, seed=1)
    # round 0 HITs of 3 have room: each gets the reference's copy, and every item is still shown once
    assert all(Hit.objects.get(pk=h).items.filter(is_attention_check=True).count() == 1 for h in first["hit_ids"])
    judge_round(easl_batch, first["hit_ids"])
    second = easl_round_create(batch=easl_batch, seed=2)
    for hit in Hit.objects.filter(pk__in=second["hit_ids"]):
        assert hit.items.count() == 5 and hit.items.filter(is_attention_check=True).count() == 1
        copy = hit.items.get(is_attention_check=True).candidate
        assert copy.text == hit.reference.text


def test_refusals(easl_batch):
    plain = Batch.objects.create(campaign=easl_batch.campaign, provider="local", settings={})
    with pytest.raises(EaslError, match="not in EASL mode"):
        easl_round_create(batch=plain)
    with pytest.raises(CommandError, match="no batch"):
        call_command("easl_round", "999999")


@pytest.mark.parametrize(
    "options,message",
    [
        ({"items_per_hit": 0}, r"'easl.items_per_hit': 0 is out of range"),
        ({"g": "abc"}, r"'easl.g': expected a number"),
        ({"hits_per_round": -2}, r"'easl.hits_per_round': -2 is out of range"),
        ({"assignments_per_hit": 0}, r"'easl.assignments_per_hit': 0 is out of range"),
    ],
)
def test_bad_easl_options_are_refused_before_a_round_is_made(easl_batch, options, message):
    first = easl_round_create(batch=easl_batch, seed=1)
    judge_round(easl_batch, first["hit_ids"])
    easl_batch.settings["easl"].update(options)  # stored by hand: create_hit_batch refuses them (test_batches)
    easl_batch.save()
    with pytest.raises(CommandError, match=rf"batch {easl_batch.pk}: batch setting {message}"):
        call_command("easl_round", str(easl_batch.pk), "--force")
    assert set(easl_batch.hits.values_list("round", flat=True)) == {0}


def test_an_easl_batch_made_by_the_cli_gets_its_rounds(db):
    sample = Campaign.objects.create(name="cli-easl")
    for c in range(6):
        ref = Reference.objects.get_or_create(campaign=sample, ref_id="r", text="A reference.", length_bucket=5)[0]
        CandidateSystem.objects.create(candidate=Candidate.objects.create(reference=ref, text=f"Cand {c}."), system="1")
    out = StringIO()
    call_command(
        "create_hit_batch",
        "--campaign",
        "cli-easl",
        "--provider",
        "local",
        "--lengths",
        "5",
        "--assignments",
        "2",
        "--attention-rate",
        "0",
        "--batch-settings",
        '{"mode": "easl", "easl": {"items_per_hit": "3", "assignments_per_hit": 2}}',
        stdout=out,
    )
    batch = Batch.objects.get(pk=json.loads(out.getvalue())["batch"])
    judge_round(batch, list(batch.hits.values_list("id", flat=True)))
    judge_round(batch, list(batch.hits.values_list("id", flat=True)), worker="w2")
    created = easl_round_create(batch=batch, seed=3)
    hits = Hit.objects.filter(pk__in=created["hit_ids"])
    assert created["round"] == 1 and created["hits"] == 2  # ceil(6 items / 3 per HIT)
    assert {h.items.count() for h in hits} == {3} and {h.max_assignments for h in hits} == {2}
