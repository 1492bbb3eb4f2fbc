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
product, with the product's own functions (``annotation.quality.workers``: ``attention_passed``,
``attention_rule_fails``, ``degraded_test``, ``degraded_rule_fails``) and the campaign defaults. A rater
is caught by a rule set when it fires after any of their HITs. Rule sets: attention only (ParaBank),
degraded only, both (the product). Printed per HITs-per-rater: raters of each kind caught (count and
share); the ``careful`` row is the careful raters wrongly disqualified.

Two more parts (issue 36.1):

- *Can a check be picked out from its text?* Over ParaBank's released candidates (``--parabank``, default
  /work/shared/data/parabank-eval; the demo corpus's sentences with made-up paraphrases when it is not
  there), HITs cut as the product cuts them, a check in a share ``--degraded-rate`` of them: (a) the rule
  "same length as the reference and differs from it in one contiguous run of 2-6 words" and (b) a logistic
  regression on length difference, edit-run count and first/last word kept (5-fold cross-validated) try to
  tell checks from real candidates. AUC of each, for the old checks (the reference with one run swapped,
  the baseline, measured in the same run) and the product's (``annotation.quality.degraded``); target <= 0.65.
- *Derived checks and the rater test:* a check is now a damaged copy of a real candidate, so its true
  similarity is its source's times (1 - damage), damage ~ U(``--damage``). The test compares a rater's
  checks with every real candidate they judged (the product) or only with the sources of their checks;
  printed: raters of each kind caught under each comparison.

Two more parts (issue 46; ``--only-issue46`` runs only these):

