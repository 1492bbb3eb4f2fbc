"""How good a paraphraser is, as a researcher first meets it (issue 47): each model decodes the same held-out
references unconstrained and under the quick start's constraint systems, in one run.

    .venv/bin/python bench/paraphraser.py [--model NAME=PATH ...] [--data ../shared/data] [--references 60]
        [--offset 2000] [--parabank 40] [--systems none,15,22,28,29,34] [--beam 4] [--keep-facts] [--backward]
        [--avoid-copies]
        [--max-length 48] [--passes 2]
        [--diverse [--diverse-sets 3] [--diverse-samples 8] [--diverse-keep 2]] [--outputs OUT.tsv] [--json OUT.json]

References: demo-corpus lines from ``--offset`` of 8 to 25 words (the first ``--references`` of them: the
quick start's own sentences; with ``--exclude-pairs FILE`` those a training pair holds are skipped, since the
demo corpus is STS-B sentences and STS-B pairs are in the paraphraser's recipe), plus, with ``--data``,
``--parabank`` ParaBank development references that ``bench/paraphraser_recipe.py`` holds out
(``ref_id % 4 == 1``, 5 to 20 tokens).
Constraints: each ParaBank system of Tab. 3 on the demo corpus's IDF (spaCy's tokens, as ``build_idf``
counts them); ``none`` is unconstrained. Default model: the shipped demo denoiser; a ``NAME=PATH`` is any
``--model`` value (a folder, an adapter folder, a hub id in the cache).

Printed per model and system (the first output of each reference):

* ``copy``: share equal to the reference once case and punctuation are dropped, or one character from it
  (the release's near-copy rule, ``scoring.releases.filters.copy_kind``);
* ``non-word``: share holding a word that the release's non-word screen flags
  (``generation.screening.pair_non_words`` with the demo corpus's words and the English word list);
* ``facts``: share that changes a fact of the reference, a number or a name added or dropped
  (``generation.facts.fact_changes``; the commonest failure of the packaged paraphraser judged by hand);
* ``sim``: mean cosine of the packaged sentence encoder with the reference;
* ``1-BLEU``: 100 - BLEU of the outputs against their references (``scoring.diversity.bleu_no_bp``);
* ``viol``: outputs breaking their constraints (``generation.decoding.violations``: must be 0);
* ``no output``: references left with no output (no hypothesis met the constraints within the length limit;
  shown when any); the columns above are over the references that have one;
* ``sent/s``: references decoded per second; for ``none`` also Hugging Face ``generate``'s (same beam,
  same length limit, same prompts) and the ratio; each the fastest of ``--passes`` (2) passes.

``--diverse`` adds, per model, ParaBank 2's diverse mode (``generation.decoding.diverse.diverse_decode``) on the
same references, with the quick start's settings by default (``generation.demo_settings``: 3 negative sets x 8
samples, ranks 1-2 kept; the other options DiverseOptions' defaults, ``--max-length`` as above), in rows

* ``r1`` (each reference's rank 1) and ``r1-2`` (ranks 1 and 2, every output): the columns above, over outputs;
  ``viol``: outputs holding a word of the negative set they were sampled under; ``sent/s``: references per second
  of ``diverse_decode``, and Hugging Face ``generate`` sampling the same rows (``sets x samples`` per reference,
  top-k and temperature as ours, one reference a call as ours on the CPU; no bans, scoring or clustering) and the
  ratio;
* the diverse mode's five targets against beam n-best (beam 8, its ``--diverse-keep`` best) on the same references,
  as ``bench/diversity.py`` computes and states them (``measure``, ``diverse_targets``): both its rows and each
  target, met or missed. Timing: beam n-best and diverse interleaved, the fastest of ``--passes`` passes each.

``--keep-facts`` decodes with ``keep_facts`` (``generation.facts``) and ``--backward`` with each model as its own
backward model (``generation.decoding.backward``), in beam search (the rows and the beam n-best of ``--diverse``)
and in the diverse mode alike; ``--avoid-copies`` with ``avoid_copies`` (``generation.copies``), in beam search's
rows.

The outputs of the shipped adapter under system 15, plain and with ``--keep-facts --backward``, judged by hand:
``bench/results/paraphraser-judged.tsv``; the shipped adapter's and the third recipe's under systems 15 and 22,
judged blind: ``bench/results/paraphraser-judged-recipes.tsv``; the first outputs ``--avoid-copies`` changed (with
``--keep-facts --backward``), judged: ``bench/results/paraphraser-avoid-copies-judged.tsv``.

``--outputs`` writes every first output (model, system, reference, output) for judging by hand, and with
``--diverse`` ranks 1 and 2 (systems ``r1``, ``r2``). ``--systems none`` keeps only the unconstrained row."""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
import django  # noqa: E402 - after the path set-up

