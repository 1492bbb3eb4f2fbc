"""Decoding speed: CTranslate2 (the speed bar), Hugging Face beam search and ours, unconstrained and constrained.

    .venv/bin/python bench/decoding.py [--quick] [--model DIR|ORG/NAME] [--device cpu|cuda] [--threads N]
        [--beams 5,10,20] [--batches 1,32] [--sentences 64] [--steps 24]
        [--preset opus-mt-cs-en] [--d-model 256] [--layers 6] [--ffn 1024] [--heads 8] [--vocab 8000]
        [--repeat 3] [--stat best|median] [--no-ct2] [--save-model DIR] [--hf456-python /tmp/venv-hf456/bin/python]
        [--hf-step off|none|all] [--stop-beam off|c8|all] [--int8] [--dtype float16,float32,bfloat16]
        [--stop-check]

``--preset llama-small``: a decoder-only Llama shape with random weights, HF ``generate`` against ours
without and with constraints (bench/decoding_causal.py says which rows). Without ``--model`` a Marian
config with random weights is built (sizes above; ``--preset opus-mt-cs-en``:
opus-mt-cs-en's shape, 6+6 layers, d 512, 8 heads, FFN 2048, a 58,101-token vocabulary). Its EOS is
suppressed (and it has no forced EOS) so every engine decodes exactly ``--steps`` tokens per sentence: with
random weights a real EOS would end outputs at arbitrary lengths. With ``--model`` the sources are the first
``--sentences`` sentences of STS-B dev (when /work/shared/data/stsb is there) and outputs end at EOS or
``--steps`` tokens.

CTranslate2 rows (``ctranslate2`` installed; a test/bench requirement, not a runtime one): the same saved
model converted with CTranslate2's own Transformers converter, the same sentences, beam, batch size
(``max_batch_size``: CTranslate2 sorts the sentences by length into its batches, as a user would get it),
threads (``--threads``: torch's and CTranslate2's ``intra_threads``), length limit, length penalty and banned
tokens (the generation config's ``bad_words_ids`` as ``suppress_sequences``). It prints how many best
outputs are token for token the same as ours without constraints. Rows, in one run, per (beam, batch): HF ``generate``,
ours without constraints, ours with C = 1, 2, 4, 8 positive constraint tokens, ours with 5 and 20 negative
phrases (``--hf-step``: also ours with Hugging Face's decoder step instead of the lean one of
generation/decoding/fast_step.py, "... (HF step)": by default the unconstrained row only, ``all``: every
row of ours; ``--stop-beam``: also ours with positive constraints under ``stop="beam"``, Hugging Face's rule
over all K finished slots, instead of the default ``"auto"``, "... (stop=beam)": by default C = 8 only),
each the best (``--stat median``: the median) of ``--repeat`` runs with the rows interleaved (a
shared machine's stalls would otherwise land on one row). The column step/ours-none is time per decoder
step of one sentence (``decode(..., stats=)``'s ``sentence_steps``: steps times the sentences still in
the batch, which shrinks as they finish) over ours-none's: with a real EOS (``--model``) a constrained
search can run more steps than the unconstrained one (under ``stop="beam"`` until K hypotheses meet every
constraint), and this separates DBA's cost per step from the number of steps (with the random model every
row runs the same steps, and it equals time/ours-none). Prints sentences/second, ratios to "ours, none" and to HF, and
checks every output (100% satisfied, 0 negative violations). Targets: constrained <= 1.5x ours-none
time; C=8 <= 1.25x C=1; ours-none <= 1.2x HF. On a GPU it first decodes 16 sentences of each (beam,
batch) without constraints, with C=1 and C=8, and with 20 negative phrases, once with the step
bookkeeping replayed as a CUDA graph and once eagerly, and prints whether every n-best output and score
is equal.

``--stop-check`` adds ours without constraints and with C = 8, "... (stop check)", each decode given a
``should_stop`` that never stops, asked before every decoder step through ``rate_limited`` every 0.5 s as a
generation job's cancel check is (issue 46; the job's database query, twice a second, left out): its
time/ours-none is the check's cost.

``--int8`` adds ours with dynamic int8 weights (``decode(..., int8=True)``) without constraints, with C = 8
and with 20 negative phrases, "... (int8)", and CTranslate2 with ``compute_type="int8"``, "CTranslate2 beam
search (int8)"; it prints how many best outputs each engine's int8 decode shares with its own float32 one,
and ours' int8 rows against CTranslate2's int8 time.

``--dtype D1,D2,...`` (float32, float16, bfloat16; half precision on a GPU only, a clear error on the CPU): the
model's floating-point types. D1 decodes every row (default: the device's, float16 on a GPU and float32 on the
CPU); each other D adds "HF beam search (D)", "ours, no constraints (D)", "ours, C=8 positive (D)" and
"ours, 20 negative phrases (D)" with the model in D (constraints checked as in every row), prints how many
best outputs (no constraints) equal D1's, and a summary of D's time against D1's.

``--save-model DIR`` builds the random model into DIR and keeps it. ``--hf456-python PY`` also runs
bench/decoding_hf_constrained.py under PY (a venv with transformers 4.56, the last with ``force_words_ids``
in core) on the same model, sentences and constraints, and adds its rows ("HF4.56 ...", best of
``--hf456-repeat`` runs, before ours, in a subprocess) to each table.

Over 600 lines on purpose: a script that must run standalone (``python bench/decoding.py``, no app imports it),
each decoder's row measured the same way on the same model and sentences in one process; what it measures is the
app's (``generation.decoding``), only the harness lives here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "generation"))


@dataclasses.dataclass(frozen=True)
class Variant:
    """How one row decodes with our decoder: the fast step or Hugging Face's (False), the stopping rule, int8
    weights, a dtype, and a stop check that never stops (what a job's cancel costs)."""

    fast_step: bool | None = None
    stop: str = "auto"
    int8: bool = False
    dtype: str | None = None
    stop_check: bool = False


def build_random_model(folder: Path, a):
    import sentencepiece as spm
    import torch
    from conftest import corpus  # the tiny corpus of the decoder tests
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "c.txt").write_text("\n".join(corpus(2000)) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(folder / "c.txt"),
        model_prefix=str(folder / "sp"),
        vocab_size=300,
        character_coverage=1.0,
        bos_id=-1,
        eos_id=1,
        unk_id=2,
        pad_id=-1,
        minloglevel=2,
        hard_vocab_limit=False,
    )
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    rnd = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    while len(vocab) < a.vocab - 1:  # synthetic pieces so that the output layer has a realistic size
        p = ("▁" if rnd.random() < 0.6 else "") + "".join(rnd.choice(letters) for _ in range(rnd.randint(2, 7)))
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(str(folder / "sp.model"), str(folder / "sp.model"), str(folder / "vocab.json"))
    torch.manual_seed(0)
    cfg = MarianConfig(
        vocab_size=len(vocab),
        d_model=a.d_model,
        encoder_layers=a.layers,
        decoder_layers=a.layers,
        encoder_attention_heads=a.heads,
        decoder_attention_heads=a.heads,
        encoder_ffn_dim=a.ffn,
        decoder_ffn_dim=a.ffn,
        max_position_embeddings=512,
        pad_token_id=len(vocab) - 1,
        eos_token_id=0,
        decoder_start_token_id=len(vocab) - 1,
        init_std=0.05,
        forced_eos_token_id=None,
    )  # (CTranslate2 has no forced EOS: all engines end at --steps)
    model = MarianMTModel(cfg)
    model.final_logits_bias[0, 0] = -1.0e4  # no early EOS: every row decodes the same number of steps
    model.generation_config.bad_words_ids = [[len(vocab) - 1]]  # as opus-mt's: <pad> is never generated
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    return folder / "model"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="beams 5,10; batches 1,8; 8 sentences; 20 steps; small model")
    ap.add_argument("--model", help="a seq2seq checkpoint folder or hub id (default: a random Marian model)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--beams", default="5,10,20")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument(
        "--preset",
        choices=("opus-mt-cs-en", "llama-small"),
        help="random model of opus-mt-cs-en's shape: 6+6 layers, d 512, 8 heads, FFN 2048, V 58101; "
        "llama-small: a decoder-only Llama shape against HF generate (bench/decoding_causal.py)",
    )
    ap.add_argument("--threads", type=int, help="torch threads and CTranslate2 intra_threads (default: torch's)")
    ap.add_argument("--no-ct2", action="store_true", help="leave out the CTranslate2 rows")
    ap.add_argument("--repeat", type=int, default=3, help="each row: best of N runs, rows interleaved (default 3)")
    ap.add_argument("--save-model", help="build the random model into this folder and keep it")
    ap.add_argument("--hf456-python", help="python of a transformers 4.56 venv: add its constrained beam search rows")
    ap.add_argument(
        "--stat",
        choices=("best", "median"),
        default="best",
        help="each row's figure over its runs: the best (drops stalls) or the median (also drops lucky "
        "fast runs, on a host whose speed swings both ways)",
    )
    ap.add_argument("--hf456-repeat", type=int, default=3, help="HF4.56 rows: best of N runs (default 3)")
    ap.add_argument(
        "--stop-beam",
        choices=("off", "c8", "all"),
        default="c8",
        help="rows of ours with positive constraints under stop='beam' (Hugging Face's rule over all K "
        "finished slots) beside the default 'auto' (the n-best's): 'c8' (default) C=8 only, "
        "'all' every C, 'off' none",
    )
    ap.add_argument(
        "--int8",
        action="store_true",
        help="also ours with dynamic int8 weights (none, C=8, 20 negative) and CTranslate2 in int8",
    )
    ap.add_argument(
        "--dtype",
        default=None,
        help="comma-separated model dtypes (float32, float16, bfloat16; half precision: GPU only): the first "
        "decodes every row (default: the device's), each other adds rows in that dtype",
    )
    ap.add_argument(
        "--stop-check",
        action="store_true",
        help="also ours (none, C=8) with a should_stop that never stops, asked each step as a generation job's "
        "is (rate_limited, every 0.5 s): the cost of the cancel check (issue 46)",
    )
    ap.add_argument(
        "--hf-step",
        choices=("off", "none", "all"),
        default="none",
        help="rows of ours with Hugging Face's decoder step instead of the lean one (fast_step=False): "
        "'none' (default) the row 'ours, no constraints (HF step)', 'all' one per row of ours, "
        "'off' none",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.beams, a.batches, a.sentences, a.steps = "5,10", "1,8", 8, 20
        a.d_model, a.ffn, a.layers, a.vocab = 128, 512, 2, 4000
    if a.preset == "opus-mt-cs-en":
        a.d_model, a.ffn, a.layers, a.heads, a.vocab = 512, 2048, 6, 8, 58101
    if a.preset == "llama-small":  # a decoder-only model: its own rows (issue 40)
        import decoding_causal

        return decoding_causal.run(a)
    import torch

    from generation.decode_options import DTYPES, DecodeOptionsError
    from generation.decoding import decode, load_model, normalise_constraints, rate_limited, violations
    from generation.model_source import ModelFolderError, model_folder

    torch.set_num_threads(a.threads or max(1, torch.get_num_threads()))
    tmp = tempfile.TemporaryDirectory()
    # a hub id (org/name) becomes its snapshot folder in the Hugging Face cache: CTranslate2 converts a folder
    try:
        model_dir = model_folder(a.model) if a.model else build_random_model(Path(a.save_model or tmp.name), a)
    except ModelFolderError as exc:
        ap.error(str(exc))
    dtypes = [d.strip() for d in a.dtype.split(",")] if a.dtype else [None]
    if a.dtype and (any(d not in DTYPES for d in dtypes) or len(set(dtypes)) < len(dtypes)):
        ap.error(f"--dtype: distinct values among {', '.join(DTYPES)}")
    try:
        m = load_model(model_dir, device=a.device, dtype=dtypes[0])
        in_dtype = {d: load_model(model_dir, device=a.device, dtype=d) for d in dtypes[1:]}  # the extra rows' models
    except DecodeOptionsError as exc:
        ap.error(exc.option_message)
    from conftest import WORDS

    rnd = random.Random(1)
    sources = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 14))) for _ in range(a.sentences)]
    real_text = bool(a.model and STSB_DEV.is_file())
    if real_text:  # positive constraints: words of the sentence (C of them, or all it has if fewer)
        sources = stsb_sentences(a.sentences)
    # single-token words usable as positive constraints / negative phrases
    single = [
        w
        for w in sorted(set(WORDS))
        if len(m.tokenizer(text_target=" " + w, add_special_tokens=False)["input_ids"]) == 1
    ]
    max_length = a.steps + 1
    n_params = sum(p.numel() for p in m.model.parameters())
    shown = a.model or f"random Marian d={a.d_model} L={a.layers}+{a.layers} V={m.vocab.size}"
    print(
        f"device={m.device} model={shown}"
        f" ({n_params / 1e6:.1f}M parameters) sentences={len(sources)}"
        f" ({'STS-B dev' if a.model and STSB_DEV.is_file() else 'random words'})"
        f" max_length={max_length} torch_threads={torch.get_num_threads()} dtype={m.dtype}"
        f"{''.join(f' (+ rows in {d})' for d in in_dtype)}"
    )
    ct2 = None if a.no_ct2 else Ct2Runner.build(model_dir, Path(tmp.name) / "ct2", m, torch.get_num_threads())
    if ct2 is not None:
        print(
            f"CTranslate2 {ct2.version}: converted by its TransformersConverter, compute_type={ct2.compute_type},"
            f" intra_threads={torch.get_num_threads()}, suppress_sequences={ct2.suppress}"
        )
    ct2_int8 = None
    if a.int8 and ct2 is not None:
        ct2_int8 = Ct2Runner.build(model_dir, Path(tmp.name) / "ct2", m, torch.get_num_threads(), "int8", convert=False)

    def cons_for(kind, n):
        out = []
        for i in range(len(sources)):
            r = random.Random(i)
            if kind == "pos" and real_text:  # words of the sentence itself (as a paraphrase would keep)
                own = list(dict.fromkeys(re.findall(r"\w+", sources[i])))
                out.append(
                    {"positive": [[w] for w in r.sample(own, min(n, len(own)))], "negative": [], "bos_avoid": []}
                )
            elif kind == "pos":
                out.append({"positive": [[w] for w in r.sample(single, n)], "negative": [], "bos_avoid": []})
            elif kind == "neg":
                ws = list(WORDS)
                r.shuffle(ws)
                out.append({"positive": [], "negative": [[w] for w in ws[:n]], "bos_avoid": []})
            else:
                out.append(None)
        return out

    last_none = {}

    def run_ours(beam, bs, kind, n, how: Variant = Variant()):
        fast_step, stop, int8, dtype, stop_check = dataclasses.astuple(how)
        cons = cons_for(kind, n)
        stats = {}
        should_stop = rate_limited(lambda: False, 0.5) if stop_check else None  # (a job's, without its query)
        t = time.perf_counter()
        res = decode(
            in_dtype.get(dtype, m),
            sources,
            cons,
            beam=beam,
            nbest=1,
            max_length=max_length,
            batch_size=bs,
            stats=stats,
            fast_step=fast_step,
            stop=stop,
            int8=int8,
            should_stop=should_stop,
        )
        dt = time.perf_counter() - t
        if kind == "none" and fast_step is None:
            last_none[beam, bs, int8, dtype] = res
        sat = viol = 0
        for r, c in zip(res, cons):
            nc = normalise_constraints(c)
            if not r.unsatisfiable and all(not violations(o["text"], nc) for o in r.outputs):
                sat += 1
            viol += sum(
                1 for o in r.outputs for p in nc["negative"] if p[0] in __import__("re").findall(r"\w+", o["text"])
            )
            viol += r.safety_net_dropped
        return len(sources) / dt, sat, viol, dt / stats["sentence_steps"]

    def run_hf(beam, bs, dtype=None):
        mm = in_dtype.get(dtype, m)
        t = time.perf_counter()
        for k in range(0, len(sources), bs):
            enc = mm.tokenizer(sources[k : k + bs], return_tensors="pt", padding=True).to(mm.device)
            with torch.no_grad():
                mm.model.generate(**enc, num_beams=beam, max_length=max_length, early_stopping=False)
        return len(sources) / (time.perf_counter() - t)

    if m.device.type == "cuda":  # the graph must change nothing but time
        check_graph(
            m,
            sources,
            cons_for,
            max_length,
            [int(x) for x in a.beams.split(",")],
            [int(x) for x in a.batches.split(",")],
        )
    rows = ([("ct2", "CTranslate2 beam search", 0)] if ct2 is not None else []) + [
        ("hf", "HF beam search", 0),
        ("none", "ours, no constraints", 0),
    ]
    rows += [("pos", f"ours, C={c} positive", c) for c in (1, 2, 4, 8)]
    rows += [("neg", f"ours, {n} negative phrases", n) for n in (5, 20)]
    if a.stop_beam != "off":  # the same search ended by Hugging Face's rule over all K slots: the rule's effect
        rows += [
            ("pos", f"{label} {STOP_BEAM}", n)
            for kind, label, n in rows
            if kind == "pos" and (a.stop_beam == "all" or n == 8)
        ]
    if a.int8:  # dynamic int8 weights, ours and CTranslate2's
        rows += ([("ct2", f"CTranslate2 beam search {INT8}", 0)] if ct2_int8 is not None else []) + [
            ("none", f"ours, no constraints {INT8}", 0),
            ("pos", f"ours, C=8 positive {INT8}", 8),
            ("neg", f"ours, 20 negative phrases {INT8}", 20),
        ]
    for d in in_dtype:  # the model in another dtype: HF's and ours, with and without constraints
        rows += [
            ("hf", f"HF beam search ({d})", 0),
            ("none", f"ours, no constraints ({d})", 0),
            ("pos", f"ours, C=8 positive ({d})", 8),
            ("neg", f"ours, 20 negative phrases ({d})", 20),
        ]
    if a.stop_check:  # the same search asking a job's cancel check every step: the check's cost
        rows += [("none", f"ours, no constraints {STOP_CHECK}", 0), ("pos", f"ours, C=8 positive {STOP_CHECK}", 8)]
    if a.hf_step != "off":  # the same decoder with Hugging Face's step (fast_step=False): the lean step's effect
        rows += [
            (kind, f"{label} (HF step)", n)
            for kind, label, n in rows
            if label.startswith("ours,") and not variant(label) and (a.hf_step == "all" or kind == "none")
        ]
    hf456 = run_hf456(a, model_dir, sources, max_length, cons_for, torch.get_num_threads()) if a.hf456_python else {}
    all_ok = True
    summary, ct2_summary, hf_step_summary, stop_summary, int8_summary, dtype_summary = [], [], [], [], [], []
    for beam in [int(x) for x in a.beams.split(",")]:
        for bs in [int(x) for x in a.batches.split(",")]:
            run_ours(beam, bs, "none", 0)  # warm-up
            if a.int8:  # (and the int8 twin's one-time weight quantisation, out of the timed rows)
                run_ours(beam, bs, "none", 0, Variant(int8=True))
            for d in in_dtype:
                run_ours(beam, bs, "none", 0, Variant(dtype=d))
            print(f"\nbeam={beam} batch={bs}")
            print(
                f"  {'row':30s} {'sent/s':>9s} {'time/ours-none':>15s} {'time/HF':>8s} {'satisfied':>10s}"
                f" {'neg viol':>8s} {'step/ours-none':>15s}{' time/CT2' if ct2 is not None else ''}"
            )
            checks, runs_sp, runs_step = {}, {}, {}
            for _ in range(a.repeat):  # rows interleaved, then each row's best (or median) of its runs
                for kind, label, n in rows:
                    if kind == "hf":
                        sp, sat, viol = run_hf(beam, bs, dtype_of(label)), None, None
                    elif kind == "ct2":
                        runner = ct2_int8 if label.endswith(INT8) else ct2
                        sp, sat, viol = runner.run(sources, beam, bs, max_length), None, None
                    else:
                        how = Variant(
                            fast_step=False if label.endswith("(HF step)") else None,
                            stop="beam" if label.endswith(STOP_BEAM) else "auto",
                            int8=label.endswith(INT8),
                            dtype=dtype_of(label),
                            stop_check=label.endswith(STOP_CHECK),
                        )
                        sp, sat, viol, per_step = run_ours(beam, bs, kind, n, how)
                        runs_step.setdefault(label, []).append(per_step)
                    runs_sp.setdefault(label, []).append(sp)
                    if sat is not None and kind != "none":
                        all_ok &= sat == len(sources) and viol == 0
                    checks[label] = (sat, viol)
            pick_sp, pick_step = (max, min) if a.stat == "best" else (statistics.median, statistics.median)
            speeds = {k: pick_sp(v) for k, v in runs_sp.items()}
            step_s = {k: pick_step(v) for k, v in runs_step.items()}
            for _kind, label, _n in rows:
                sp, (sat, viol) = speeds[label], checks.get(label, (None, None))
                base = speeds["ours, no constraints"]
                hf = speeds["HF beam search"]
                step = f"{step_s[label] / step_s['ours, no constraints']:15.2f}" if label in step_s else f"{'':15s}"
                vs_ct2 = f"{speeds['CTranslate2 beam search'] / sp:9.2f}" if ct2 is not None else ""
                print(
                    f"  {label:30s} {sp:9.2f} {base / sp:15.2f} {hf / sp:8.2f} "
                    f"{'' if sat is None else f'{sat}/{len(sources)}':>10s} {'' if viol is None else viol:>8} {step}"
                    f"{vs_ct2}"
                )
            for label, sp in speeds.items():
                if label.endswith(STOP_BEAM):
                    stop_summary.append(
                        (
                            beam,
                            bs,
                            label,
                            (
                                speeds["CTranslate2 beam search"] / sp if ct2 is not None else None,
                                speeds[label[: -len(STOP_BEAM) - 1]] / sp,
                            ),
                        )
                    )
            if ct2 is not None:
                same, total, mean_len = ct2.compare(last_none[beam, bs, False, None], sources, beam, bs, max_length)
                print(
                    f"  CTranslate2 best output = ours (no constraints), token for token: {same}/{total}"
                    f" (ours: mean {mean_len:.1f} output tokens)"
                )
                for label, sp in speeds.items():
                    if label.endswith("(HF step)"):
                        hf_step_summary.append(
                            (
                                beam,
                                bs,
                                label,
                                speeds["CTranslate2 beam search"] / sp,
                                speeds[label[: -len(" (HF step)")]] / sp,
                            )
                        )
                ct2_summary.append(
                    (
                        beam,
                        bs,
                        speeds["CTranslate2 beam search"] / speeds["ours, no constraints"],
                        max(
                            speeds["CTranslate2 beam search"] / v
                            for k, v in speeds.items()
                            if k.startswith("ours,") and "no c" not in k and not variant(k)
                        ),
                        same,
                        total,
                    )
                )
            if a.int8:
                ours_same = sum(
                    [o["tokens"] for o in x.outputs[:1]] == [o["tokens"] for o in y.outputs[:1]]
                    for x, y in zip(last_none[beam, bs, False, None], last_none[beam, bs, True, None])
                )
                line = f"  int8 best output = float32's, no constraints: ours {ours_same}/{len(sources)}"
                if ct2_int8 is not None:
                    line += f", CTranslate2 {ct2_int8.same_as(ct2, sources, beam, bs, max_length)}/{len(sources)}"
                print(line)
                none8 = speeds[f"ours, no constraints {INT8}"]
                worst8 = min(
                    v for k, v in speeds.items() if k.endswith(INT8) and k.startswith("ours,") and "no c" not in k
                )
                int8_summary.append(
                    (
                        beam,
                        bs,
                        ct2_speed(speeds, INT8) / none8 if ct2_int8 else None,
                        ct2_speed(speeds, INT8) / worst8 if ct2_int8 else None,
                        ct2_speed(speeds) / none8 if ct2 else None,
                        speeds["ours, no constraints"] / none8,
                    )
                )
            for d in in_dtype:
                same_d = sum(
                    [o["tokens"] for o in x.outputs[:1]] == [o["tokens"] for o in y.outputs[:1]]
                    for x, y in zip(last_none[beam, bs, False, None], last_none[beam, bs, False, d])
                )
                print(f"  {d} best output = {m.dtype}'s, no constraints: ours {same_d}/{len(sources)}")
                dtype_summary.append(
                    (
                        beam,
                        bs,
                        d,
                        speeds["ours, no constraints"] / speeds[f"ours, no constraints ({d})"],
                        max(
                            speeds[f"ours, no constraints ({d})"] / speeds[f"ours, {c} ({d})"]
                            for c in ("C=8 positive", "20 negative phrases")
                        ),
                        speeds["HF beam search"] / speeds[f"HF beam search ({d})"],
                        speeds[f"HF beam search ({d})"] / speeds[f"ours, no constraints ({d})"],
                        same_d,
                    )
                )
            for r in hf456.get((beam, bs), []):  # other process, same model/sentences; own baseline: its first row
                sat, viol = r["satisfied"], r["neg_violations"]
                print(
                    f"  {r['label']:30s} {r['sent_per_s']:9.2f} "
                    f"{speeds['ours, no constraints'] / r['sent_per_s']:15.2f} "
                    f"{speeds['HF beam search'] / r['sent_per_s']:8.2f} "
                    f"{'' if sat is None else f'{sat}/{len(sources)}':>10s} {'' if viol is None else viol:>8}"
                    f"  (x{r['time_over_unconstrained']:.2f} its unconstrained)"
                )
            s = speeds
            summary.append(
                (
                    beam,
                    bs,
                    s["HF beam search"] / s["ours, no constraints"],
                    max(
                        s["ours, no constraints"] / v
                        for k, v in s.items()
                        if k.startswith("ours,") and "no c" not in k and not variant(k)
                    ),
                    s["ours, C=1 positive"] / s["ours, C=8 positive"],
                    max(
                        v / step_s["ours, no constraints"]
                        for k, v in step_s.items()
                        if "no c" not in k and not variant(k)
                    ),
                )
            )
    print("\nsummary (time ratios; targets: ours-none/HF <= 1.2, worst constrained/ours-none <= 1.5, C8/C1 <= 1.25)")
    for beam, bs, r_hf, r_c, r_81, r_step in summary:
        print(
            f"  beam={beam:<3d} batch={bs:<3d} ours-none/HF={r_hf:.2f} constrained/ours-none={r_c:.2f}"
            f" C8/C1={r_81:.2f}"
            f"  (per sentence-step: constrained/ours-none={r_step:.2f})"
        )
    if ct2_summary:
        print("versus CTranslate2 (time ratios; targets: ours-none/CT2 <= 1.5, worst constrained/CT2 <= 2)")
        for beam, bs, r_none, r_worst, same, total in ct2_summary:
            print(
                f"  beam={beam:<3d} batch={bs:<3d} ours-none/CT2={r_none:.2f} worst constrained/CT2={r_worst:.2f}"
                f"  same best output: {same}/{total}"
            )
    if stop_summary:
        print(
            "Positive constraints under stop='beam' (Hugging Face's rule over all K slots) instead of 'auto' "
            "(time ratios)"
        )
        for beam, bs, label, r in stop_summary:
            print(
                f"  beam={beam:<3d} batch={bs:<3d} {label:40s} /CT2={r[0]:.2f} /auto={r[1]:.2f}"
                if r[0] is not None
                else f"  beam={beam:<3d} batch={bs:<3d} {label:40s} /auto={r[1]:.2f}"
            )
    if int8_summary:
        print("Dynamic int8 weights (time ratios; CT2 int8: CTranslate2 with compute_type=int8)")
        f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        for beam, bs, r_none, r_worst, r_f32, r_self in int8_summary:
            print(
                f"  beam={beam:<3d} batch={bs:<3d} ours-none int8/CT2 int8={f(r_none)} "
                f"worst constrained int8/CT2 int8="
                f"{f(r_worst)} ours-none int8/CT2 float32={f(r_f32)} ours-none int8/ours-none float32={r_self:.2f}"
            )
    if dtype_summary:
        print(f"Model dtype against {m.dtype} (time ratios: below 1 = faster than {m.dtype})")
        for beam, bs, d, r_ours, r_cons, r_hf, r_vs_hf, same in dtype_summary:
            print(
                f"  beam={beam:<3d} batch={bs:<3d} {d:8s} ours-none={r_ours:.2f} HF={r_hf:.2f}"
                f"  in {d}: worst constrained/ours-none={r_cons:.2f} ours-none/HF={r_vs_hf:.2f}"
                f"  same best output as {m.dtype}: {same}/{len(sources)}"
            )
    if hf_step_summary:
        print("Hugging Face's decoder step instead of the lean one (time ratios)")
        for beam, bs, label, r_ct2, r_lean in hf_step_summary:
            print(f"  beam={beam:<3d} batch={bs:<3d} {label:40s} /CT2={r_ct2:.2f} /lean step={r_lean:.2f}")
    print(f"all constrained outputs satisfied, 0 negative violations: {all_ok}")
    if hf456:
        print(
            f"HF4.56 rows: transformers {hf456['version']} in {a.hf456_python}, best of {a.hf456_repeat}; "
            "at batch > 1 each batch shares its first sentence's constraints (generate takes one set per call); "
            "checks are whole-word"
        )


