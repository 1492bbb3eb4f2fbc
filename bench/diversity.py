"""Diversity of three ways to get five paraphrases per reference (issue 39), in one run on the same references.

    .venv/bin/python bench/diversity.py [--model DIR [--prompt-template T]] [--corpus FILE] [--references 40]
        [--offset 2000] [--device cpu|cuda] [--negative-sets 5] [--samples 30] [--ban-fraction 0.3] [--ban-spread 0]
        [--allow-non-words] [... every option of paraphrase --diverse] [--seed 0] [--backward-model DIR]
        [--speed-repeat 3] [--stop-check] [--json OUT]

Systems, each decoding the same references (lines ``--offset`` .. ``--offset + --references`` of ``--corpus``,
by default the demo corpus from line 2,000: sentences the diverse mode's defaults were never tuned on):

* ``beam n-best``: constrained-free beam search, beam 8, its 5 best (``decode(beam=8, nbest=5)``);
* ``beam + rerank``: the 8 best of beam 8 ordered by word Levenshtein distance to the reference
  (``--rerank-dissimilar``, Wubben et al.), the first 5 kept;
* ``diverse``: ParaBank 2's mode (``generation.decoding.diverse``, defaults unless given).

Printed per system (ParaBank 2's Table 2 measures; BLEU is ParaBank's, without brevity penalty, on
lowercased text without punctuation: ``scoring.diversity.bleu_no_bp``; "1-BLEU" is 100 - BLEU):

* ``pair 1-BLEU``: 100 - BLEU over every pair of outputs of the same reference (output j against output i,
  i < j), one corpus: higher = the outputs differ more from each other;
* ``ref 1-BLEU``: 100 - BLEU of every output against its reference; ``ref I/U``: mean token intersection
  over union (sets of normalised tokens) with the reference, lower = further from it;
* ``sim``: mean cosine of the packaged sentence encoder (``scoring.similarity.embeddings.pair_cosines``) between
  output and reference; ``sim@1``: of the first output; for beam n-best also its best non-copy (the
  first output that is not the reference after normalisation), what the diverse rank 1 should match;
* ``non-word``: share of outputs with a word the release's non-word screen flags (``generation.english``'s
  rule: neither the reference's, the corpus's nor an English word, or a glued one such as "tothe"), words as
  clustering compares them (the diverse mode drops candidates with a word outside the English list and the
  reference's, so its share is near 0 unless ``--allow-non-words``);
* ``5 outputs``: share of references that got 5 outputs;
* ``cand/s``: candidates per second of decoding: beam hypotheses (references x beam) for the beam systems,
  sampled rows (references x sets x samples) for diverse; the ratio line compares them. ``seconds``: for
  beam n-best and diverse the median of ``--speed-repeat`` (3) timed passes over all the references, run
  interleaved (beam n-best, diverse, beam n-best, diverse, ...) after an untimed pass of each (the
  warm-up, whose outputs are the ones measured above: both decoders are deterministic); for beam +
  rerank one pass. Why interleaved: on a shared machine one run's beam baseline took 1.0 s and the
  next's 4.4 s (other jobs' load), so timed back to back the ratio read 0.49x or 1.79x; interleaved,
  a load change falls on both sides. The line after the ratio lists every timed pass.

``--stop-check`` (issue 46) adds two timed passes to each interleaved round, beam n-best and diverse each given a
``should_stop`` that never stops, asked before every decoder step through ``rate_limited`` every 0.5 s as a
generation job's cancel check is (its database query left out); a line gives their medians over the plain
ones' and whether their outputs are the plain ones'.

A last line gives what became of the diverse mode's samples (``DiverseResult.counts``, mean per reference):
ended with EOS, dropped for a non-word, distinct after that, under ``max_nll``, clusters formed (the pinned
one included), and outputs kept.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generation.decode_options import DecodeOptionsError, DiverseOptions  # noqa: E402
from generation.decoding.clustering import comparable_words  # noqa: E402
from generation.english import Vocabulary, english_words, non_words  # noqa: E402
from jobs.params import add_arguments, from_values  # noqa: E402
from scoring.diversity import bleu_no_bp, intersection_over_union  # noqa: E402

DEMO_CORPUS = ROOT / "generation" / "demo" / "corpus.txt"
DEMO_MODEL = ROOT / "generation" / "demo" / "model"
BEAM, NBEST = 8, 5


def within_reference_one_minus_bleu(outputs: list[list[str]]) -> float | None:
    """100 - BLEU over every within-reference pair (i < j) of outputs, as one corpus (the campaign tables'
    ``scoring.diversity.pairwise_one_minus_bleu`` compares two systems instead: rank i against rank j)."""
    left, right = [], []
    for outs in outputs:
        for a, b in itertools.combinations(outs, 2):
            left.append(a)
            right.append(b)
    return 100.0 - bleu_no_bp(left, right).bleu if left else None


def has_non_word(text: str, reference: str, vocabulary: Vocabulary) -> bool:
    """Whether ``text`` holds a word the release's non-word screen would flag (``generation.english.non_words``
    with the corpus's words and the English list; words as clustering compares them, not spaCy's tokens)."""
    return bool(non_words(comparable_words(text), comparable_words(reference), vocabulary))


def measure(name: str, refs: list[str], outputs: list[list[str]], seconds: float, candidates: int, vocabulary) -> dict:
    from scoring.similarity.embeddings import pair_cosines

    flat_refs = [r for r, outs in zip(refs, outputs) for _ in outs]
    flat = [o for outs in outputs for o in outs]
    cos = pair_cosines(flat_refs, flat) if flat else []
    firsts = [(r, outs[0]) for r, outs in zip(refs, outputs) if outs]
    sim1 = pair_cosines([r for r, _ in firsts], [o for _, o in firsts]) if firsts else []
    row = {
        "system": name,
        "outputs": len(flat),
        "pair_1_bleu": within_reference_one_minus_bleu(outputs),
        "ref_1_bleu": 100.0 - bleu_no_bp(flat_refs, flat).bleu if flat else None,
        "ref_iou": statistics.fmean(intersection_over_union(r, o) for r, o in zip(flat_refs, flat)) if flat else None,
        "sim": float(statistics.fmean(cos)) if flat else None,
        "sim_at_1": float(statistics.fmean(sim1)) if firsts else None,
        "non_word": sum(has_non_word(o, r, vocabulary) for r, o in zip(flat_refs, flat)) / max(len(flat), 1),
        "five": sum(len(outs) >= 5 for outs in outputs) / len(refs),
        "seconds": seconds,
        "cand_per_s": candidates / seconds,
    }
    noncopy = []
    for r, outs in zip(refs, outputs):
        other = [o for o in outs if comparable_words(o) != comparable_words(r)]
        if other:
            noncopy.append((r, other[0]))
    if noncopy:
        row["sim_best_noncopy"] = float(
            statistics.fmean(pair_cosines([r for r, _ in noncopy], [o for _, o in noncopy]))
        )
    return row


def vocabulary_of(lines: list[str]) -> Vocabulary:
    """The words ``non-word`` accepts, as the release screen does: the corpus's words and the English list."""
    corpus = frozenset(w for x in lines for w in comparable_words(x))
    return Vocabulary(corpus=corpus, english=english_words(), source="the corpus's words and the English word list")


