"""Comparison row for bench/decoding.py: transformers 4.56's constrained beam search (``force_words_ids``).

``force_words_ids`` left transformers core after 4.56, so this runs in a separate venv and imports only
torch + transformers (no Django, no ``generation.decoding``, which needs transformers 5):

    python3 -m venv /tmp/venv-hf456
    /tmp/venv-hf456/bin/pip install torch==2.13.0
    /tmp/venv-hf456/bin/pip install "transformers==4.56.*" sentencepiece==0.2.3 safetensors tokenizers
    /tmp/venv-hf456/bin/python bench/decoding_hf_constrained.py SPEC.json [--json]   # SPEC from decoding.py

SPEC.json is written by ``bench/decoding.py --hf456-python ...`` (model folder, sources, beams, batches,
max_length and per-sentence constraints as word lists for each row). Per (beam, batch) it times, on the same
model and sentences: unconstrained beam search (this venv's own baseline), ``force_words_ids`` with C = 1, 2,
4, 8 words and ``bad_words_ids`` with 5 and 20 phrases; best of ``repeat`` runs per row (rows round-robin).
``generate`` takes ONE constraint set per call, so at batch > 1 every sentence of a batch gets the constraints
of the batch's first sentence; outputs are checked against the constraints actually applied. Checks are at the
word level (``\\w+`` runs): a forced token can be glued to a following piece and a banned word can be spelled
with other pieces, so both are counted, not assumed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time


def word_ids(tok, phrase: list[str]) -> list[int]:
    """Token ids of a word phrase as the target side spells it on its own (what a user would pass)."""
    return tok(text_target=" " + " ".join(phrase), add_special_tokens=False)["input_ids"]


def contains(words: list[str], sub: list[str]) -> bool:
    n = len(sub)
    return any(words[i : i + n] == sub for i in range(len(words) - n + 1))


def run_row(model, tok, spec, beam, bs, cons):
    """Decode every source; returns (sentences/s, satisfied, word-level negative violations)."""
    import torch

    sources = spec["sources"]
    sat = viol = 0
    t = time.perf_counter()
    texts = []
    applied = []
    for k in range(0, len(sources), bs):
        c = cons[k] if cons else None
        kw = {}
        if c and c["positive"]:
            kw["force_words_ids"] = [word_ids(tok, p) for p in c["positive"]]
        if c and c["negative"]:
            kw["bad_words_ids"] = [word_ids(tok, p) for p in c["negative"]]
        enc = tok(sources[k : k + bs], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, num_beams=beam, max_length=spec["max_length"], early_stopping=False, **kw)
        texts += tok.batch_decode(out, skip_special_tokens=True)
        applied += [c] * len(out)
    dt = time.perf_counter() - t
    for text, c in zip(texts, applied):
        if not c:
            continue
        words = re.findall(r"\w+", text)
        bad = sum(1 for p in c["negative"] if contains(words, p))
        sat += all(contains(words, p) for p in c["positive"]) and not bad
        viol += bad
    return len(sources) / dt, sat, viol


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--json", action="store_true", help="print one JSON object (for bench/decoding.py)")
    a = ap.parse_args(argv)
    import torch
    import transformers
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    spec = json.loads(open(a.spec).read())
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    tok = AutoTokenizer.from_pretrained(spec["model"])
    model = AutoModelForSeq2SeqLM.from_pretrained(spec["model"]).eval()
    n = len(spec["sources"])
    log = sys.stderr if a.json else sys.stdout
    print(
        f"transformers={transformers.__version__} torch={torch.__version__} sentences={n} "
        f"max_length={spec['max_length']} torch_threads={torch.get_num_threads()}",
        file=log,
    )
    results = []
    for beam in spec["beams"]:
        for bs in spec["batches"]:
            run_row(model, tok, spec, beam, bs, None)  # warm-up
            best = {}
            for _ in range(spec.get("repeat", 1)):  # rows round-robin, best of N: load spikes hit all rows alike
                for i, row in enumerate(spec["rows"]):
                    r = run_row(model, tok, spec, beam, bs, row["constraints"])
                    best[i] = max(best.get(i, r), r, key=lambda x: x[0])
            base = None
            print(f"\nbeam={beam} batch={bs}", file=log)
            print(f"  {'row':34s} {'sent/s':>9s} {'time/uncons':>12s} {'satisfied':>10s} {'neg viol':>8s}", file=log)
            for i, row in enumerate(spec["rows"]):
                cons = row["constraints"]
                sp, sat, viol = best[i]
                base = base or sp
                res = {
                    "beam": beam,
                    "batch": bs,
                    "kind": row["kind"],
                    "n": row["n"],
                    "label": row["label"],
                    "sent_per_s": sp,
                    "time_over_unconstrained": base / sp,
                    "satisfied": sat if cons else None,
                    "neg_violations": viol if cons else None,
                }
                results.append(res)
                print(
                    f"  {row['label']:34s} {sp:9.2f} {base / sp:12.2f} "
                    f"{'' if not cons else f'{sat}/{n}':>10s} {'' if not cons else viol:>8}",
                    file=log,
                )
    if a.json:
        print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
