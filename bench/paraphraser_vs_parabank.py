"""The packaged paraphraser beside ParaBank's own systems on the same references, judged by one judge (issue 47).

    .venv/bin/python bench/paraphraser_vs_parabank.py raters --data ../shared/data
    .venv/bin/python bench/paraphraser_vs_parabank.py blind --data ../shared/data --model generation/demo/paraphraser \\
        [--skip 20] [--references 55] [--systems 15,22] [--seed 6] --out JUDGE.tsv --key KEY.tsv
    .venv/bin/python bench/paraphraser_vs_parabank.py tally --data ../shared/data --judged JUDGE.tsv --key KEY.tsv

Why: issue 47's hand-count goal (two thirds of the paraphraser's outputs real paraphrases) needs a yardstick. The
ParaBank paper is the reference for every number here, and its released judgments (``parabank-eval``) hold its
own systems' outputs for the references ``bench/paraphraser.py`` holds out (``ref_id % 4 == 1``, 5 to 20 tokens).

* ``raters``: per ParaBank system, the share of its outputs that its own raters judged a paraphrase by the
  recipe's rule (``bench/paraphraser_recipe.py``: mean slider >= 80, every grammar mark 2, not a copy or a
  near-copy), on all 300 development references and on the held-out ones.
* ``blind``: the model decodes the held-out references (from the ``--skip``-th: ``bench/paraphraser.py
  --parabank 20`` judged the first 20 before) under each system as the quick start does (beam 4, ``keep_facts``,
  itself as backward model; the constraints from the demo corpus's IDF, as ``bench/paraphraser.py`` selects them),
  and writes each reference's first output beside ParaBank's own output of the same system, in random order
  (``--seed``), with empty ``label_A`` and ``label_B`` columns to fill by hand with the paraphraser page's rubric
  (real / copy / slip / meaning change / junk; ``none`` where a side has no output). Which side is which goes to
  ``--key`` only. References for which ParaBank's raters saw no output of that system are skipped (counted).
* ``tally``: the counts per side and system (and over the references our side decoded under a ban: where the demo
  corpus's IDF leaves a system's pool empty, as for "You remember last Tuesday night?", it decodes unconstrained
  and, as the quick start would, may copy), the paired comparison (real > slip > copy = meaning change >
  junk = none), and how the judge's labels of ParaBank's outputs agree with ParaBank's raters (the recipe's
  rule, and the raters' mean slider per label): the judge's strictness, measured.

The run of 2026-12-06, judged: ``bench/results/paraphraser-vs-parabank-judged.tsv`` (the labels in blind order) and
``bench/results/paraphraser-vs-parabank-key.tsv`` (which side is which); ``paraphraser-vs-parabank.txt`` the output.

ParaBank's outputs were decoded under its own constraints (its IDF over its corpus), ours under the same
system's rule on the demo corpus's IDF: the same system, not always the same banned words."""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.paraphraser import (  # first: it sets up Django
    DEMO_CORPUS,
    HELD_OUT_REMAINDER,
    corpus_idf,
    corpus_lines,
    held_out_references,
    system_constraints,
)
from bench.paraphraser_recipe import judged_candidates
from generation.decoding import decode, load_model

LABELS = ("real", "slip", "copy", "meaning change", "junk", "none")
RANK = {"real": 3, "slip": 2, "copy": 1, "meaning change": 1, "junk": 0, "none": 0}


def system_outputs(folder: Path) -> dict[tuple[str, str], str]:
    """ParaBank's own output per (ref_id, system)."""
    return {(j.ref_id, s): j.candidate for j in judged_candidates(folder) for s in j.systems}


def raters(folder: Path) -> None:
    judged = judged_candidates(folder)
    print("# ParaBank's systems judged by its own raters (parabank-eval): share of outputs that meet the recipe's")
    print("# rule (mean slider >= 80, every grammar mark 2, not a copy or near-copy)")
    print("system  all refs (n, share)  held-out refs (n, share)")
    by_system: dict[str, list] = defaultdict(list)
    for j in judged:
        for s in j.systems:
            by_system[s].append(j)
    for system in sorted(by_system, key=int):
        outs = by_system[system]
        held = [j for j in outs if int(j.ref_id) % 4 == HELD_OUT_REMAINDER]
        share = sum(j.is_paraphrase() for j in outs) / len(outs)
        held_share = sum(j.is_paraphrase() for j in held) / len(held)
        print(f"{system:>6}  {len(outs):>4} {share:>5.0%}          {len(held):>4} {held_share:>5.0%}")


