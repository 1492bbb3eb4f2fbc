"""The power and cost preview's model (annotation/batches/preview.py): the pure functions against a brute-force
simulation, ParaBank's constants against its released file, and the campaign's own variance estimate."""

import csv
import math
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from annotation.batches.preview import (
    PARABANK_BETWEEN_VAR,
    PARABANK_NOISE,
    PARABANK_NOISE_VAR,
    NoiseModel,
    campaign_noise,
    duration_text,
    expected_reliability,
    finish_hours,
    hourly_pay,
    raters_for,
    reliability_preview,
    reward_for_hourly,
    split_half_draws,
    variance_components,
)
from annotation.quality.split_half import rho1_from_halves, split_half_reliability

PARABANK = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "parabank-eval"
MODEL = NoiseModel(between_var=300.0, noise_var=450.0, source="test")


def brute_force_split_half(model: NoiseModel, *, candidates: int, raters: int, draws: int, seed: int) -> np.ndarray:
    """Every rating drawn, the raters of each candidate split at random into R//2 and the rest, Spearman's rho
    of the halves' means (scipy's) stepped up with Spearman-Brown's general form (one batch at a time): the
    dashboard's rule, written out plainly."""
    rng = np.random.default_rng(seed)
    a, b = raters // 2, raters - raters // 2
    out = []
    for _ in range(draws):
        true = rng.normal(50, math.sqrt(model.between_var), size=candidates)
        ratings = true[:, None] + rng.normal(0, math.sqrt(model.noise_var), size=(candidates, raters))
        order = np.argsort(rng.random((candidates, raters)), axis=1)
        shuffled = np.take_along_axis(ratings, order, axis=1)
        r = float(spearmanr(shuffled[:, :a].mean(axis=1), shuffled[:, a:].mean(axis=1))[0])
        out.append(split_half_reliability(r, a, b))
    return np.array(out)


def spearman_expected(r: float, n: int) -> float:
    """The expectation of Spearman's rho of n pairs from a bivariate normal of correlation r (Moran 1948)."""
    return 6 / (math.pi * (n + 1)) * (math.asin(r) + (n - 2) * math.asin(r / 2))


def half_correlation(rho1: float, a: int, b: int) -> float:
    """The correlation across candidates of the mean of ``a`` ratings with the mean of ``b`` other ratings
    (classical test theory: what ``rho1_from_halves`` inverts)."""
    if rho1 <= 0:
        return 0.0
    return rho1 / math.sqrt((rho1 + (1 - rho1) / a) * (rho1 + (1 - rho1) / b))


@pytest.mark.parametrize("raters", [2, 3, 5])
def test_the_simulation_matches_a_brute_force_one_and_the_spearman_brown_expectation(raters):
    fast = split_half_draws(MODEL, candidates=300, raters=raters, draws=400, seed=1)
    slow = brute_force_split_half(MODEL, candidates=300, raters=raters, draws=400, seed=2)
    a, b = raters // 2, raters - raters // 2
    # Spearman's rho of normal half means runs a little under their Pearson correlation
    expected = split_half_reliability(spearman_expected(half_correlation(MODEL.rho1, a, b), 300), a, b)
    assert abs(np.median(fast) - np.median(slow)) < 0.015
    assert abs(np.median(fast) - expected) < 0.015
    assert expected < expected_reliability(MODEL, raters) < expected + 0.04
    assert abs(np.std(fast) - np.std(slow)) < 0.01  # the same spread for a batch of that size


def test_more_assignments_give_a_higher_expected_reliability_and_more_candidates_a_narrower_range():
    values = [expected_reliability(MODEL, r) for r in range(1, 11)]
    assert values == sorted(values) and len(set(values)) == 10
    small = reliability_preview(MODEL, candidates=20, raters=3)
    large = reliability_preview(MODEL, candidates=2000, raters=3)
    assert small.low < large.low < large.high < small.high
    assert (
        reliability_preview(MODEL, candidates=200, raters=5).median
        > reliability_preview(MODEL, candidates=200, raters=3).median
    )
    one = reliability_preview(MODEL, candidates=200, raters=1)
    assert one.median is None and one.expected == pytest.approx(MODEL.rho1)  # one rater: nothing to split


