"""Claim to test: for the same judgment budget, which estimate ranks paraphrases closest to the truth --
plain averaging, EASL (Sakaguchi & Van Durme 2018), or per-worker standardised (z) scores?

Simulates references with 5 candidates each, every candidate with a known true similarity in [0, 1]
(Beta(2, 2)), and a pool of annotators; a HIT (one reference, up to 5 of its candidates) goes to a
random annotator, who returns a slider value per candidate:

    observed = clip(0.5 + offset + scale * (truth - 0.5) + noise, 0, 1)

Two pools: ``unbiased`` (everyone offset 0, scale 1, noise sd 0.15) and ``mixed`` (60% careful with
noise sd 0.12; 20% biased: offset uniform in +-0.25, scale uniform in [0.4, 1.3]; 20% inattentive:
a random slider value 60% of the time). For each budget (average judgments per candidate) it prints
Spearman's rho against the truth, averaged over replications, for

- ``average``: every candidate shown in turn (round-robin passes), raw mean (the paper's tables);
- ``easl``: round 0 then EASL rounds (anchors of highest variance, partners by match quality), the
  posterior mode (from Beta(1, 1) that is the mean of the slider values: only the allocation differs);
- ``z``: round-robin allocation, per-worker z-scores averaged per candidate (WMT's direct assessment);
- ``easl+z``: EASL allocation, z-score estimate;

and each one's ratio to ``average`` measured in the same run (same items, workers and seeds).

    .venv/bin/python bench/easl.py [--refs 40] [--reps 20] [--budgets 3,5,10] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, pstdev

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import spearmanr

from annotation.batches.easl import first_round, next_round, posteriors_from_scores, zscore_estimates

PER_HIT = 5


@dataclass(frozen=True)
class Annotator:
    offset: float = 0.0
    scale: float = 1.0
    noise: float = 0.15
    inattentive: float = 0.0  # chance of a random slider value

    def judge(self, truth: float, rng: random.Random) -> float:
        if rng.random() < self.inattentive:
            return round(rng.uniform(0, 100))
        value = 0.5 + self.offset + self.scale * (truth - 0.5) + rng.gauss(0.0, self.noise)
        return round(100 * min(1.0, max(0.0, value)))


def annotator_pool(kind: str, n: int, rng: random.Random) -> list[Annotator]:
    if kind == "unbiased":
        return [Annotator() for _ in range(n)]
    pool = []
    for i in range(n):
        share = i / n
        if share < 0.6:
            pool.append(Annotator(noise=0.12))
        elif share < 0.8:
            pool.append(Annotator(offset=rng.uniform(-0.25, 0.25), scale=rng.uniform(0.4, 1.3), noise=0.12))
        else:
            pool.append(Annotator(noise=0.12, inattentive=0.6))
    return pool


def collect(plans, truth, pool, rng, judgments, budget) -> None:
    """Give each planned HIT to a random annotator until the budget is spent."""
    for plan in plans:
        worker = rng.randrange(len(pool))
        for item in plan.items:
            if len(judgments) >= budget:
                return
            judgments.append((worker, item, pool[worker].judge(truth[item], rng)))


def run_uniform(groups, truth, pool, budget, rng) -> list:
    judgments: list = []
    passes = 0
    while len(judgments) < budget:
        collect(
            first_round(groups, items_per_hit=PER_HIT, seed=rng.randrange(10**9)), truth, pool, rng, judgments, budget
        )
        passes += 1
    return judgments


def run_easl(groups, truth, pool, budget, rng) -> list:
    judgments: list = []
    n_items = sum(len(v) for v in groups.values())
    collect(first_round(groups, items_per_hit=PER_HIT, seed=rng.randrange(10**9)), truth, pool, rng, judgments, budget)
    while len(judgments) < budget:
        scores: dict = {}
        for _, item, score in judgments:
            scores.setdefault(item, []).append(score)
        posts = posteriors_from_scores(scores, truth)
        plans = next_round(groups, posts, n_hits=n_items // PER_HIT, items_per_hit=PER_HIT, seed=rng.randrange(10**9))
        collect(plans, truth, pool, rng, judgments, budget)
    return judgments


def mean_estimate(judgments, items) -> dict:
    scores: dict = {}
    for _, item, score in judgments:
        scores.setdefault(item, []).append(score)
    posts = posteriors_from_scores(scores, items)
    return {item: posts[item].mode for item in items}


def z_estimate(judgments, items) -> dict:
    z = zscore_estimates(judgments)
    return {item: z.get(item, 0.0) for item in items}


def rho(estimate: dict, truth: dict) -> float:
    items = sorted(truth)
    return float(spearmanr([estimate[i] for i in items], [truth[i] for i in items]).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", type=int, default=40, help="references (5 candidates each)")
    parser.add_argument("--workers", type=int, default=30)
    parser.add_argument("--reps", type=int, default=20, help="replications per cell")
    parser.add_argument("--budgets", default="3,5,10", help="average judgments per candidate")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    budgets = [int(b) for b in args.budgets.split(",")]
    methods = ("average", "easl", "z", "easl+z")
    print(
        f"{args.refs} references x {PER_HIT} candidates, {args.workers} annotators, {args.reps} replications; "
        "Spearman's rho vs truth (mean +- sd over replications) and ratio to plain averaging"
    )
    for kind in ("unbiased", "mixed"):
        print(f"\n[{kind} annotators]")
        print(f"{'judgments/item':>15} " + " ".join(f"{m:>16}" for m in methods) + "   ratios to average")
        for per_item in budgets:
            results = {m: [] for m in methods}
            for rep in range(args.reps):
                rng = random.Random(args.seed * 100_003 + rep)
                groups = {r: [f"{r}.{c}" for c in range(PER_HIT)] for r in range(args.refs)}
                truth = {item: rng.betavariate(2, 2) for items in groups.values() for item in items}
                pool = annotator_pool(kind, args.workers, rng)
                budget = per_item * len(truth)
                state = rng.getstate()
                uniform = run_uniform(groups, truth, pool, budget, random.Random(rng.random()))
                rng.setstate(state)
                adaptive = run_easl(groups, truth, pool, budget, random.Random(rng.random()))
                results["average"].append(rho(mean_estimate(uniform, truth), truth))
                results["easl"].append(rho(mean_estimate(adaptive, truth), truth))
                results["z"].append(rho(z_estimate(uniform, truth), truth))
                results["easl+z"].append(rho(z_estimate(adaptive, truth), truth))
            base = fmean(results["average"])
            cells = " ".join(f"{fmean(results[m]):>9.3f} +-{pstdev(results[m]):.3f}" for m in methods)
            ratios = " ".join(f"{m} {fmean(results[m]) / base:.3f}" for m in methods[1:])
            print(f"{per_item:>15} {cells}   {ratios}")
    print(f"\n({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
