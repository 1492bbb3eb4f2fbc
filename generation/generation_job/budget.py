"""A generation job's peak memory (either mode) and a diverse job's time, estimated from its settings, its models
and its corpus before it is queued.

Why: every number of the diverse mode is bounded (``generation.decode_options``), but their product is what a
worker holds: each input is decoded as ``negative_sets x samples`` rows at once, ``batch_size`` inputs together,
each row keeping its attention cache of up to ``max_length`` tokens and a step's logits over the vocabulary. 50
sets x 500 samples are each within bounds, yet together ask for more memory than the machine has (issue 46: the
worker went to 20 GB of 23 in two minutes). :func:`diverse_memory_error` refuses such a job when it is asked for,
above ``PARAFORGE_JOB_MEMORY_GIB``, with the estimate and what to lower.

Beam search likewise (:func:`beam_memory_error`): a beam of 100, 4,096 sentences a batch and 1,024 tokens are each
within bounds, but a batch of them holds 409,600 hypotheses' caches and logits. Its estimate is the decoder's own
rule for a GPU batch (``generation.batch_memory.sentence_bytes``: each sentence's key/value cache over three times
``max_length`` and eight copies of a step's logits, for ``beam`` hypotheses) times ``batch_size`` (32 when unset,
the CPU's batch; a GPU worker sizes an unset batch from its free memory itself), plus the models' weights.

The estimate is an upper bound, deliberately simple: the models' weight files as they lie on disk, plus for each
row the decoder's self- and cross-attention keys and values at full ``max_length`` (4 x layers x max_length x
width float32 numbers) and one step's float32 logits. Real sentences stop earlier, so the real peak is lower.

Time likewise (:func:`diverse_time_error`, above ``PARAFORGE_DIVERSE_HOURS``): every reference decodes ``rows``
samples of up to ``max_length`` steps, each step about ``2 x parameters`` floating-point operations per row
(parameters: the weight files' bytes / 4), at ``PARAFORGE_DIVERSE_FLOPS`` operations per second. The default,
4e10, is what the demo model's diverse mode reached on this project's 2-core CPU (bench/diversity.py: 24
references x 150 rows in 18.5 s, about 15 steps a row); a GPU worker's is higher and is set there. At full
``max_length`` this too is an upper bound: a refused job would have run for at least a share of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from .. import batch_memory
from ..decode_options import DecodeOptions, DiverseOptions
from ..model_source import adapter_base_folder, is_adapter_folder

GIB = 1024**3
HOUR_S = 3600.0
FLOAT_BYTES = 4
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


def model_shape(folder: Path) -> tuple[int, int, int, int]:
    """``(weight bytes, decoder layers, key/value width, vocabulary)`` of a Hugging Face model folder (config.json,
    read by the decoder's own rule, ``batch_memory.config_sizes``); of an adapter folder (``train_rewriter
    --lora-rank``), its base's with the adapter's weights added (it is decoded merged into the base)."""
    weights = sum(f.stat().st_size for pattern in WEIGHT_FILES for f in folder.glob(pattern) if f.is_file())
    if is_adapter_folder(folder):
        base_weights, layers, width, vocab = model_shape(adapter_base_folder(folder))
        return base_weights + weights, layers, width, vocab
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, width = batch_memory.config_sizes(SimpleNamespace(**config))
    return weights, layers, width, int(config.get("vocab_size") or 1)


def backward_weight_bytes(model: Path, backward: Path | None) -> int:
    """The weights a backward model adds to a job's worker (both local folders, ``model_source.model_folder``'s):
    none when there is none or it is the model's folder (then the model is read the other way, loaded once:
    ``pipeline.job_backward``)."""
    if backward is None or backward.resolve() == model.resolve():
        return 0
    return model_shape(backward)[0]


def diverse_peak_bytes(options: DiverseOptions, model: Path, backward: Path | None = None) -> int:
    """The estimated peak memory of decoding one batch of the diverse mode with these models (module docstring)."""
    weights, layers, width, vocab = model_shape(model)
    per_row = FLOAT_BYTES * (4 * layers * options.max_length * width + vocab)
    return weights + backward_weight_bytes(model, backward) + per_row * options.rows * options.inputs_per_batch("cpu")


def diverse_memory_error(options: DiverseOptions, model: Path, backward: Path | None, budget_gib: float) -> str | None:
    """Why a diverse job would not fit the worker's memory budget, or None when it fits."""
    asked = (
        f"--diverse with {options.negative_sets} negative sets x {options.samples} samples "
        f"({options.rows} rows per input), batch size {options.inputs_per_batch('cpu')} and max length "
        f"{options.max_length}"
    )
    lower = "--negative-sets, --samples, --batch-size or --max-length"
    return over_budget(diverse_peak_bytes(options, model, backward), budget_gib, asked, lower)


def over_budget(peak: int, budget_gib: float, asked: str, lower: str) -> str | None:
    """The refusal of a job whose estimated ``peak`` bytes are above ``budget_gib`` (what was ``asked`` for,
    what to ``lower``), or None when it fits."""
    if peak <= budget_gib * GIB:
        return None
    return (
        f"{asked} needs an estimated {peak / GIB:.1f} GiB, above the workers' budget of {budget_gib:g} GiB "
        f"(PARAFORGE_JOB_MEMORY_GIB): lower {lower}"
    )


def beam_peak_bytes(options: DecodeOptions, model: Path, backward: Path | None = None) -> int:
    """The estimated peak memory of one beam search batch with these models (module docstring)."""
    weights, layers, width, vocab = model_shape(model)
    per_sentence = batch_memory.sentence_bytes(
        layers=layers, width=width, vocab=vocab, beam=options.beam, max_length=options.max_length, value_bytes=4
    )
    return (
        weights + backward_weight_bytes(model, backward) + per_sentence * (options.batch_size or batch_memory.CPU_BATCH)
    )


def beam_memory_error(options: DecodeOptions, model: Path, backward: Path | None, budget_gib: float) -> str | None:
    """Why a beam search job would not fit the worker's memory budget, or None when it fits."""
    asked = (
        f"a beam of {options.beam}, batch size {options.batch_size or batch_memory.CPU_BATCH} and max length "
        f"{options.max_length}"
    )
    return over_budget(
        beam_peak_bytes(options, model, backward), budget_gib, asked, "--batch-size, --beam or --max-length"
    )


def diverse_seconds(
    options: DiverseOptions, model: Path, backward: Path | None, references: int, flops: float
) -> float:
    """The estimated decoding time of a diverse job over ``references`` inputs, an upper bound (module docstring)."""
    weights = model_shape(model)[0] + (model_shape(backward)[0] if backward is not None else 0)
    parameters = weights / FLOAT_BYTES
    return references * options.rows * options.max_length * 2.0 * parameters / flops


def diverse_time_error(
    options: DiverseOptions, model: Path, backward: Path | None, references: int, *, flops: float, budget_hours: float
) -> str | None:
    """Why a diverse job would run longer than the workers' time budget, or None when it fits."""
    seconds = diverse_seconds(options, model, backward, references, flops)
    if seconds <= budget_hours * HOUR_S:
        return None
    return (
        f"--diverse over {references} references with {options.rows} rows per input and max length "
        f"{options.max_length} needs up to an estimated {seconds / HOUR_S:,.0f} hours at {flops:.3g} operations/s "
        f"(PARAFORGE_DIVERSE_FLOPS), above the workers' budget of {budget_hours:g} hours (PARAFORGE_DIVERSE_HOURS): "
        "lower --negative-sets, --samples or --max-length, or generate from a smaller corpus"
    )