django.setup()

from bench import diversity  # noqa: E402
from bench.diversity import fmt  # noqa: E402
from generation.constraints.idf import count_document_frequencies, idf_value  # noqa: E402
from generation.constraints.sets import select_constraints  # noqa: E402
from generation.decode_options import DiverseOptions  # noqa: E402
from generation.decoding import decode, load_model, normalise_constraints, violations  # noqa: E402
from generation.decoding.diverse import diverse_decode  # noqa: E402
from generation.demo_settings import DEMO_DIVERSE_RANKS, DEMO_DIVERSE_SAMPLES, DEMO_DIVERSE_SETS  # noqa: E402
from generation.english import Vocabulary, english_words  # noqa: E402
from generation.facts import fact_changes  # noqa: E402
from generation.screening import pair_non_words  # noqa: E402
from scoring.diversity import bleu_no_bp  # noqa: E402
from scoring.releases.filters import copy_kind  # noqa: E402

DEMO_CORPUS = ROOT / "generation" / "demo" / "corpus.txt"
DEMO_MODEL = ROOT / "generation" / "demo" / "model"
HELD_OUT_REMAINDER = 1  # as bench/paraphraser_recipe.py holds them out


def demo_references(lines: list[str], offset: int, n: int, seen: frozenset[str] = frozenset()) -> list[str]:
    """The first ``n`` lines from ``offset`` of 8 to 25 words that no training pair holds (``seen``, lowercased:
    the demo corpus is STS-B sentences, and STS-B pairs train the packaged paraphraser)."""
    return [x for x in lines[offset:] if 8 <= len(x.split()) <= 25 and x.lower() not in seen][:n]


def training_sentences(path: Path | None) -> frozenset[str]:
    """Both sides of every ``sentence<TAB>paraphrase`` line of a training file, lowercased (none: no file)."""
    if path is None:
        return frozenset()
    with open(path, encoding="utf-8") as fh:
        return frozenset(side.strip().lower() for line in fh for side in line.rstrip("\n").split("\t")[:2])


def held_out_references(folder: Path) -> list[tuple[str, str]]:
    """(ref_id, sentence) of the ParaBank references the recipe holds out, 5 to 20 tokens, in ``ref.tsv``'s order."""
    with open(folder / "ref.tsv", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]
    return [
        (r["ref_id"], r["ref_sent"])
        for r in rows
        if int(r["ref_id"]) % 4 == HELD_OUT_REMAINDER and int(r["ref_len"]) <= 20
    ]


def parabank_references(folder: Path, n: int) -> list[str]:
    return [sentence for _, sentence in held_out_references(folder)][:n]


