"""A diverse generation job's peak memory, estimated from its settings and its models before it is queued.

Why: every number of the diverse mode is bounded (``generation.decode_options``), but their product is what a
worker holds: each input is decoded as ``negative_sets x samples`` rows at once, ``batch_size`` inputs together,
each row keeping its attention cache of up to ``max_length`` tokens and a step's logits over the vocabulary. 50
sets x 500 samples are each within bounds, yet together ask for more memory than the machine has (issue 46: the
worker went to 20 GB of 23 in two minutes). :func:`diverse_memory_error` refuses such a job when it is asked for,
above ``PARAFORGE_DIVERSE_MEMORY_GIB``, with the estimate and what to lower.

The estimate is an upper bound, deliberately simple: the models' weight files as they lie on disk, plus for each
row the decoder's self- and cross-attention keys and values at full ``max_length`` (4 x layers x max_length x
width float32 numbers) and one step's float32 logits. Real sentences stop earlier, so the real peak is lower.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..decode_options import DiverseOptions

GIB = 1024**3
FLOAT_BYTES = 4
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")
CPU_BATCH = 1  # the sampler's inputs per batch when a job gives none (generation.decoding.diverse: 1 on the CPU)


def model_shape(folder: Path) -> tuple[int, int, int, int]:
    """``(weight bytes, decoder layers, width, vocabulary)`` of a Hugging Face model folder (config.json)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers = config.get("decoder_layers") or config.get("num_decoder_layers") or config.get("num_hidden_layers") or 1
    width = config.get("d_model") or config.get("hidden_size") or 1
    vocab = config.get("vocab_size") or 1
    weights = sum(f.stat().st_size for pattern in WEIGHT_FILES for f in folder.glob(pattern) if f.is_file())
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
