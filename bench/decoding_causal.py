"""Decoding speed of a decoder-only model (issue 40): Hugging Face ``generate`` (beam search) against ours,
unconstrained and constrained, in one run. ``bench/decoding.py --preset llama-small`` runs it.

    .venv/bin/python bench/decoding.py --preset llama-small [--beams 5] [--batches 1,32] [--sentences 64]
        [--steps 24] [--repeat 3] [--stat best|median] [--threads N] [--device cpu|cuda] [--dtype D]

The model: a Llama-shaped ``LlamaForCausalLM`` with random weights (``PRESETS``: ``llama-small``, 4 layers,
hidden 512, 8 query heads over 2 key/value heads (grouped-query attention), FFN 1376, rotary positions, a
32,000-token vocabulary, Llama 2's; about 29M parameters) and the decoder tests' byte-level tokenizer. Each
source is put in ``paraphrase-plain``'s prompt (23-45 tokens here, left-padded per batch). EOS is
banned (the generation config's ``bad_words_ids``, applied by both engines) so that every engine decodes
exactly ``--steps`` tokens per sentence: with random weights a real EOS would end outputs anywhere.

Rows, per (beam, batch): HF ``generate``; ours without constraints; ours with C = 4 positive words; ours
with 20 negative words; ours with both (C = 4 positive and 20 negative: the issue's constrained row). Each
is the best (``--stat median``: the median) of ``--repeat`` runs, rows interleaved. It prints
sentences/second, each row's time over ours-none's and over HF's (wall clock, and the process's CPU time:
on a host shared with other processes the CPU time is the steadier figure, as it leaves out the time the
process waited for a core), the sentences with outputs ("satisfied";
the others are reported unsatisfiable: no hypothesis met every constraint within the length), how many best
outputs of ours-none are token for token HF's, and the outputs that violate their constraints (0). Targets (issue
40): ours-none <= 1.0x HF's time at batch 32; constrained (4 + 20) <= 1.3x ours-none.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PRESETS = {
    "llama-small": dict(
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=32000,
        max_position_embeddings=512,
    )
}


def build_model(folder: Path, preset: str, seed: int = 0) -> Path:
    """The preset's random Llama and the tests' tokenizer, saved as a checkpoint folder (EOS banned)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.generation.causal_models import tiny_tokenizer

    tok = tiny_tokenizer(chat=False)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        **PRESETS[preset], eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None
    )
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.bad_words_ids = [[tok.eos_token_id]]
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run(a) -> None:
    """``bench/decoding.py``'s options ``a`` (``a.preset`` one of ``PRESETS``)."""
    import torch

    from generation.decoding import decode, load_model, normalise_constraints, violations
    from generation.decoding.causal import prompt_batch
    from tests.generation.conftest import WORDS

    torch.set_num_threads(a.threads or max(1, torch.get_num_threads()))
    tmp = tempfile.TemporaryDirectory()
    folder = build_model(Path(a.save_model or tmp.name), a.preset)
    dtype = a.dtype.split(",")[0].strip() if a.dtype else None
    m = load_model(folder, device=a.device, dtype=dtype, prompt_template="paraphrase-plain")
    rnd = random.Random(1)
    sources = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 14))) for _ in range(a.sentences)]
    single = [w for w in sorted(set(WORDS)) if len(m.tokenizer(" " + w, add_special_tokens=False)["input_ids"]) == 1]
    max_length = a.steps + 1
    beams = [int(x) for x in a.beams.split(",")]
    batches = [int(x) for x in a.batches.split(",")]
    n_params = sum(p.numel() for p in m.model.parameters())
    lengths = [int(x) for x in prompt_batch(m, sources)[1].sum(1)]
    print(
        f"device={m.device} model=random Llama ({a.preset}: {PRESETS[a.preset]}) ({n_params / 1e6:.1f}M parameters)"
        f" sentences={len(sources)} prompt tokens {min(lengths)}-{max(lengths)} (paraphrase-plain)"
        f" new tokens={a.steps} torch_threads={torch.get_num_threads()} dtype={m.dtype}"
    )

    def cons_for(n_pos: int, n_neg: int) -> list:
        out = []
        for i in range(len(sources)):
            r = random.Random(i)
            pos = r.sample(single, n_pos)
            rest = [w for w in WORDS if w not in pos]
            r.shuffle(rest)
            out.append(
                {"positive": [[w] for w in pos], "negative": [[w] for w in rest[:n_neg]]} if n_pos + n_neg else None
            )
        return out

    best_none: dict = {}
    violated = [0]  # outputs that break their constraints, over every run (must stay 0)

    def run_ours(beam: int, bs: int, n_pos: int, n_neg: int):
        cons = cons_for(n_pos, n_neg)
        t, c0 = time.perf_counter(), time.process_time()
        res = decode(m, sources, cons, beam=beam, nbest=1, max_length=max_length, batch_size=bs)
        dt, cpu = time.perf_counter() - t, time.process_time() - c0
        bad = sum(bool(violations(o["text"], normalise_constraints(c))) for r, c in zip(res, cons) for o in r.outputs)
        violated[0] += bad + sum(r.safety_net_dropped for r in res)
        ok = sum(not r.unsatisfiable for r in res)
        if not n_pos + n_neg:
            best_none[beam, bs] = [r.outputs[0]["tokens"] for r in res]  # (None: an id past the tokenizer's)
        return dt, cpu, ok

    hf_best: dict = {}

    def run_hf(beam: int, bs: int):
        t, c0 = time.perf_counter(), time.process_time()
        outs = []
        for k in range(0, len(sources), bs):
            ids, am = prompt_batch(m, sources[k : k + bs])
            with torch.no_grad():
                seq = m.model.generate(
                    input_ids=ids, attention_mask=am, num_beams=beam, max_new_tokens=a.steps, early_stopping=False,
                    do_sample=False, length_penalty=1.0,
                )  # fmt: skip
            outs += [m.tokenizer.convert_ids_to_tokens(row) for row in seq[:, ids.shape[1] :].tolist()]
        dt, cpu = time.perf_counter() - t, time.process_time() - c0
        hf_best[beam, bs] = outs
        return dt, cpu, len(sources)

    rows = [
        ("HF generate (beam search)", lambda b, s: run_hf(b, s)),
        ("ours, no constraints", lambda b, s: run_ours(b, s, 0, 0)),
        ("ours, C=4 positive", lambda b, s: run_ours(b, s, 4, 0)),
        ("ours, 20 negative", lambda b, s: run_ours(b, s, 0, 20)),
        ("ours, C=4 positive + 20 negative", lambda b, s: run_ours(b, s, 4, 20)),
    ]
    stat = min if a.stat == "best" else statistics.median
    all_ok = True
    for beam in beams:
        for bs in batches:
            times: dict[str, list[float]] = {label: [] for label, _ in rows}
            cpus: dict[str, list[float]] = {label: [] for label, _ in rows}
            satisfied: dict[str, int] = {}
            for _ in range(a.repeat):
                for label, fn in rows:
                    dt, cpu, ok = fn(beam, bs)
                    print(f"  run: beam={beam} batch={bs} {label}: {dt:.2f} s, CPU {cpu:.2f} s", flush=True)
                    times[label].append(dt)
                    cpus[label].append(cpu)
                    satisfied[label] = ok
                    all_ok &= ok == len(sources)
            t = {label: stat(v) for label, v in times.items()}
            c = {label: stat(v) for label, v in cpus.items()}
            none, hf = t["ours, no constraints"], t["HF generate (beam search)"]
            c_none, c_hf = c["ours, no constraints"], c["HF generate (beam search)"]
            same = sum(o == h[: len(o)] for o, h in zip(best_none[beam, bs], hf_best[beam, bs]))
            print(f"beam={beam} batch={bs} ({a.stat} of {a.repeat})")
            print(
                f"  {'row':36s} {'sent/s':>8s} {'time/ours-none':>15s} {'time/HF':>8s}"
                f" {'CPU/ours-none':>14s} {'CPU/HF':>7s} {'satisfied':>10s}"
            )
            for label, _ in rows:
                print(
                    f"  {label:36s} {len(sources) / t[label]:8.2f} {t[label] / none:15.2f} {t[label] / hf:8.2f}"
                    f" {c[label] / c_none:14.2f} {c[label] / c_hf:7.2f} {satisfied[label]:>5d}/{len(sources)}"
                )
            print(f"  ours-none's best outputs equal to HF's, token for token: {same}/{len(sources)}")
    print(f"outputs violating their constraints: {violated[0]}; every sentence decoded (none unsatisfiable): {all_ok}")
