"""Claim to test: which rater-quality rules catch which bad raters, and what they cost careful ones.

ParaBank's rule (more than 10% of at least 5 attention checks failed; a check passes at 100) catches
raters who ignore the copies, but not raters who give every copy 100 and anything to the rest. The
degraded rule (a one-sided Mann-Whitney U test: the rater's degraded copies scored lower than the real
candidates they judged, p <= 0.05, once 5 degraded copies were judged) is meant to catch those.

A batch of ``--batch-hits`` HITs of 5 items, laid out as ``hit_batch_create`` does: a share
``--attention-rate`` of the HITs shows the reference's copy, a share ``--degraded-rate`` a degraded copy,
the checked HITs spread over the batch by the product's ``spread_order``, each check in place of a real
candidate. Each simulated rater does ``H`` consecutive HITs from a random place in the batch (the local
pool serves HITs in order). True similarities: real candidates Beta(4, 2) (mean 67), degraded copies
Beta(2, 4) (mean 33: a careful rater sees the damage, but not always: some real paraphrases are poor and
some degraded copies barely hurt). Rater kinds:

- ``careful``: truth + Gaussian noise (sd 12 points), a copy 100 (``--slip`` 3% of the time 85-99);
- ``all-100``: 100 everywhere;
- ``random``: uniform 0-100 everywhere, copies included;
- ``copy-only-careful``: 100 on copies, uniform 0-100 on everything else.

After every HIT the rules run on what the rater did so far, as after every verified submission in the
product, with the product's own functions (``annotation.quality``: ``attention_passed``,
``attention_rule_fails``, ``degraded_test``, ``degraded_rule_fails``) and the campaign defaults. A rater
is caught by a rule set when it fires after any of their HITs. Rule sets: attention only (ParaBank),
degraded only, both (the product). Printed per HITs-per-rater: raters of each kind caught (count and
share); the ``careful`` row is the careful raters wrongly disqualified.

    .venv/bin/python bench/quality.py [--raters 200] [--hits 20,50,100] [--slip 0.03] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django

django.setup()

from annotation.batches import HIT_SIZE, spread_order  # noqa: E402
from annotation.models import CAMPAIGN_DEFAULTS  # noqa: E402
from annotation.quality import attention_passed, attention_rule_fails, degraded_rule_fails, degraded_test  # noqa: E402

KINDS = ("careful", "all-100", "random", "copy-only-careful")
RULE_SETS = ("attention only (ParaBank)", "degraded only", "both")
REAL, ATTENTION, DEGRADED = "real", "attention", "degraded"


def batch_layout(n_hits: int, attention_rate: float, degraded_rate: float, rng: random.Random) -> list[list[str]]:
    """The kinds of the 5 items of each HIT, in the batch's order (checks spread like the product's)."""
    n_att, n_deg = round(n_hits * attention_rate), round(n_hits * degraded_rate)
    kinds = [[ATTENTION] if i < n_att else [DEGRADED] if i < n_att + n_deg else [] for i in range(n_hits)]
    hits = [check + [REAL] * (HIT_SIZE - len(check)) for check in kinds]
    for hit in hits:
        rng.shuffle(hit)
    order = spread_order([bool(check) for check in kinds], rng)
    return [hits[i] for i in order]


def judge(kind: str, item: str, rng: random.Random, slip: float = 0.03) -> int:
    """One rater's slider value for one item."""
    if kind == "all-100" or (kind == "copy-only-careful" and item == ATTENTION):
        return 100
    if kind in ("random", "copy-only-careful"):
        return rng.randint(0, 100)
    if item == ATTENTION:
        return 100 if rng.random() >= slip else rng.randint(85, 99)
    truth = rng.betavariate(4, 2) if item == REAL else rng.betavariate(2, 4)
    return round(min(100.0, max(0.0, 100 * truth + rng.gauss(0.0, 12.0))))


def first_caught(hits: list[list[tuple[str, int]]], settings: dict) -> dict[str, int | None]:
    """Per rule set, the number of HITs after which it first disqualifies the rater (None: never)."""
    passed = failed = 0
    degraded: list[int] = []
    real: list[int] = []
    caught: dict[str, int | None] = {name: None for name in RULE_SETS}
    for n, hit in enumerate(hits, start=1):
        for item, score in hit:
            if item == ATTENTION:
                if attention_passed(score, int(settings["attention_pass_mark"])):
                    passed += 1
                else:
                    failed += 1
            elif item == DEGRADED:
                degraded.append(score)
            else:
                real.append(score)
        attention = attention_rule_fails(
            passed,
            failed,
            min_checks=int(settings["min_attention_checks"]),
            max_failure_rate=float(settings["max_attention_failure_rate"]),
        )
        p = degraded_test(degraded, real, min_checks=int(settings["min_degraded_checks"]))
        worse = degraded_rule_fails(p, p_max=float(settings["degraded_p_max"]))
        for name, fires in zip(RULE_SETS, (attention, worse, attention or worse)):
            if fires and caught[name] is None:
                caught[name] = n
        if all(v is not None for v in caught.values()):
            break
    return caught


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raters", type=int, default=200, help="raters of each kind")
    parser.add_argument("--hits", default="20,50,100", help="HITs per rater, comma-separated")
    parser.add_argument("--batch-hits", type=int, default=800, help="HITs in the batch (ParaBank: ~800)")
    parser.add_argument("--attention-rate", type=float, default=0.1)
    parser.add_argument("--degraded-rate", type=float, default=0.1)
    parser.add_argument("--slip", type=float, default=0.03, help="a careful rater's chance of missing 100 on a copy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = dict(CAMPAIGN_DEFAULTS)
    rng = random.Random(args.seed)
    layout = batch_layout(args.batch_hits, args.attention_rate, args.degraded_rate, rng)
    started = time.perf_counter()
    print(
        f"batch: {args.batch_hits} HITs of {HIT_SIZE}, attention rate {args.attention_rate}, degraded rate "
        f"{args.degraded_rate}; {args.raters} raters of each kind; rules: attention > "
        f"{settings['max_attention_failure_rate']:.0%} failed of >= {settings['min_attention_checks']} checks; "
        f"degraded p > {settings['degraded_p_max']} once >= {settings['min_degraded_checks']} degraded checks"
    )
    for per_rater in (int(x) for x in args.hits.split(",")):
        print(
            f"\nHITs per rater: {per_rater} (about {per_rater * args.attention_rate:.0f} attention and "
            f"{per_rater * args.degraded_rate:.0f} degraded checks each)"
        )
        print("| rater kind | " + " | ".join(RULE_SETS) + " | median HITs until caught (both) |")
        print("|---" * (len(RULE_SETS) + 2) + "|")
        for kind in KINDS:
            counts = {name: 0 for name in RULE_SETS}
            when = []
            for _ in range(args.raters):
                start = rng.randrange(len(layout))
                hits = [
                    [(item, judge(kind, item, rng, args.slip)) for item in layout[(start + k) % len(layout)]]
                    for k in range(per_rater)
                ]
                caught = first_caught(hits, settings)
                for name, n in caught.items():
                    counts[name] += n is not None
                if caught["both"] is not None:
                    when.append(caught["both"])
            when.sort()
            median = when[len(when) // 2] if when else "-"
            label = f"{kind} (wrongly disqualified)" if kind == "careful" else kind
            print(
                f"| {label} | "
                + " | ".join(f"{counts[name]}/{args.raters} ({counts[name] / args.raters:.0%})" for name in RULE_SETS)
                + f" | {median} |"
            )
    print(f"\n({time.perf_counter() - started:.0f} s, seed {args.seed})")


if __name__ == "__main__":
    main()