def corpus_lines(path: Path) -> list[str]:
    """A corpus file's non-blank lines, stripped."""
    return [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def corpus_idf(lines: list[str]) -> tuple[dict[str, float], dict[str, int]]:
    """(IDF, document frequency) of each token of ``lines`` (spaCy's tokens, as ``build_idf`` counts them)."""
    n_docs, df = count_document_frequencies(lines)
    return {tok: idf_value(n_docs, count) for tok, count in df.items()}, df


def system_constraints(system: str, refs: list[str], idf: dict[str, float]) -> list[dict | None]:
    """Each reference's constraint set under ParaBank system ``system`` (None: unconstrained, or the system's pool
    is empty for it); ``"none"``: every reference unconstrained."""
    if system == "none":
        return [None] * len(refs)
    chosen = [select_constraints(int(system), r, idf) for r in refs]
    return [c.to_json() if c.is_constraint_set else None for c in chosen]


def hf_generate_seconds(loaded, refs: list[str], beam: int, max_length: int) -> float:
    """Hugging Face ``generate`` on the same inputs (the prompts, for a decoder-only model)."""
    import torch

    if loaded.causal:
        from generation.decoding.causal import prompt_batch

        ids, mask = prompt_batch(loaded, refs)
        kwargs = {"max_new_tokens": max_length}
    else:
        enc = loaded.tokenizer(refs, return_tensors="pt", padding=True)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        kwargs = {"max_length": max_length}
    t = time.perf_counter()
    with torch.no_grad():
        loaded.model.generate(input_ids=ids, attention_mask=mask, num_beams=beam, do_sample=False, **kwargs)
    return time.perf_counter() - t


def hf_sample_seconds(loaded, refs: list[str], options: DiverseOptions) -> float:
    """Hugging Face ``generate`` sampling ``options.rows`` continuations of each reference (top-k, temperature
    as the diverse mode's), one reference a call: the diverse mode's sampling without its bans, scoring and
    clustering."""
    import torch

    torch.manual_seed(options.seed)
    kw = {"do_sample": True, "top_k": options.top_k, "temperature": options.temperature, "num_beams": 1}
    kw["num_return_sequences"] = options.rows
    t = time.perf_counter()
    for ref in refs:
        if loaded.causal:
            from generation.decoding.causal import prompt_batch

            ids, mask = prompt_batch(loaded, [ref])
            kw["max_new_tokens"] = options.max_length
        else:
            enc = loaded.tokenizer([ref], return_tensors="pt")
            ids, mask = enc["input_ids"], enc["attention_mask"]
            kw["max_length"] = options.max_length
        with torch.no_grad():
            loaded.model.generate(input_ids=ids, attention_mask=mask, **kw)
    return time.perf_counter() - t


def print_row(row: dict, label: str, extra: str = "") -> None:
    print(
        f"{label:>5}  copy {row['copy']:.0%}  non-word {row['non_word']:.0%}  facts {row['facts']:.0%}  "
        f"sim {row['sim']:.3f}  "
        f"1-BLEU {row['one_minus_bleu']:.1f}  viol {row['violations']}  {row['sent_per_s']:.2f} sent/s{extra}"
        + (f"  no output {row['no_output']}" if row.get("no_output") else ""),
        flush=True,
    )


def diverse_rows(name, loaded, refs, options, vocabulary, passes, backward=False) -> tuple[list[dict], list[tuple]]:
    """``--diverse``'s rows for one model (module docstring) and its outputs (name, r1/r2, reference, output)."""
    timings: dict[str, list[float]] = {"beam": [], "diverse": []}
    for _ in range(passes):  # interleaved: a change of the machine's load falls on both
        t = time.perf_counter()
        beam = decode(
            loaded,
            refs,
            beam=diversity.BEAM,
            nbest=options.keep,
            max_length=options.max_length,
            keep_facts=options.keep_facts,
            backward=loaded if backward else None,
        )
        timings["beam"].append(time.perf_counter() - t)
        t = time.perf_counter()
        div = diverse_decode(loaded, refs, options=options, backward=loaded if backward else None)
        timings["diverse"].append(time.perf_counter() - t)
    secs = {k: min(v) for k, v in timings.items()}
    hf = hf_sample_seconds(loaded, refs, options)
    ranked = [[o["text"] for o in r.outputs] for r in div]
    rows, written = [], []
    for system, depth in (("r1", 1), ("r1-2", options.keep)):
        kept = [(r, o) for r, res in zip(refs, div) for o in res.outputs[:depth]]
        outs = [o["text"] for _, o in kept]
        cons = [{"negative": o.get("banned") or []} for _, o in kept]
        row = {
            "model": name,
            "system": system,
            **measure([r for r, _ in kept], outs, cons, vocabulary, secs["diverse"]),
        }
        row["sent_per_s"] = len(refs) / secs["diverse"]
        row["hf_sent_per_s"] = len(refs) / hf
        row["speed_vs_hf"] = hf / secs["diverse"]
        rows.append(row)
    for r, res in zip(refs, div):
        written += [(name, f"r{i + 1}", r, o["text"]) for i, o in enumerate(res.outputs[:2])]
    b = diversity.measure(
        f"beam n-best ({options.keep} of {diversity.BEAM})",
        refs,
        [[o["text"] for o in r.outputs] for r in beam],
        secs["beam"],
        len(refs) * diversity.BEAM,
        vocabulary,
    )
    d = diversity.measure("diverse", refs, ranked, secs["diverse"], len(refs) * options.rows, vocabulary)
    targets = diversity.diverse_targets(b, d)
    rows[-1]["diverse"] = {"beam_n_best": b, "diverse": d, "targets": targets}
    print(
        f"# diverse: {options.negative_sets} negative sets x {options.samples} samples, keep {options.keep}; "
        f"{statistics.fmean(len(r) for r in ranked):.2f} outputs a reference",
        flush=True,
    )
    hf_note = (
        f" (HF generate sampling {options.rows} rows {rows[0]['hf_sent_per_s']:.2f}: {rows[0]['speed_vs_hf']:.2f}x)"
    )
    for row in rows:
        print_row(row, row["system"], hf_note)
    print(f"# bench/diversity.py's measures, against beam n-best ({options.keep} of beam {diversity.BEAM}):")
    print(
        f"  {'system':<20} {'pair 1-BLEU':>11} {'ref 1-BLEU':>10} {'sim':>6} {'sim@1':>6} {'non-word':>8} {'cand/s':>8}"
    )
    for x in (b, d):
        print(
            f"  {x['system']:<20} {fmt(x['pair_1_bleu']):>11} {fmt(x['ref_1_bleu']):>10} {fmt(x['sim'], '.3f'):>6} "
            f"{fmt(x['sim_at_1'], '.3f'):>6} {x['non_word']:>8.3f} {x['cand_per_s']:>8.1f}"
        )
    print(f"  beam best non-copy sim {fmt(b.get('sim_best_noncopy'), '.3f')}")
    met = sum(bool(t["met"]) for t in targets)
    print(f"# the diverse mode's targets ({met} of {len(targets)} met):")
    for t in targets:
        print(f"  {'met' if t['met'] else 'MISSED':<6} {t['target']}: {t['text']}")
    print(
        f"  timing (s, each pass): beam n-best {' '.join(f'{x:.2f}' for x in timings['beam'])}, "
        f"diverse {' '.join(f'{x:.2f}' for x in timings['diverse'])}; HF sampling {hf:.2f}",
        flush=True,
    )
    return rows, written


def measure(refs, outputs, constraints, vocabulary, seconds) -> dict:
    from scoring.similarity.embeddings import pair_cosines

    kinds = [copy_kind(r, o) for r, o in zip(refs, outputs)]
    invented = pair_non_words(list(zip(refs, outputs)), vocabulary, cached=False)
    return {
        "n": len(refs),
        "copy": sum(k is not None for k in kinds) / len(refs),
        "non_word": sum(bool(w) for w in invented) / len(refs),
        "facts": sum(bool(fact_changes(r, o)) for r, o in zip(refs, outputs)) / len(refs),
        "sim": float(statistics.fmean(pair_cosines(refs, outputs))),
        "one_minus_bleu": 100.0 - bleu_no_bp(refs, outputs).bleu,
        "violations": sum(bool(violations(o, normalise_constraints(c))) for o, c in zip(outputs, constraints) if c),
        "sent_per_s": len(refs) / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", default=None, help="NAME=PATH (repeat); default demo=the shipped one")
    ap.add_argument("--corpus", type=Path, default=DEMO_CORPUS)
    ap.add_argument("--offset", type=int, default=2000)
    ap.add_argument("--references", type=int, default=60)
    ap.add_argument("--data", type=Path, default=None, help="../shared/data: adds held-out ParaBank references")
    ap.add_argument("--parabank", type=int, default=40)
    ap.add_argument("--systems", default="none,15,22,28,29,34")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--keep-facts", action="store_true", help="keep_facts, beam search and diverse (generation.facts)")
    ap.add_argument("--backward", action="store_true", help="each model its own backward model, both modes")
    ap.add_argument("--avoid-copies", action="store_true", help="avoid_copies: copies last in beam search's rows")
    ap.add_argument("--max-length", type=int, default=48)
    ap.add_argument(
        "--exclude-pairs", type=Path, default=None, help="a training pairs file: its sentences are not references"
    )
    ap.add_argument("--passes", type=int, default=2, help="timed passes per system; the fastest is reported")
    ap.add_argument("--diverse", action="store_true", help="also the diverse mode's rows (ranks 1 and 1-2, targets)")
    ap.add_argument("--diverse-sets", type=int, default=DEMO_DIVERSE_SETS, help="negative sets (the quick start's)")
    ap.add_argument("--diverse-samples", type=int, default=DEMO_DIVERSE_SAMPLES, help="samples per set")
    ap.add_argument("--diverse-keep", type=int, default=DEMO_DIVERSE_RANKS, help="ranks kept")
    ap.add_argument(
        "--diverse-ban-spread", type=float, default=None, help="the sets' shares graded (ban_spread; default: theirs)"
    )
    ap.add_argument("--outputs", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    lines = corpus_lines(args.corpus)
    refs = demo_references(lines, args.offset, args.references, training_sentences(args.exclude_pairs))
    if args.data:
        refs += parabank_references(args.data / "parabank-eval", args.parabank)
    idf, df = corpus_idf(lines)
    vocabulary = Vocabulary(corpus=frozenset(df), english=english_words(), source="demo corpus + English words")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    models = dict(m.split("=", 1) for m in (args.model or [f"demo={DEMO_MODEL}"]))
    options = None
    if args.diverse:
        options = DiverseOptions(
            negative_sets=args.diverse_sets,
            samples=args.diverse_samples,
            keep=args.diverse_keep,
            max_length=args.max_length,
            keep_facts=args.keep_facts,
            **({} if args.diverse_ban_spread is None else {"ban_spread": args.diverse_ban_spread}),
        )
    print(
        f"# bench/paraphraser.py: {len(refs)} references, systems {','.join(systems) or '-'}, beam {args.beam}"
        + (", keep_facts" if args.keep_facts else "")
        + (", each model its own backward model" if args.backward else "")
        + (", avoid_copies" if args.avoid_copies else "")
    )
    rows, written = [], []
    for name, path in models.items():
        loaded = load_model(path, device="cpu")
        print(f"## {name} ({path}; {'decoder-only, prompt ' + loaded.prompt.name if loaded.causal else 'seq2seq'})")
        for system in systems:
            cons = system_constraints(system, refs, idf)
            timings = []
            for _ in range(args.passes):  # the fastest pass: the first pays one-time set-up (kernels, caches)
                t = time.perf_counter()
                results = decode(
                    loaded,
                    refs,
                    cons,
                    beam=args.beam,
                    max_length=args.max_length,
                    keep_facts=args.keep_facts,
                    avoid_copies=args.avoid_copies,
                    backward=loaded if args.backward else None,
                )
                timings.append(time.perf_counter() - t)
            seconds = min(timings)
            kept = [(r, res.outputs[0]["text"], c) for r, res, c in zip(refs, results, cons) if res.outputs]
            kept_refs, kept_outs, kept_cons = ([k[i] for k in kept] for i in range(3))
            row = {"model": name, "system": system, **measure(kept_refs, kept_outs, kept_cons, vocabulary, seconds)}
            row["no_output"] = len(refs) - len(kept)
            if system == "none":
                hf = min(hf_generate_seconds(loaded, refs, args.beam, args.max_length) for _ in range(args.passes))
                row["hf_sent_per_s"] = len(refs) / hf
                row["speed_vs_hf"] = hf / seconds
            rows.append(row)
            written += [(name, system, r, o) for r, o, _ in kept]
            hf = f" (HF generate {row['hf_sent_per_s']:.2f}: {row['speed_vs_hf']:.2f}x)" if system == "none" else ""
            print_row(row, system, hf)
        if options is not None:
            more, outs = diverse_rows(name, loaded, refs, options, vocabulary, args.passes, args.backward)
            rows += more
            written += outs
    if args.outputs:
        with open(args.outputs, "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh, delimiter="\t", lineterminator="\n")
            w.writerow(["model", "system", "reference", "output"])
            w.writerows(written)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