STSB_DEV = Path("/work/shared/data/stsb/sts-dev.csv")
STOP_BEAM = "(stop=beam)"
INT8 = "(int8)"
STOP_CHECK = "(stop check)"


def variant(label: str) -> bool:
    """A row decoded another way than the product's default (kept out of the summaries' worst rows)."""
    return (
        label.endswith("(HF step)")
        or label.endswith(STOP_BEAM)
        or label.endswith(INT8)
        or label.endswith(STOP_CHECK)
        or bool(dtype_of(label))
    )


def dtype_of(label: str) -> str | None:
    """The dtype of a row with the model in another dtype ("... (float16)"), None for the others."""
    from generation.decode_options import DTYPES

    return next((d for d in DTYPES if label.endswith(f"({d})")), None)


def ct2_speed(speeds: dict, suffix: str = "") -> float:
    return speeds[f"CTranslate2 beam search {suffix}".strip()]


def stsb_sentences(n: int) -> list[str]:
    """The first ``n`` distinct first sentences of STS-B dev (tab-separated; the sentence is column 6)."""
    out: list[str] = []
    for line in STSB_DEV.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) >= 7 and cols[5].strip() and cols[5].strip() not in out:
            out.append(cols[5].strip())
        if len(out) == n:
            break
    return out


class Ct2Runner:
    """CTranslate2's beam search on a conversion of the same saved model, set up as our decoder is."""

    def __init__(self, translator, tokenizer, suppress, version, compute_type):
        self.tr, self.tok, self.suppress, self.version, self.compute_type = (
            translator,
            tokenizer,
            suppress,
            version,
            compute_type,
        )

    @classmethod
    def build(cls, model_dir, out: Path, m, threads: int, compute_type: str | None = None, convert: bool = True):
        """``compute_type``: default as our decoder runs (float16 on a GPU, else float32); ``convert=False``
        loads the conversion already in ``out``."""
        try:
            import ctranslate2
        except ImportError:
            print("ctranslate2 is not installed (pip install -r requirements-test.txt): no CTranslate2 rows")
            return None
        if convert:
            ctranslate2.converters.TransformersConverter(str(model_dir)).convert(str(out), force=True)
        cuda = m.device.type == "cuda"
        compute_type = compute_type or ("float16" if cuda else "float32")
        tr = ctranslate2.Translator(
            str(out),
            device="cuda" if cuda else "cpu",
            compute_type=compute_type,
            inter_threads=1,
            intra_threads=threads,
        )
        # banned tokens as the generation config bans them, those in CTranslate2's vocabulary (its Marian
        # conversion drops <pad>, which it then never generates)
        vocab_file = next(out.glob("*vocabulary*"))
        known = set(
            json.loads(vocab_file.read_text())
            if vocab_file.suffix == ".json"
            else vocab_file.read_text(encoding="utf-8").splitlines()
        )
        bad = getattr(m.model.generation_config, "bad_words_ids", None) or []
        suppress = [
            toks
            for toks in (m.tokenizer.convert_ids_to_tokens(list(seq)) for seq in bad)
            if all(t in known for t in toks)
        ]
        return cls(tr, m.tokenizer, suppress, ctranslate2.__version__, compute_type)

    def translate(self, sources, beam, bs, max_length):
        toks = [self.tok.convert_ids_to_tokens(ids) for ids in self.tok(sources, truncation=True)["input_ids"]]
        return self.tr.translate_batch(
            toks,
            beam_size=beam,
            max_batch_size=bs,
            max_decoding_length=max_length - 1,
            length_penalty=1.0,
            num_hypotheses=1,
            return_scores=True,
            suppress_sequences=self.suppress or None,
        )

    def run(self, sources, beam, bs, max_length) -> float:
        t = time.perf_counter()
        self.translate(sources, beam, bs, max_length)
        return len(sources) / (time.perf_counter() - t)

    def same_as(self, other: Ct2Runner, sources, beam, bs, max_length) -> int:
        """How many best outputs this runner shares with ``other``'s (token for token)."""
        mine, theirs = (r.translate(sources, beam, bs, max_length) for r in (self, other))
        return sum(x.hypotheses[0] == y.hypotheses[0] for x, y in zip(mine, theirs))

    def compare(self, ours, sources, beam, bs, max_length):
        """How many best outputs (tokens, EOS left out by both) are the same; ours' mean output length."""
        res = self.translate(sources, beam, bs, max_length)
        same = sum(r.hypotheses[0] == o.outputs[0]["tokens"] for r, o in zip(res, ours) if o.outputs)
        mean_len = statistics.mean(len(o.outputs[0]["tokens"]) for o in ours if o.outputs)  # EOS left out
        return same, len(sources), mean_len