def blind(args: argparse.Namespace) -> None:
    folder = args.data / "parabank-eval"
    refs = held_out_references(folder)[args.skip : args.skip + args.references]
    theirs = system_outputs(folder)
    idf, _df = corpus_idf(corpus_lines(DEMO_CORPUS))
    loaded = load_model(args.model, device="cpu")
    rng = random.Random(args.seed)
    rows, key, skipped = [], [], 0
    for system in [s.strip() for s in args.systems.split(",") if s.strip()]:
        todo = [(rid, ref) for rid, ref in refs if (rid, system) in theirs]
        skipped += len(refs) - len(todo)
        sentences = [ref for _, ref in todo]
        cons = system_constraints(system, sentences, idf)
        results = decode(loaded, sentences, cons, beam=4, max_length=48, keep_facts=True, backward=loaded)
        for (rid, ref), res, con in zip(todo, results, cons):
            ours = res.outputs[0]["text"] if res.outputs else ""
            pair = [("ours", ours), ("parabank", theirs[(rid, system)])]
            rng.shuffle(pair)
            i = len(rows)
            rows.append([i, system, ref, pair[0][1], pair[1][1], "", ""])
            key.append([i, rid, system, pair[0][0], pair[1][0], "yes" if con else "no"])
        print(f"system {system}: {len(todo)} references decoded", file=sys.stderr)
    write_tsv(args.out, ["i", "system", "reference", "A", "B", "label_A", "label_B"], rows)
    write_tsv(args.key, ["i", "ref_id", "system", "A_is", "B_is", "constrained"], key)
    print(f"{len(rows)} pairs -> {args.out} (key: {args.key}); {skipped} skipped: no ParaBank output", file=sys.stderr)


def write_tsv(path: Path, header: list[str], rows: list[list]) -> None:
    """Plain tab-separated lines, no quoting (the texts hold quotes; a tab in one becomes a space)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(str(cell).replace("\t", " ").replace("\n", " ") for cell in row) for row in [header, *rows]]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def tally(args: argparse.Namespace) -> None:
    judged = {r["i"]: r for r in read_tsv(args.judged)}
    keys = read_tsv(args.key)
    scores = {(j.ref_id, j.candidate): j for j in judged_candidates(args.data / "parabank-eval")}
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    paired = Counter()
    rater_agreement: dict[str, list] = defaultdict(list)
    for k in keys:
        row = judged[k["i"]]
        labels = {k["A_is"]: row["label_A"].strip(), k["B_is"]: row["label_B"].strip()}
        for side, label in labels.items():
            if label not in LABELS:
                raise SystemExit(f"row {k['i']}: label {label!r} is not one of {', '.join(LABELS)}")
            counts[(side, k["system"])][label] += 1
            counts[(side, "all")][label] += 1
            if k["constrained"] == "yes":
                counts[(side, "banned")][label] += 1
        ours, theirs = RANK[labels["ours"]], RANK[labels["parabank"]]
        paired["ours better" if ours > theirs else "parabank better" if theirs > ours else "tie"] += 1
        text = row["A"] if k["A_is"] == "parabank" else row["B"]
        rater_agreement[labels["parabank"]].append(scores[(k["ref_id"], text)])
    print("# by hand (labels: " + ", ".join(LABELS) + "); banned: the references for which the demo corpus's IDF gave")
    print("# our side a constraint set (the others it decoded unconstrained, ParaBank's side always under its own)")
    for (side, system), c in sorted(counts.items()):
        n = sum(c.values())
        shown = ", ".join(f"{c[label]} {label}" for label in LABELS if c[label])
        print(f"{side:<9} {system:>6}: {c['real']}/{n} real ({c['real'] / n:.0%}); {shown}")
    print(f"paired (real > slip > copy = meaning change > junk = none): {dict(paired)}")
    print("# the judge against ParaBank's raters, on ParaBank's outputs: per hand label, n, raters' mean slider")
    print("# (median of the outputs' means) and how many meet the recipe's rule")
    for label in LABELS:
        js = rater_agreement.get(label, [])
        if js:
            median = statistics.median(j.mean_score for j in js)
            print(f"{label:>15}: {len(js):>3}  median slider {median:5.1f}  rule {sum(j.is_paraphrase() for j in js)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("raters")
    b = sub.add_parser("blind")
    t = sub.add_parser("tally")
    for p in (r, b, t):
        p.add_argument("--data", type=Path, required=True, help="the folder holding parabank-eval/")
    b.add_argument("--model", required=True, help="any --model value (the packaged paraphraser's adapter folder)")
    b.add_argument("--skip", type=int, default=20, help="held-out references bench/paraphraser.py judged before")
    b.add_argument("--references", type=int, default=55)
    b.add_argument("--systems", default="15,22")
    b.add_argument("--seed", type=int, default=6)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--key", type=Path, required=True)
    t.add_argument("--judged", type=Path, required=True)
    t.add_argument("--key", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.command == "raters":
        raters(args.data / "parabank-eval")
    elif args.command == "blind":
        blind(args)
    else:
        tally(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
