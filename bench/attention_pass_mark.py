"""Claim to test: which attention pass mark fails careful phone workers least while still catching careless ones.

ParaBank passed a copy of the reference only at exactly 100. On a 390-pixel phone the slider's thumb travels
about 210 CSS pixels for 100 points (the screen less the page's margins, the value and a 1.5rem thumb: 2.1 px
a point) and a fingertip lands a few millimetres from its aim (1 mm is about 6 CSS px on such a phone, so
about 3 points): a careful worker tapping the right end for a copy lands near 100, not on it (issue 37:
"tapped about 95 twice, 0% of checks passed").

Each simulated rater does ``H`` HITs in a row of a batch where a share ``--attention-rate`` of the HITs shows
the copy; after every HIT ParaBank's rule runs with the product's own functions and the campaign defaults
(``annotation.quality.workers.attention_passed`` / ``attention_rule_fails``: more than 10% of at least 5 checks
failed). A rater is disqualified when it fires after any of their HITs. Rater kinds, on a copy:

- ``careful (phone)``: aims A points in from the end (a thumb avoids the screen's edge) with Gaussian tap
  error of SD S points, clamped to 0-100; one row per tap model A:S of ``--taps``;
- ``careful (mouse)``: 100, but ``--slip`` of the time 85-99 (as ``bench/quality.py``'s careful rater);
- ``skimmer``: does not see that the copy is the reference: scores it like a good paraphrase, Beta(4, 2) x 100
  plus Gaussian noise of SD 12 (``bench/quality.py``'s real candidates);
- ``random``: uniform 0-100.

Printed per pass mark and HITs per rater: raters of each kind disqualified (count and share); for the careful
kinds that is the share wrongly barred.

    .venv/bin/python bench/attention_pass_mark.py [--raters 500] [--hits 50,100] [--marks 100,95,90,85,80]
        [--taps 2:2,3:3,5:3,3:5]
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

from annotation.models import CAMPAIGN_DEFAULTS  # noqa: E402
from annotation.quality.workers import attention_passed, attention_rule_fails  # noqa: E402

KINDS = ("careful (mouse)", "skimmer", "random")


def copy_score(kind: str, rng: random.Random, *, aim: float = 0.0, tap_sd: float = 0.0, slip: float = 0.03) -> int:
    """One rater's slider value for the reference's copy."""
    if kind.startswith("careful (phone"):
        return round(min(100.0, max(0.0, 100.0 - aim + rng.gauss(0.0, tap_sd))))
    if kind == "careful (mouse)":
        return 100 if rng.random() >= slip else rng.randint(85, 99)
    if kind == "skimmer":
        return round(min(100.0, max(0.0, 100 * rng.betavariate(4, 2) + rng.gauss(0.0, 12.0))))
    return rng.randint(0, 100)


def disqualified(scores: list[int], hits_with_copy: list[bool], pass_mark: int) -> bool:
    """Whether ParaBank's rule (campaign defaults) fires after any HIT of the rater's run."""
    passed = failed = 0
    checks = iter(scores)
    for has_copy in hits_with_copy:
        if has_copy:
            if attention_passed(next(checks), pass_mark):
                passed += 1
            else:
                failed += 1
        if attention_rule_fails(
            passed,
            failed,
            min_checks=int(CAMPAIGN_DEFAULTS["min_attention_checks"]),
            max_failure_rate=float(CAMPAIGN_DEFAULTS["max_attention_failure_rate"]),
        ):
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raters", type=int, default=500, help="raters of each kind")
    parser.add_argument("--hits", default="50,100", help="HITs per rater, comma-separated")
    parser.add_argument("--marks", default="100,95,90,85,80", help="pass marks to compare, comma-separated")
    parser.add_argument("--attention-rate", type=float, default=0.1)
    parser.add_argument(
        "--taps", default="2:2,3:3,5:3,3:5", help="phone tap models: points aimed in from the end:SD of the error"
    )
    parser.add_argument("--slip", type=float, default=0.03, help="a mouse user's chance of missing 100")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    marks = [int(m) for m in args.marks.split(",")]
    print(
        f"attention rate {args.attention_rate}; {args.raters} raters of each kind; rule: more than "
        f"{CAMPAIGN_DEFAULTS['max_attention_failure_rate']:.0%} of >= {CAMPAIGN_DEFAULTS['min_attention_checks']} "
        f"checks failed; mouse slip {args.slip:.0%}"
    )
    for per_rater in (int(x) for x in args.hits.split(",")):
        print(f"\nHITs per rater: {per_rater} (about {per_rater * args.attention_rate:.0f} attention checks each)")
        print("| rater kind | " + " | ".join(f"pass mark {m}" for m in marks) + " |")
        print("|---" * (len(marks) + 1) + "|")
        taps = [tuple(float(x) for x in model.split(":")) for model in args.taps.split(",")]
        phones = {f"careful (phone, aim {a:g} in, SD {sd:g})": (a, sd) for a, sd in taps}
        for kind in [*phones, *KINDS]:
            aim, tap_sd = phones.get(kind, (0.0, 0.0))
            rng = random.Random(f"{args.seed}:{per_rater}:{kind}")
            counts = dict.fromkeys(marks, 0)
            for _ in range(args.raters):
                hits = [rng.random() < args.attention_rate for _ in range(per_rater)]
                scores = [copy_score(kind, rng, aim=aim, tap_sd=tap_sd, slip=args.slip) for h in hits if h]
                for mark in marks:  # the same rater's taps under each pass mark
                    counts[mark] += disqualified(scores, hits, mark)
            label = f"{kind}: wrongly disqualified" if kind.startswith("careful") else f"{kind}: caught"
            print(
                f"| {label} | "
                + " | ".join(f"{counts[m]}/{args.raters} ({counts[m] / args.raters:.0%})" for m in marks)
                + " |"
            )
    print(f"\n({time.perf_counter() - started:.1f} s, seed {args.seed})")


if __name__ == "__main__":
    main()
