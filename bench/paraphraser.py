"""How good a paraphraser is, as a researcher first meets it (issue 47): each model decodes the same held-out
references unconstrained and under the quick start's constraint systems, in one run.

    .venv/bin/python bench/paraphraser.py [--model NAME=PATH ...] [--data ../shared/data] [--references 60]
        [--offset 2000] [--parabank 40] [--systems none,15,22,28,29,34] [--beam 4] [--max-length 48] [--passes 2]
        [--outputs OUT.tsv] [--json OUT.json]

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
* ``sim``: mean cosine of the packaged sentence encoder with the reference;
* ``1-BLEU``: 100 - BLEU of the outputs against their references (``scoring.diversity.bleu_no_bp``);
* ``viol``: outputs breaking their constraints (``generation.decoding.violations``: must be 0);
* ``sent/s``: references decoded per second; for ``none`` also Hugging Face ``generate``'s (same beam,
  same length limit, same prompts) and the ratio; each the fastest of ``--passes`` (2) passes.

``--outputs`` writes every first output (model, system, reference, output) for judging by hand."""

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

from generation.constraints.idf import count_document_frequencies, idf_value  # noqa: E402
from generation.constraints.sets import select_constraints  # noqa: E402
from generation.decoding import decode, load_model, normalise_constraints, violations  # noqa: E402
from generation.screening import Vocabulary, english_words, pair_non_words  # noqa: E402
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


def parabank_references(folder: Path, n: int) -> list[str]:
    with open(folder / "ref.tsv", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]
    held = [r["ref_sent"] for r in rows if int(r["ref_id"]) % 4 == HELD_OUT_REMAINDER and int(r["ref_len"]) <= 20]
    return held[:n]


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


def measure(refs, outputs, constraints, vocabulary, seconds) -> dict:
    from scoring.similarity.embeddings import pair_cosines

    kinds = [copy_kind(r, o) for r, o in zip(refs, outputs)]
    invented = pair_non_words(list(zip(refs, outputs)), vocabulary, cached=False)
    return {
        "n": len(refs),
        "copy": sum(k is not None for k in kinds) / len(refs),
        "non_word": sum(bool(w) for w in invented) / len(refs),
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
    ap.add_argument("--max-length", type=int, default=48)
    ap.add_argument(
        "--exclude-pairs", type=Path, default=None, help="a training pairs file: its sentences are not references"
    )
    ap.add_argument("--passes", type=int, default=2, help="timed passes per system; the fastest is reported")
    ap.add_argument("--outputs", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    lines = [x.strip() for x in args.corpus.read_text(encoding="utf-8").splitlines() if x.strip()]
    refs = demo_references(lines, args.offset, args.references, training_sentences(args.exclude_pairs))
    if args.data:
        refs += parabank_references(args.data / "parabank-eval", args.parabank)
    n_docs, df = count_document_frequencies(lines)
    idf = {tok: idf_value(n_docs, count) for tok, count in df.items()}
    vocabulary = Vocabulary(corpus=frozenset(df), english=english_words(), source="demo corpus + English words")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    models = dict(m.split("=", 1) for m in (args.model or [f"demo={DEMO_MODEL}"]))
    print(f"# bench/paraphraser.py: {len(refs)} references, systems {','.join(systems)}, beam {args.beam}")
    rows, written = [], []
    for name, path in models.items():
        loaded = load_model(path, device="cpu")
        print(f"## {name} ({path}; {'decoder-only, prompt ' + loaded.prompt.name if loaded.causal else 'seq2seq'})")
        for system in systems:
            if system == "none":
                cons = [None] * len(refs)
            else:
                chosen = [select_constraints(int(system), r, idf) for r in refs]
                cons = [c.to_json() if c.is_constraint_set else None for c in chosen]
            timings = []
            for _ in range(args.passes):  # the fastest pass: the first pays one-time set-up (kernels, caches)
                t = time.perf_counter()
                results = decode(loaded, refs, cons, beam=args.beam, max_length=args.max_length)
                timings.append(time.perf_counter() - t)
            seconds = min(timings)
            kept = [(r, res.outputs[0]["text"], c) for r, res, c in zip(refs, results, cons) if res.outputs]
            kept_refs, kept_outs, kept_cons = ([k[i] for k in kept] for i in range(3))
            row = {"model": name, "system": system, **measure(kept_refs, kept_outs, kept_cons, vocabulary, seconds)}
            if system == "none":
                hf = min(hf_generate_seconds(loaded, refs, args.beam, args.max_length) for _ in range(args.passes))
                row["hf_sent_per_s"] = len(refs) / hf
                row["speed_vs_hf"] = hf / seconds
            rows.append(row)
            written += [(name, system, r, o) for r, o, _ in kept]
            hf = f" (HF generate {row['hf_sent_per_s']:.2f}: {row['speed_vs_hf']:.2f}x)" if system == "none" else ""
            print(
                f"{system:>5}  copy {row['copy']:.0%}  non-word {row['non_word']:.0%}  sim {row['sim']:.3f}  "
                f"1-BLEU {row['one_minus_bleu']:.1f}  viol {row['violations']}  {row['sent_per_s']:.2f} sent/s{hf}",
                flush=True,
            )
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
