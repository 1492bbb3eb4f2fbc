"""A diverse generation job's peak memory and time, estimated from its settings, its models and its corpus before
it is queued.

Why: every number of the diverse mode is bounded (``generation.decode_options``), but their product is what a
worker holds: each input is decoded as ``negative_sets x samples`` rows at once, ``batch_size`` inputs together,
each row keeping its attention cache of up to ``max_length`` tokens and a step's logits over the vocabulary. 50
sets x 500 samples are each within bounds, yet together ask for more memory than the machine has (issue 46: the
worker went to 20 GB of 23 in two minutes). :func:`diverse_memory_error` refuses such a job when it is asked for,
above ``PARAFORGE_DIVERSE_MEMORY_GIB``, with the estimate and what to lower.

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

from ..decode_options import DiverseOptions
from ..model_source import adapter_base_folder, is_adapter_folder

GIB = 1024**3
HOUR_S = 3600.0
FLOAT_BYTES = 4
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")
CPU_BATCH = 1  # the sampler's inputs per batch when a job gives none (generation.decoding.diverse: 1 on the CPU)


def model_shape(folder: Path) -> tuple[int, int, int, int]:
    """``(weight bytes, decoder layers, width, vocabulary)`` of a Hugging Face model folder (config.json); of an
    adapter folder (``train_rewriter --lora-rank``), its base's with the adapter's weights added (it is decoded
    merged into the base)."""
    weights = sum(f.stat().st_size for pattern in WEIGHT_FILES for f in folder.glob(pattern) if f.is_file())
    if is_adapter_folder(folder):
        base_weights, layers, width, vocab = model_shape(adapter_base_folder(folder))
        return base_weights + weights, layers, width, vocab
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers = config.get("decoder_layers") or config.get("num_decoder_layers") or config.get("num_hidden_layers") or 1
    width = config.get("d_model") or config.get("hidden_size") or 1
    vocab = config.get("vocab_size") or 1
    return weights, int(layers), int(width), int(vocab)


def diverse_peak_bytes(options: DiverseOptions, model: Path, backward: Path | None = None) -> int:
    """The estimated peak memory of decoding one batch of the diverse mode with these models (module docstring)."""
    weights, layers, width, vocab = model_shape(model)
    if backward is not None:
        weights += model_shape(backward)[0]
    per_row = FLOAT_BYTES * (4 * layers * options.max_length * width + vocab)
    return weights + per_row * options.rows * (options.batch_size or CPU_BATCH)


def diverse_memory_error(options: DiverseOptions, model: Path, backward: Path | None, budget_gib: float) -> str | None:
    """Why a diverse job would not fit the worker's memory budget, or None when it fits."""
    peak = diverse_peak_bytes(options, model, backward)
    if peak <= budget_gib * GIB:
        return None
    return (
        f"--diverse with {options.negative_sets} negative sets x {options.samples} samples "
        f"({options.rows} rows per input), batch size {options.batch_size or CPU_BATCH} and max length "
        f"{options.max_length} needs an estimated {peak / GIB:.1f} GiB, above the workers' budget of "
        f"{budget_gib:g} GiB (PARAFORGE_DIVERSE_MEMORY_GIB): lower --negative-sets, --samples, --batch-size "
        "or --max-length"
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