- *Agreement:* raters who spot every check (0 on it, whatever it looks like) and give the real candidates 100
  or random scores, against careful ones (none miss an attention copy), caught by the degraded rule and by it with the
  agreement rule (``agreement_test``: a one-sided test of Pearson's r between a rater's scores and the other
  workers' mean per real candidate); then the rule on ParaBank's released judgments, worker by worker.
- *A reader of whole pages and batches:* three page-reading rules and a gradient-boosted classifier on 15
  page and batch features (cross-validated) against checks made as before issue 46 (the baseline) and now.

Over 600 lines on purpose: a script that runs standalone (no app imports it), its simulations and attackers
each only for it, printed as one report.

    .venv/bin/python bench/quality.py [--raters 200] [--hits 20,50,100] [--slip 0.03] [--seed 0]
        [--parabank DIR] [--damage 0.3,0.8] [--only-issue46]
"""

from __future__ import annotations

import argparse
import csv
import difflib
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django

django.setup()

from annotation.batches.making import balanced_chunks, outside_donors, spread_order  # noqa: E402
from annotation.batches.params import HIT_SIZE  # noqa: E402
from annotation.models import CAMPAIGN_DEFAULTS  # noqa: E402
from annotation.quality.degraded import degraded_candidate_text, detectability, edit_runs, zipf  # noqa: E402
from annotation.quality.workers import (  # noqa: E402
    agreement_rule_fails,
    agreement_test,
    attention_passed,
    attention_rule_fails,
    degraded_rule_fails,
    degraded_test,
)

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


PARABANK = Path("/work/shared/data/parabank-eval")
DEMO_CORPUS = Path(__file__).resolve().parents[1] / "generation" / "demo" / "corpus.txt"


def old_degraded_text(reference: str, donors: list[str], rng: random.Random) -> str | None:
    """The baseline: the check before issue 36 (the reference with a run of 2-6 tokens swapped for as many
    tokens of another reference, first and last token kept), as annotation.batches.making made it."""
    tokens = reference.split()
    n = len(tokens)
    if n < 4:
        return None
    span = max(2, min(6, (n + 2) // 5, n - 2))
    phrases = [d.split() for d in donors if len(d.split()) >= span]
    if not phrases:
        return None
    donor = rng.choice(phrases)
    start, at = rng.randrange(1, n - span), rng.randrange(len(donor) - span + 1)
    return " ".join([*tokens[:start], *donor[at : at + span], *tokens[start + span :]])


def sample_candidates(directory: Path, rng: random.Random) -> tuple[dict[str, str], dict[str, list[str]], str]:
    """(references, their real candidates, where from): ParaBank's released ones, else the demo corpus's
    sentences with made-up paraphrases (words dropped, swapped or moved)."""
    if (directory / "candidates.tsv").exists():
        with open(directory / "ref.tsv", encoding="utf-8") as f:
            refs = {r["ref_id"]: r["ref_sent"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}
        cands: dict[str, set[str]] = defaultdict(set)
        with open(directory / "candidates.tsv", encoding="utf-8") as f:
            for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if r["sys_id"].split() != ["0"] and r["candidate"] != refs[r["ref_id"]]:
                    cands[r["ref_id"]].add(r["candidate"])
        return refs, {k: sorted(v) for k, v in cands.items()}, f"ParaBank's released candidates ({directory})"
    sentences = [line.strip() for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    refs = {str(i): s for i, s in enumerate(rng.sample(sentences, 300))}
    words = [w for s in sentences[:500] for w in s.split()]
    cands = {}
    for key, text in refs.items():
        made = set()
        for _ in range(10):
            tokens = text.split()
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(tokens))
                kind = rng.random()
                if kind < 0.4:
                    tokens[i] = rng.choice(words)
                elif kind < 0.6 and len(tokens) > 3:
                    del tokens[i]
                elif kind < 0.8:
                    tokens.insert(i, rng.choice(words))
                else:
                    tokens.insert(rng.randrange(len(tokens)), tokens.pop(i))
            made.add(" ".join(tokens))
        cands[key] = sorted(made - {text})
    return refs, cands, "the demo corpus with made-up paraphrases (ParaBank's candidates not found)"


def disguise_table(args, rng: random.Random) -> None:
    """AUC of the text rule and of the classifier, old checks (baseline) against the product's."""
    refs, cands, source = sample_candidates(Path(args.parabank), rng)
    print(f"\n## Can a check be picked out from its text? ({source})")
    print("| kind of check | real candidates | checks | rule finds | rule flags (real) | rule AUC | classifier AUC |")
    print("|---|---|---|---|---|---|---|")
    for name in ("old: the reference with one run swapped (baseline)", "product: a damaged real candidate"):
        make_rng = random.Random(args.seed)
        items: list[tuple[str, str, bool]] = []
        owed = make_rng.random()
        keys = sorted(cands)
        donors = [refs[k] for k in keys]
        for key in keys:
            reference, real = refs[key], cands[key]
            items += [(reference, c, False) for c in real]
            tried = False
            for chunk in balanced_chunks(real, HIT_SIZE):
                owed += args.degraded_rate
                if owed < 1.0 or tried or len(chunk) >= HIT_SIZE:
                    continue
                tried = True
                others = [d for d in donors if d != reference]
                if name.startswith("old"):
                    text = old_degraded_text(reference, others, make_rng)
                else:
                    made = degraded_candidate_text(
                        reference=reference, sources=chunk, peers=real, donors=others, avoid=real, rng=make_rng
                    )
                    text = made and made[0]
                if text:
                    owed -= 1.0
                    items.append((reference, text, True))
        m = detectability(items, seed=args.seed)
        print(
            f"| {name} | {m.real} | {m.checks} | {m.rule_finds}/{m.checks} | {m.rule_flags_real}/{m.real} | "
            f"{m.rule_auc:.3f} | {m.classifier_auc:.3f} |"
        )


def derived_table(args, settings: dict, rng: random.Random) -> None:
    """Raters caught by the degraded rule when checks are damaged copies of real candidates, comparing their
    checks with every real candidate they judged (the product) or with the checks' sources only."""
    low_damage, high_damage = (float(x) for x in args.damage.split(","))
    min_checks, p_max = int(settings["min_degraded_checks"]), float(settings["degraded_p_max"])
    per_rater = max(int(x) for x in args.hits.split(","))
    print(
        f"\n## Derived checks: true similarity = source x (1 - U({low_damage}, {high_damage})); "
        f"{per_rater} HITs per rater, a check in {args.degraded_rate:.0%} of them"
    )
    print("| rater kind | caught, checks vs every real candidate (product) | caught, checks vs their sources |")
    print("|---|---|---|")
    for kind in ("careful", "all-100", "random", "copy-only-careful"):
        caught = {"all": 0, "source": 0}
        for _ in range(args.raters):
            low: list[int] = []
            sources: list[int] = []
            real: list[int] = []
            fired = {"all": False, "source": False}
            for _ in range(per_rater):
                truths = [rng.betavariate(4, 2) for _ in range(HIT_SIZE - 1)]
                scores = [judge_truth(kind, t, rng) for t in truths]
                real += scores
                if rng.random() < args.degraded_rate:
                    low.append(judge_truth(kind, truths[0] * (1 - rng.uniform(low_damage, high_damage)), rng))
                    sources.append(scores[0])
                    for name, high in (("all", real), ("source", sources)):
                        if degraded_rule_fails(degraded_test(low, high, min_checks=min_checks), p_max=p_max):
                            fired[name] = True
            for name in caught:
                caught[name] += fired[name]
        label = f"{kind} (wrongly disqualified)" if kind == "careful" else kind
        print(
            f"| {label} | {caught['all']}/{args.raters} ({caught['all'] / args.raters:.0%}) | "
            f"{caught['source']}/{args.raters} ({caught['source'] / args.raters:.0%}) |"
        )


def judge_truth(kind: str, truth: float, rng: random.Random) -> int:
    """A rater's slider value for an item of this true similarity (0-1), by rater kind (see ``judge``)."""
    if kind == "all-100":
        return 100
    if kind in ("random", "copy-only-careful"):
        return rng.randint(0, 100)
    return round(min(100.0, max(0.0, 100 * truth + rng.gauss(0.0, 12.0))))


# --- issue 46: an attacker who reads whole pages and whole batches ------------------------------------------


def _tokens(text: str) -> list[str]:
    return [w.strip(".,;:!?\"'()").lower() for w in text.split() if w.strip(".,;:!?\"'()")]


def _bigrams(words: list[str]) -> set[tuple[str, str]]:
    return set(zip(words, words[1:]))


def _longest(runs: list[tuple[int, int, int, int]]) -> int:
    """Tokens of the first sentence in its longest run of ``edit_runs``."""
    return max((i2 - i1 for i1, i2, _, _ in runs), default=0)


def _ratio(a: list[str], b: list[str]) -> float:
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio()


def page_features(text: str, reference: str, page: list[str], other_refs_bigrams: set) -> list[float]:
    """What a reader of the page and the batch sees of one item: its edits against the reference and against
    every other item of the page, the words and bigrams it shares with them and with the batch's other
    references, and its words' frequency (wordfreq's Zipf scale; rarity stands in for a word LM's surprisal)."""
    t, r = _tokens(text), _tokens(reference)
    others = [_tokens(p) for p in page if p != text]
    seen = set(r).union(*map(set, others)) if others else set(r)
    novel = [w for w in t if w not in seen]
    new_to_ref = [w for w in t if w not in set(r)]
    zipfs = [zipf(w) for w in t] or [0.0]
    novel_zipfs = [zipf(w) for w in new_to_ref] or [7.0]
    ratios = [_ratio(o, t) for o in others]
    nearest_ratio, nearest = max(zip(ratios, others), key=lambda rn: rn[0]) if others else (_ratio(r, t), r)
    runs_ref, runs_nearest = edit_runs(r, t), edit_runs(nearest, t)
    # bigrams of another reference of the batch with a content word (Zipf < 5: not "of the")
    shared_batch = len({g for g in (_bigrams(t) - _bigrams(r)) & other_refs_bigrams if min(map(zipf, g)) < 5})
    return [
        len(t) - len(r),
        len(runs_ref),
        _longest(runs_ref),
        _ratio(r, t),
        nearest_ratio,
        len(runs_nearest),
        _longest(runs_nearest),
        len(novel),
        len(novel) / max(1, len(t)),
        shared_batch,
        min(zipfs),
        sum(zipfs) / len(zipfs),
        sum(z < 3 for z in zipfs),
        min(novel_zipfs),
        sum(novel_zipfs) / len(novel_zipfs),
    ]


def attack_pages(refs: dict[str, str], cands: dict[str, list[str]], *, method: str, rate: float, seed: int):
    """HITs cut as the product cuts them, a check in a share ``rate`` of them made by ``method`` ("issue 36":
    from a candidate on the same HIT with a phrase of another reference; "now": the product's rules), as
    (reference, page texts, index of the check or None) per HIT."""
    rng = random.Random(seed)
    keys = sorted(cands)
    batch_refs = [refs[k] for k in keys]
    donors_now = outside_donors(batch_refs)
    pages, owed = [], rng.random()
    for key in keys:
        reference, real = refs[key], list(cands[key])
        rng.shuffle(real)
        tried = False
        for chunk in balanced_chunks(real, HIT_SIZE, room=1):
            owed += rate
            made = None
            if owed >= 1.0 and not tried and len(chunk) < HIT_SIZE:
                tried = True
                elsewhere = [c for c in real if c not in chunk]
                if method == "now":
                    sources, donors = elsewhere or chunk, donors_now
                else:
                    sources, donors = chunk, [d for d in batch_refs if d != reference]
                made = degraded_candidate_text(
                    reference=reference, sources=sources, peers=real, donors=donors, avoid=real, rng=rng
                )
            page, check = list(chunk), None
            if made:
                owed -= 1.0
                check = rng.randrange(len(page) + 1)
                page.insert(check, made[0])
            pages.append((reference, page, check))
    return pages


def page_attack(pages, *, seed: int) -> dict[str, float]:
    """AUC of each page-reading rule and of a gradient-boosted classifier on :func:`page_features`
    (5-fold stratified cross-validation) at telling the checks from the real candidates."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    ref_bigrams = defaultdict(set)
    for reference, _, _ in pages:
        ref_bigrams[reference] = _bigrams(_tokens(reference))
    everyone: dict[tuple[str, str], int] = defaultdict(int)
    for grams in ref_bigrams.values():
        for g in grams:
            everyone[g] += 1
    # the batch's bigrams that another reference holds, per reference (its pages share them)
    others_of = {ref: {g for g, n in everyone.items() if n > (g in own)} for ref, own in ref_bigrams.items()}
    features, labels = [], []
    for reference, page, check in pages:
        others_bigrams = others_of[reference]
        for i, text in enumerate(page):
            features.append(page_features(text, reference, page, others_bigrams))
            labels.append(int(i == check))
    x = features
    rules = {
        "rule: a content bigram of another reference of the batch": [float(f[9] > 0) for f in x],
        "rule: longest run differing from the reference >= 2": [float(f[2] >= 2) for f in x],
        "rule: repeats another item of its page but for a run (similarity >= 0.6)": [float(f[4] >= 0.6) for f in x],
    }
    out = {name: float(roc_auc_score(labels, flags)) for name, flags in rules.items()}
    out.update({f"{name} (finds)": int(sum(f and y for f, y in zip(flags, labels))) for name, flags in rules.items()})
    out.update(
        {f"{name} (flags real)": int(sum(f and not y for f, y in zip(flags, labels))) for name, flags in rules.items()}
    )
    guessed = cross_val_predict(
        HistGradientBoostingClassifier(max_iter=200, random_state=seed),
        x,
        labels,
        cv=StratifiedKFold(5, shuffle=True, random_state=seed),
        method="predict_proba",
    )[:, 1]
    out["gradient-boosted classifier on 15 page and batch features"] = float(roc_auc_score(labels, guessed))
    out["checks"], out["real"] = sum(labels), len(labels) - sum(labels)
    return out


def page_attack_table(args) -> None:
    """The issue-46 attacker against checks made as before (issue 36) and now, on ParaBank's candidates and on
    the demo corpus's made-up ones; target AUC <= 0.65 for every attacker."""
    for directory in (Path(args.parabank), Path("/nonexistent")):
        refs, cands, source = sample_candidates(directory, random.Random(args.seed))
        print(f"\n## A reader of whole pages and batches (issue 46; {source})")
        results = {
            m: page_attack(attack_pages(refs, cands, method=m, rate=args.degraded_rate, seed=args.seed), seed=args.seed)
            for m in ("issue 36", "now")
        }
        names = [
            k for k in results["now"] if not k.endswith(("(finds)", "(flags real)")) and k not in ("checks", "real")
        ]
        print("| attacker | checks made as before (issue 36) | now |")
        print("|---|---|---|")
        for name in names:
            cells = []
            for m in ("issue 36", "now"):
                r = results[m]
                extra = (
                    f" (finds {r[name + ' (finds)']}/{r['checks']}, flags {r[name + ' (flags real)']}/{r['real']} real)"
                    if name.startswith("rule")
                    else ""
                )
                cells.append(f"AUC {r[name]:.3f}{extra}")
            print(f"| {name} | " + " | ".join(cells) + " |")


# --- issue 46: the agreement rule, which needs no check a cheater could spot ---------------------------------

CHEATS = ("careful", "spots every check, 100 elsewhere", "spots every check, random elsewhere", "all-100", "random")


def _cheat_scores(kind: str, truth: float, rng: random.Random) -> int:
    if kind.startswith("spots every check, 100"):
        return 100
    if kind.startswith("spots every check, random"):
        return rng.randint(0, 100)
    return judge_truth(kind, truth, rng)


def agreement_table(args, settings: dict, rng: random.Random) -> None:
    """Raters caught with and without the agreement rule, on simulated HITs (real candidates' true similarity
    Beta(4, 2); the other workers' mean of an item: two careful raters' scores; a derived check, as in
    ``derived_table``) in a share of the HITs, which the cheaters score 0 whatever it looks like; then the rule on
    ParaBank's released judgments."""
    min_items, p_max = int(settings["min_agreement_items"]), float(settings["agreement_p_max"])
    min_checks, deg_p_max = int(settings["min_degraded_checks"]), float(settings["degraded_p_max"])
    low_damage, high_damage = (float(x) for x in args.damage.split(","))
    per_rater = max(int(x) for x in args.hits.split(","))
    print(
        f"\n## Agreement: raters who spot every check (issue 46); {per_rater} HITs of {HIT_SIZE - 1} real candidates "
        f"per rater, a degraded check in {args.degraded_rate:.0%} of them; agreement tested from {min_items} "
        f"candidates, p > {p_max}"
    )
    print("| rater kind | caught by the degraded rule (before) | caught with the agreement rule too (now) |")
    print("|---|---|---|")
    for kind in CHEATS:
        before = now = 0
        for _ in range(args.raters):
            low, real, pairs = [], [], []
            fired_before = fired_now = False
            for _ in range(per_rater):
                truths = [rng.betavariate(4, 2) for _ in range(HIT_SIZE - 1)]
                for truth in truths:
                    others = statistics.fmean(judge_truth("careful", truth, rng) for _ in range(2))
                    score = _cheat_scores(kind, truth, rng)
                    real.append(score)
                    pairs.append((float(score), others))
                if rng.random() < args.degraded_rate:  # a derived check, as in derived_table
                    truth = truths[0] * (1 - rng.uniform(low_damage, high_damage))
                    low.append(0 if kind.startswith("spots") else _cheat_scores(kind, truth, rng))
                fired_before |= degraded_rule_fails(degraded_test(low, real, min_checks=min_checks), p_max=deg_p_max)
                fired_now |= fired_before or agreement_rule_fails(
                    agreement_test(pairs, min_items=min_items), p_max=p_max
                )
            before += fired_before
            now += fired_now
        label = f"{kind} (wrongly disqualified)" if kind == "careful" else kind
        print(
            f"| {label} | {before}/{args.raters} ({before / args.raters:.0%}) | "
            f"{now}/{args.raters} ({now / args.raters:.0%}) |"
        )
    _agreement_on_parabank(Path(args.parabank), min_items=min_items, p_max=p_max)


def _agreement_on_parabank(directory: Path, *, min_items: int, p_max: float) -> None:
    """The rule on ParaBank's released judgments: each worker's scores on real candidates against the other
    workers' mean on the same candidates."""
    if not (directory / "candidates.tsv").exists():
        print(f"\n(ParaBank's released judgments not found in {directory}: the rule on real workers is not measured)")
        return
    with open(directory / "ref.tsv", encoding="utf-8") as f:
        refs = {r["ref_id"]: r["ref_sent"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}
    scores: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    with open(directory / "candidates.tsv", encoding="utf-8") as f:
        for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if r["sys_id"].split() != ["0"] and r["candidate"] != refs[r["ref_id"]] and r["human_score"].strip():
                scores[(r["ref_id"], r["candidate"])][r["worker_id_anon"]] = float(r["human_score"])
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for by_worker in scores.values():
        for worker, score in by_worker.items():
            others = [v for w, v in by_worker.items() if w != worker]
            if others:
                pairs[worker].append((score, statistics.fmean(others)))
    tested = {w: agreement_test(p, min_items=min_items) for w, p in pairs.items()}
    tested = {w: p for w, p in tested.items() if p is not None}
    barred = sorted(w for w, p in tested.items() if agreement_rule_fails(p, p_max=p_max))
    print(
        f"\nParaBank's released judgments ({directory}): {len(pairs)} workers, {len(tested)} with >= {min_items} "
        f"real candidates others scored too; the rule bars {len(barred)}:"
    )
    for w in barred:
        xs, ys = zip(*pairs[w])
        r = statistics.correlation(xs, ys) if len(set(xs)) > 1 else float("nan")
        print(f"- worker {w}: r = {r:.3f} over {len(pairs[w])} candidates, p = {tested[w]:.3g}")
    kept = [statistics.correlation(*zip(*pairs[w])) for w in tested if w not in barred]
    if kept:
        print(f"the {len(kept)} kept: r {min(kept):.2f} to {max(kept):.2f}, median {statistics.median(kept):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raters", type=int, default=200, help="raters of each kind")
    parser.add_argument("--hits", default="20,50,100", help="HITs per rater, comma-separated")
    parser.add_argument("--batch-hits", type=int, default=800, help="HITs in the batch (ParaBank: ~800)")
    parser.add_argument("--attention-rate", type=float, default=0.1)
    parser.add_argument("--degraded-rate", type=float, default=0.1)
    parser.add_argument("--slip", type=float, default=0.03, help="a careful rater's chance of missing 100 on a copy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parabank", default=str(PARABANK), help="ParaBank's released judgments (ref.tsv ...)")
    parser.add_argument("--damage", default="0.3,0.8", help="a derived check's loss of similarity: low,high")
    parser.add_argument(
        "--only-issue46", action="store_true", help="only the whole-page attacker and the agreement rule (issue 46)"
    )
    args = parser.parse_args()
    settings = dict(CAMPAIGN_DEFAULTS)
    if args.only_issue46:
        agreement_table(args, settings, random.Random(args.seed))
        page_attack_table(args)
        return
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
    disguise_table(args, random.Random(args.seed))
    derived_table(args, settings, random.Random(args.seed))
    agreement_table(args, settings, random.Random(args.seed))
    page_attack_table(args)
    print(f"\n({time.perf_counter() - started:.0f} s, seed {args.seed})")


if __name__ == "__main__":
    main()