TARGETS = (
    "pair 1-BLEU >= 3x",
    "sim@1 within 0.02 of beam's best non-copy",
    "ref 1-BLEU >= +10 points",
    "non-word share no higher",
    "sampled candidates/s >= beam hypotheses/s",
)


def diverse_targets(beam: dict, diverse: dict) -> list[dict]:
    """The diverse mode's five targets against beam n-best (two :func:`measure` rows of the same references), in
    ``TARGETS``' order: each ``{"target", "value", "text", "met"}`` (value and met None when not computable)."""
    b, d = beam, diverse
    ratio = d["pair_1_bleu"] / b["pair_1_bleu"] if d["pair_1_bleu"] and b["pair_1_bleu"] else None
    sim = (
        d["sim_at_1"] - b["sim_best_noncopy"]
        if b.get("sim_best_noncopy") is not None and d["sim_at_1"] is not None
        else None
    )
    ref = d["ref_1_bleu"] - b["ref_1_bleu"] if d["ref_1_bleu"] is not None and b["ref_1_bleu"] is not None else None
    speed = d["cand_per_s"] / b["cand_per_s"]
    checks = [
        (ratio, f"pair 1-BLEU ratio {fmt(ratio, '.2f')}x", ratio is not None and ratio >= 3),
        (sim, f"sim@1 - beam best non-copy {fmt(sim, '+.3f')}", sim is not None and sim >= -0.02),
        (ref, f"ref 1-BLEU {fmt(ref, '+.1f')} points", ref is not None and ref >= 10),
        (d["non_word"], f"non-word share {d['non_word']:.3f} vs {b['non_word']:.3f}", d["non_word"] <= b["non_word"]),
        (speed, f"candidates/s ratio {speed:.2f}x", speed >= 1),
    ]
    return [
        {"target": t, "value": v, "text": text, "met": None if v is None else met}
        for t, (v, text, met) in zip(TARGETS, checks)
    ]


def fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(DEMO_MODEL))
    p.add_argument(
        "--prompt-template", default=None, help="a decoder-only --model's prompt (as paraphrase's; default: its own)"
    )
    p.add_argument("--corpus", default=str(DEMO_CORPUS))
    p.add_argument("--references", type=int, default=40)
    p.add_argument("--offset", type=int, default=2000)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    # the diverse mode's options as paraphrase --diverse offers them (DiverseOptions' fields, defaults and help)
    add_arguments(p, DiverseOptions)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backward-model", default=None)
    p.add_argument("--batch-size", type=int, default=None, help="diverse: inputs decoded together")
    p.add_argument("--speed-repeat", type=int, default=3, help="timed passes of beam n-best and diverse, interleaved")
    p.add_argument("--stop-check", action="store_true", help="also time both with a never-stopping should_stop")
    p.add_argument("--json", default=None, help="also write the rows here")
    a = p.parse_args()
    if a.speed_repeat < 1:
        p.error("--speed-repeat must be at least 1")
    try:
        options = from_values(DiverseOptions, vars(a))  # with the bench's own --seed and --batch-size
    except DecodeOptionsError as exc:
        p.error(exc.option_message)

    import torch

    from generation.decoding import decode, load_model, rate_limited
    from generation.decoding.diverse import diverse_decode

    lines = [x.strip() for x in Path(a.corpus).read_text(encoding="utf-8").splitlines() if x.strip()]
    refs = lines[a.offset : a.offset + a.references]
    if not refs:
        sys.exit(f"no references at lines {a.offset}..{a.offset + a.references} of {a.corpus}")
    vocabulary = vocabulary_of(lines)
    model = load_model(a.model, device=a.device, prompt_template=a.prompt_template)
    backward = load_model(a.backward_model, device=model.device.type) if a.backward_model else None
    dev = model.device.type
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    print(
        f"# bench/diversity.py: {len(refs)} references (lines {a.offset}-{a.offset + len(refs) - 1} of "
        f"{Path(a.corpus).name}), model {Path(a.model).name}, device {dev} "
        f"({torch.cuda.get_device_name() if dev == 'cuda' else f'{torch.get_num_threads()} threads'})"
    )

    shares = ", ".join(f"{f:g}" for f in options.ban_fractions)
    print(f"# diverse: {options.negative_sets} negative sets (word shares {shares}) x {options.samples} samples")

    def timed(run):
        sync()
        t = time.perf_counter()
        result = run()
        sync()
        return result, time.perf_counter() - t

    def run_beam():
        return decode(model, refs, beam=BEAM, nbest=NBEST)

    def run_rerank():
        return decode(model, refs, beam=BEAM, nbest=BEAM, rerank_dissimilar=True)

    def run_diverse():
        return diverse_decode(model, refs, options=options, backward=backward)

    def never_stops():  # a generation job's cancel check without its query (generation_job/cancel.py)
        return rate_limited(lambda: False, 0.5)

    def run_beam_checked():
        return decode(model, refs, beam=BEAM, nbest=NBEST, should_stop=never_stops())

    def run_diverse_checked():
        return diverse_decode(model, refs, options=options, backward=backward, should_stop=never_stops())

    # speed: beam n-best and diverse interleaved (an untimed pass of each first), the median of each
    beam, _ = timed(run_beam)
    div, _ = timed(run_diverse)
    beam_secs, div_secs = [], []
    checked: dict[str, list[float]] = {"beam": [], "diverse": []}
    same_outputs = True
    for _ in range(a.speed_repeat):
        beam_secs.append(timed(run_beam)[1])
        div_secs.append(timed(run_diverse)[1])
        if a.stop_check:
            for name, run, plain in (("beam", run_beam_checked, beam), ("diverse", run_diverse_checked, div)):
                out, secs = timed(run)
                checked[name].append(secs)
                same_outputs &= [r.to_json() for r in out] == [r.to_json() for r in plain]
    rer, rer_secs = timed(run_rerank)

    rows = [
        measure(
            "beam n-best",
            refs,
            [[o["text"] for o in r.outputs] for r in beam],
            statistics.median(beam_secs),
            len(refs) * BEAM,
            vocabulary,
        ),
        measure(
            "beam + rerank",
            refs,
            [[o["text"] for o in r.outputs][:NBEST] for r in rer],
            rer_secs,
            len(refs) * BEAM,
            vocabulary,
        ),
        measure(
            "diverse",
            refs,
            [[o["text"] for o in r.outputs] for r in div],
            statistics.median(div_secs),
            len(refs) * options.rows,
            vocabulary,
        ),
    ]

    print(
        f"{'system':<14} {'pair 1-BLEU':>11} {'ref 1-BLEU':>10} {'ref I/U':>8} {'sim':>6} {'sim@1':>6} "
        f"{'non-word':>8} {'5 outputs':>9} {'cand/s':>8} {'seconds':>8}"
    )
    for r in rows:
        print(
            f"{r['system']:<14} {fmt(r['pair_1_bleu']):>11} {fmt(r['ref_1_bleu']):>10} {fmt(r['ref_iou'], '.3f'):>8} "
            f"{fmt(r['sim'], '.3f'):>6} {fmt(r['sim_at_1'], '.3f'):>6} {fmt(r['non_word'], '.3f'):>8} "
            f"{fmt(r['five'], '.2f'):>9} {fmt(r['cand_per_s'], '.1f'):>8} {fmt(r['seconds'], '.1f'):>8}"
        )
    b, d = rows[0], rows[2]
    print(f"beam best non-copy sim: {fmt(b.get('sim_best_noncopy'), '.3f')}")
    print("diverse against beam n-best (targets: pair 1-BLEU >= 3x; sim@1 within 0.02 of beam's best non-copy;")
    print("  ref 1-BLEU >= +10 points; non-word share no higher; sampled candidates/s >= beam hypotheses/s):")
    for t in diverse_targets(b, d):
        if t["target"] == TARGETS[0] or t["value"] is not None:  # as before: a missing difference not printed
            print(f"  {t['text']}")
    print(
        f"  timing: {a.speed_repeat} interleaved passes (beam n-best, diverse, ...) after an untimed one, medians; "
        f"beam n-best {' '.join(f'{x:.2f}' for x in beam_secs)} s, diverse {' '.join(f'{x:.2f}' for x in div_secs)} s"
    )
    if a.stop_check:
        print(
            f"stop check (never stopping, asked every step): beam n-best {statistics.median(checked['beam']):.2f} s"
            f" ({statistics.median(checked['beam']) / statistics.median(beam_secs):.3f}x), diverse "
            f"{statistics.median(checked['diverse']):.2f} s"
            f" ({statistics.median(checked['diverse']) / statistics.median(div_secs):.3f}x) against the plain "
            f"medians; outputs the same: {same_outputs}"
        )
    keys = ("finished", "non_word", "distinct", "under_max_nll", "clusters")
    means = {k: statistics.fmean(r.counts.get(k, 0) for r in div) for k in keys}
    print(
        f"diverse candidates per reference (mean of {options.rows} sampled): "
        + ", ".join(f"{k} {v:.1f}" for k, v in means.items())
        + f"; kept {statistics.fmean(len(r.outputs) for r in div):.2f}"
    )
    print("example (first reference):")
    print(f"  reference: {refs[0]}")
    for name, outs in (("beam", beam[0].outputs), ("diverse", div[0].outputs)):
        for o in outs:
            print(f"  {name:<8} {o['text']}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