def check_graph(m, sources, cons_for, max_length, beams, batches):
    """Decode with the bookkeeping replayed as a CUDA graph and eagerly: outputs and scores must be equal."""
    from generation.decoding import decode
    from generation.decoding.cuda_graphs import GRAPH_FAILURES

    same = total = 0
    for beam in beams:
        for bs in batches:
            for kind, n in (("none", 0), ("pos", 1), ("pos", 8), ("neg", 20)):
                cons = cons_for(kind, n)
                runs = [
                    decode(
                        m,
                        sources[:16],
                        cons[:16],
                        beam=beam,
                        nbest=beam,
                        max_length=max_length,
                        batch_size=bs,
                        cuda_graph=g,
                        shrink=False,
                    )
                    for g in (False, True)
                ]  # (a graph keeps whole batches)
                for e, g in zip(*runs):
                    total += 1
                    same += [(o["text"], o["score"]) for o in e.outputs] == [(o["text"], o["score"]) for o in g.outputs]
    print(
        f"CUDA graph vs eager, every n-best output and score equal: {same}/{total} sentences"
        f"{'' if not GRAPH_FAILURES else '; capture FAILED, eager used: ' + GRAPH_FAILURES[0]}"
    )


def run_hf456(a, model_dir, sources, max_length, cons_for, threads):
    """Run bench/decoding_hf_constrained.py under ``a.hf456_python`` (before our rows, so the runs don't overlap)."""
    import subprocess

    rows = [{"kind": "none", "n": 0, "label": "HF4.56 beam search", "constraints": None}]
    rows += [
        {"kind": "pos", "n": c, "label": f"HF4.56 force_words C={c}", "constraints": cons_for("pos", c)}
        for c in (1, 2, 4, 8)
    ]
    rows += [
        {"kind": "neg", "n": n, "label": f"HF4.56 bad_words {n} phrases", "constraints": cons_for("neg", n)}
        for n in (5, 20)
    ]
    spec = {
        "model": str(model_dir),
        "sources": sources,
        "max_length": max_length,
        "threads": threads,
        "beams": [int(x) for x in a.beams.split(",")],
        "batches": [int(x) for x in a.batches.split(",")],
        "rows": rows,
        "repeat": a.hf456_repeat,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        out = subprocess.run(
            [a.hf456_python, str(ROOT / "bench" / "decoding_hf_constrained.py"), f.name, "--json"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
    finally:
        Path(f.name).unlink()
    data = json.loads(out.strip().splitlines()[-1])
    by = {"version": data["transformers"]}
    for r in data["results"]:
        by.setdefault((r["beam"], r["batch"]), []).append(r)
    return by


if __name__ == "__main__":
    main()