def test_the_halves_correlation_is_inverted_for_equal_and_unequal_halves():
    for rho1 in (0.05, 0.4, 0.9):
        for a, b in ((1, 1), (1, 2), (2, 3), (5, 5)):
            assert rho1_from_halves(half_correlation(rho1, a, b), a, b) == pytest.approx(rho1)
    assert rho1_from_halves(-0.2, 2, 2) == 0.0


def test_raters_for_a_target_is_the_fewest_that_reach_it():
    for target in (0.7, 0.8, 0.9):
        n = raters_for(MODEL, target)
        assert expected_reliability(MODEL, n) >= target > expected_reliability(MODEL, n - 1)
    assert raters_for(NoiseModel(0.0, 100.0, ""), 0.8) is None


def test_variance_components_recover_known_ones():
    rng = np.random.default_rng(3)
    true = rng.normal(60, math.sqrt(250), size=3000)
    sizes = rng.integers(1, 6, size=3000)  # unbalanced: 1 to 5 ratings each
    groups = [t + rng.normal(0, math.sqrt(400), size=k) for t, k in zip(true, sizes)]
    between, noise, repeated = variance_components(groups)
    assert between == pytest.approx(250, rel=0.1) and noise == pytest.approx(400, rel=0.05)
    assert repeated == int((sizes >= 2).sum())
    assert variance_components([[50.0], [60.0]]) is None  # nobody judged anything twice
    assert variance_components([[50.0, 60.0]]) is None  # one candidate: no between part


@pytest.mark.skipif(not (PARABANK / "candidates.tsv").exists(), reason="ParaBank's released judgments not here")
def test_parabank_constants_are_what_its_released_judgments_give():
    refs = {
        r["ref_id"]: r["ref_sent"]
        for r in csv.DictReader(open(PARABANK / "ref.tsv", encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE)
    }
    scores = defaultdict(list)
    with open(PARABANK / "candidates.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            copy = "0" in row["sys_id"].split() or row["candidate"] == refs[row["ref_id"]]
            if not copy and row["human_score"] != "":
                scores[(row["ref_id"], row["candidate"])].append(float(row["human_score"]))
    between, noise, _ = variance_components(scores.values())
    assert between == pytest.approx(PARABANK_BETWEEN_VAR, abs=0.1)
    assert noise == pytest.approx(PARABANK_NOISE_VAR, abs=0.1)


def test_time_and_pay():
    assert finish_hours(seconds_per_hit=60, hits=100, assignments=3, raters_at_once=10) == pytest.approx(0.5)
    assert finish_hours(seconds_per_hit=60, hits=100, assignments=3, raters_at_once=2) is None  # needs 3 people
    assert hourly_pay(Decimal("1.50"), 10) == Decimal("9.00")
    assert hourly_pay(Decimal("1.00"), 7) == Decimal("8.57")
    assert reward_for_hourly(Decimal("8.00"), 7) == Decimal("0.94")  # 0.93 would pay 7.97 an hour
    assert hourly_pay(reward_for_hourly(Decimal("8.00"), 7), 7) >= Decimal("8.00")
    assert [duration_text(h) for h in (0.001, 0.25, 1.25, 50)] == ["1 min", "15 min", "1.2 hours", "2.1 days"]


@pytest.mark.django_db
def test_campaign_noise_uses_the_campaigns_own_judgments_once_there_are_enough(tmp_path):
    from annotation.models import Campaign
    from tests.annotation.parabank_data import import_contract

    import_contract(tmp_path)  # 3 real candidates: too few
    campaign = Campaign.objects.get(name="contract")
    assert campaign_noise(campaign).between_var == PARABANK_NOISE.between_var
    assert "candidates judged twice or more in this campaign: 1;" in campaign_noise(campaign).source

    rng = np.random.default_rng(0)
    refs = [f"{r}\tReference number {r} is here.\t5\t1.0" for r in range(1, 31)]
    cands = []
    for r in range(1, 31):
        for c in range(2):
            true = rng.normal(50, 20)
            for w in range(3):
                score = int(min(100, max(0, round(true + rng.normal(0, 5)))))
                cands.append(f"{w}\t{r}\t5\t{c + 1}\tCandidate {c} of {r}.\t0.1\t{score}\t2")
    import_contract(tmp_path, campaign="own", refs=refs, cands=cands)
    own = campaign_noise(Campaign.objects.get(name="own"))
    assert "this campaign's own judgments (60 candidates" in own.source
    assert own.noise_var == pytest.approx(25, rel=0.35) and own.rho1 > 0.85
