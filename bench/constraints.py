"""Claim: constraint selection is cheap next to spaCy tagging (selection alone >= 20x faster).

Takes 10,000 distinct English sentences (both sides of /work/shared/data/stsb/sts-train.csv, then
sts-dev.csv, when present; otherwise seeded synthetic sentences), computes an IDF table on them
(IDF = ln(N / df), a sentence a document, lowercased spaCy tokens), and prints sentences/second for

- tagging alone: ``nlp.pipe`` (batch_size 256) into TaggedSentence values, as the job does;
- selection alone on the tagged sentences: 34 systems (no PPDB), and all 37 with a synthetic PPDB 2.0
  file built here from the corpus's vocabulary (real format and index, made-up pairs; the index is
  built before timing);
- tagging + selection (37 systems);

and the ratio selection/tagging (target >= 20x). Tagging and selection are timed block by block, as
the constraint job interleaves them: it tags a batch of ``--batch-size`` references with spaCy, selects
for them, then tags the next batch; each block here is one such batch (``--block N`` sets another
size: before 2026-11-23 the bench used 1,000-sentence blocks, ~5% harder on selection, whose memory a
bigger block of tagging evicts more of). Timing block by block also gives both the same load on a
shared machine.

What "selection alone" measures: ``select_for_all_systems`` (the fast path,
generation/selection/fast.py) per tagged sentence, all results built and then dropped, as the job frees
each after writing it out (what the job does with them, JSON and the shard file, is not selection; the
constraint sets are counted once, outside the timed passes). It starts cold, as a fresh worker process:
``generation.constraints.sets.clear_caches()`` empties every per-word cache of selection (token texts' pool
entries, negative phrases, morphological variants) and the PPDB index's phrase cache is emptied; only
what a worker loads once per process is ready before timing (spaCy model, the IDF table, the PPDB index
file, and what a Celery worker's start-up does, generation/worker_start.py and config/process_tuning.py:
load lemminflect's tables and the lex-all and verb inflection indexes built from them, then freeze the
garbage collector's view of everything loaded and raise its young threshold). Caches then fill as in a job: on each
block the 34-system pass runs first (it pays the morphology misses), then the 37-system pass (it pays the PPDB
lookups). The ratio line is tagging seconds / selection seconds over that cold pass. The pass is made
``--repeat`` times (default 3, each cold again: caches emptied, sentences tagged again); each pass's
ratios are printed, and the table and the verdict use the medians, since one pass swings by about 5% on
a shared host. A last selection pass over all sentences (warm caches, no tagging in between) is printed
too, for information, and so is the reference implementation (generation/selection/reference.py, the
specification the fast path is held equal to) on the first ``--reference-n`` sentences (default 2,000;
0 skips it), warm, 37 systems: the reason the fast path exists.

    .venv/bin/python bench/constraints.py [--n 10000] [--batch-size 256] [--block N] [--repeat 3]
                                          [--reference-n 2000]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STS = Path("/work/shared/data/stsb")


def load_sentences(n: int) -> tuple[list[str], str]:
    seen: dict[str, None] = {}
    for name in ("sts-train.csv", "sts-dev.csv"):
        path = STS / name
        if not path.is_file():
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                for s in parts[5:7]:
                    s = s.strip()
                    if s:
                        seen.setdefault(s, None)
                if len(seen) >= n:
                    return list(seen)[:n], f"{STS} (STS-B train+dev, distinct sentences)"
    rng = random.Random(7)
    words = (
        "the a of to and in is was for on that with as by at from it an be this are have has had not "
        "man woman dog cat plays playing runs running guitar piano street car train city river told "
        "proud work works worked mean meaning okay often earthquake occur myth involves misconception "
        "quickly slowly large small red green happy sad slice cut onion cooking eats food"
    ).split()
    while len(seen) < n:
        seen.setdefault(" ".join(rng.choices(words, k=rng.randint(5, 18))).capitalize() + ".", None)
    source = "seeded synthetic sentences" + (f" (+ {STS})" if STS.is_dir() else "")
    return list(seen)[:n], source


def write_synthetic_ppdb(path: Path, tagged, seed: int = 11) -> int:
    """A PPDB 2.0-format lexical file over the corpus vocabulary: a few random same-POS paraphrases per
    word, with random relations (the file format and the lookups are real; the pairs are not)."""
    from generation.constraints.ppdb import ALL_RELATIONS

    ptb = {"NOUN": "NN", "PROPN": "NNP", "VERB": "VB", "AUX": "VB", "ADJ": "JJ", "ADV": "RB", "ADP": "IN"}
    by_pos: dict[str, set[str]] = {}
    for sentence in tagged:
        for text, pos in sentence.tokens:
            if text.isalpha() and pos in ptb:
                by_pos.setdefault(pos, set()).add(text.lower())
    rng = random.Random(seed)
    relations = sorted(ALL_RELATIONS)
    lines = 0
    with open(path, "w", encoding="utf-8") as fh:
        for pos, vocab in sorted(by_pos.items()):
            vocab_list = sorted(vocab)
            for word in vocab_list:
                for other in rng.sample(vocab_list, min(4, len(vocab_list))):
                    fh.write(
                        f"[{ptb[pos]}] ||| {word} ||| {other} ||| PPDB2.0Score=1.0 ||| 0-0 ||| "
                        f"{rng.choice(relations)}\n"
                    )
                    lines += 1
    return lines


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256, help="spaCy nlp.pipe batch size (the job's)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="cold passes (each re-tags, caches emptied); the figures are their medians",
    )
    parser.add_argument(
        "--block",
        type=int,
        default=None,
        help="sentences tagged, then selected, per block (default: --batch-size, as the job)",
    )
    parser.add_argument(
        "--reference-n",
        type=int,
        default=2000,
        help="sentences the reference implementation is timed on, for information (0: skip)",
    )
    args = parser.parse_args()
    block_size = args.block or args.batch_size

    work = Path(tempfile.mkdtemp(prefix="paraforge-bench-constraints-"))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    os.environ.setdefault("PARAFORGE_VAR_DIR", str(work / "var"))
    import django

    django.setup()
    from generation.constraints.idf import IdfValues
    from generation.constraints.ppdb import open_ppdb
    from generation.constraints.sets import build_pool, resolve_systems, select_for_all_systems, tag_sentences
    from generation.constraints.systems import PPDB_SYSTEMS, SYSTEMS
    from generation.nlp import load_pipeline
    from generation.selection import reference

    sentences, source = load_sentences(args.n)
    nlp = load_pipeline(tagger=True)
    list(nlp.pipe(sentences[:200], batch_size=args.batch_size))  # warm-up (model load is not timed)
    from config.process_tuning import tune_garbage_collector
    from generation.constraints.sets import clear_caches
    from generation.worker_start import load_tables_before_fork

    # IDF over the corpus first (tokenizer only, as the IDF job counts), so selection can run per block.
    tokenizer = load_pipeline(tagger=False)
    df: Counter = Counter()
    for doc in tokenizer.pipe(sentences, batch_size=1000):
        df.update({t.text.lower() for t in doc})
    n = len(sentences)
    idf = IdfValues((token, math.log(n / count)) for token, count in df.items())  # as a job loads a table

    ppdb_path = work / "ppdb-synthetic-lexical"
    ppdb_lines = write_synthetic_ppdb(ppdb_path, tag_sentences(sentences[:2000], nlp=nlp))
    ppdb = open_ppdb(ppdb_path)  # index built here, once, not timed
    no_ppdb = resolve_systems(s for s in SYSTEMS if s.number not in PPDB_SYSTEMS)
    all_systems = resolve_systems(None)

    def select(block, systems, with_ppdb):
        # Every result is built, then dropped (freed) at once, as the job frees each after writing it;
        # the job's own work on them (JSON, the shard file) is not selection, nor is counting them.
        source = ppdb if with_ppdb else None
        for s in block:
            select_for_all_systems(s, idf, seed=0, systems=systems, ppdb=source)

    # Interleaved blocks: tagging and selection of the same block run back to back, as in the job (and
    # both see the same load on a shared machine). Per-word caches start cold and fill as a job's would.
    load_tables_before_fork()  # what a Celery worker does at start-up (worker_start, celery.py), not timed:
    tune_garbage_collector()  # the selection tables, then gc.freeze() and the young GC threshold
    passes: list[tuple[float, float, float]] = []  # (tagging, selection 34, selection 37) seconds
    for _ in range(args.repeat):  # each pass cold: every per-word cache emptied first
        clear_caches()
        ppdb._cache.clear()
        t_tag = t_sel34 = t_sel37 = 0.0
        tagged: list = []
        for start in range(0, n, block_size):
            block, dt = timed(
                lambda s=start: tag_sentences(sentences[s : s + block_size], nlp=nlp, batch_size=args.batch_size)
            )
            t_tag += dt
            tagged.extend(block)
            t_sel34 += timed(lambda b=block: select(b, no_ppdb, False))[1]
            t_sel37 += timed(lambda b=block: select(b, all_systems, True))[1]
        passes.append((t_tag, t_sel34, t_sel37))
    t_tag, t_sel34, t_sel37 = (statistics.median(p[i] for p in passes) for i in range(3))
    t_sel34_warm = timed(lambda: select(tagged, no_ppdb, False))[1]
    t_sel37_warm = timed(lambda: select(tagged, all_systems, True))[1]
    ref_block = tagged[: args.reference_n]
    t_reference = (
        timed(lambda: [reference.select_for_all_systems(s, idf, seed=0, ppdb=ppdb) for s in ref_block])[1]
        if ref_block
        else None
    )
    sets37 = sum(
        r.is_constraint_set
        for s in tagged  # (counted once, untimed)
        for r in select_for_all_systems(s, idf, seed=0, systems=all_systems, ppdb=ppdb)
    )

    pool_sizes = [len(build_pool(s.tokens, idf)) for s in tagged]
    print(
        f"sentences: {n} from {source}; mean tokens {sum(len(s.tokens) for s in tagged) / n:.1f}; "
        f"mean pool size {sum(pool_sizes) / n:.2f} (IDF window 7.0-17.0 + prepositions)"
    )
    print(f"synthetic PPDB: {ppdb_lines} rules; constraint sets {sets37} of {n * 37} (rest: no constraint set)")
    print(
        f"blocks of {block_size} sentences: tagged, then selected, as the job does with its batches; "
        f"{len(passes)} cold pass(es), medians below"
    )
    rows = [
        (f"tagging alone (nlp.pipe, batch {args.batch_size})", t_tag),
        ("selection alone, 34 systems (no PPDB)", t_sel34),
        ("selection alone, 37 systems (synthetic PPDB)", t_sel37),
        ("selection alone, 34 systems, second pass (warm caches)", t_sel34_warm),
        ("selection alone, 37 systems, second pass (warm caches)", t_sel37_warm),
        ("tagging + selection, 37 systems", t_tag + t_sel37),
    ]
    for label, seconds in rows:
        print(f"{label:56s} {n / seconds:9.0f} sentences/s  ({seconds:.2f} s)")
    if t_reference is not None:
        rate = len(ref_block) / t_reference
        label = f"reference implementation, 37 systems, warm ({len(ref_block)} sent.)"
        print(
            f"{label:56s} {rate:9.0f} "
            f"sentences/s  ({t_reference:.2f} s; {rate / (n / t_tag):.1f}x tagging, even warm: why the fast path)"
        )
    for i, (tag, sel34, sel37) in enumerate(passes, 1):
        print(
            f"cold pass {i}: ratio selection/tagging {tag / sel34:.1f}x (34 systems), {tag / sel37:.1f}x (37 systems)"
        )
    ratio34 = statistics.median(tag / sel34 for tag, sel34, _ in passes)
    ratio37 = statistics.median(tag / sel37 for tag, _, sel37 in passes)
    print(
        f"ratio selection/tagging (median of {len(passes)} cold passes): {ratio34:.1f}x (34 systems), "
        f"{ratio37:.1f}x (37 systems); target >= 20x: {'PASS' if min(ratio34, ratio37) >= 20 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
