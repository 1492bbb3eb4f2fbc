"""How many sentences to decode together when nobody says (``DecodeOptions.batch_size`` None).

On the CPU: 32, the batch the decoder and the generation job have always used there (and the one the CPU
benches in bench/results/ measure).

On a GPU the rate keeps growing with the batch up to hundreds of sentences (issue 31's H200 table: 227
sentences/s at 32, 1,592 at 512 for Hugging Face's search), so the batch is taken from the memory the
process can still use (``torch.cuda.mem_get_info``'s free memory plus what torch's allocator holds unused):

    batch = the largest power of two <= MEMORY_SHARE x free / sentence_bytes, between 1 and CUDA_CAP

``sentence_bytes`` (``generation.batch_memory``, which the jobs' memory budget reads too) is an upper estimate of
what one sentence costs while it decodes: its key/value cache (``2 x layers x width`` values per token and
hypothesis over ``3 x max_length`` tokens: the self-attention cache up to ``max_length``, its copy while beams
reorder, the cross-attention over a source taken as long as ``max_length``) and ``LOGIT_COPIES`` float32 [beam,
vocabulary] arrays of one step (logits, log-softmax, processors, the candidates' sums). Half the free memory is left
for the encoder's activations, the allocator's fragmentation and other processes. The cap: beyond 512 the table
above shows returns diminishing, a chunk's window (512 references) holds a few thousand distinct inputs, and a batch
waits for its slowest sentence."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..batch_memory import CPU_BATCH, config_sizes, sentence_bytes
from ..decode_options import DecodeOptions

CUDA_CAP = 512
MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class BatchChoice:
    """A batch size and the rule's figures that gave it (stated in a generation job's result)."""

    size: int
    rule: str


def batch_for_free_memory(free_bytes: int, per_sentence: int, cap: int = CUDA_CAP) -> int:
    """The largest power of two <= ``MEMORY_SHARE`` x ``free_bytes`` / ``per_sentence``, in [1, ``cap``]."""
    fits = int(free_bytes * MEMORY_SHARE) // max(1, per_sentence)
    if fits < 1:
        return 1
    return min(cap, 1 << (fits.bit_length() - 1))


def model_sizes(model) -> tuple[int, int]:
    """(decoder layers, key/value width) of a loaded model (:func:`config_sizes` of its config)."""
    return config_sizes(model.config)


def cuda_free_bytes(device: torch.device) -> int:
    """Memory this process can still use on ``device``: the device's free memory plus what torch's caching
    allocator reserved and holds unused (after a batch it keeps its blocks: they are free for the next)."""
    free, _total = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def default_batch_size(loaded, options: DecodeOptions, free_bytes: int | None = None) -> BatchChoice:
    """The batch for ``loaded`` under ``options`` (the module's rule). ``free_bytes``: the GPU's usable
    memory, measured when None (a test gives it)."""
    if loaded.device.type != "cuda":
        return BatchChoice(CPU_BATCH, f"cpu: {CPU_BATCH}")
    layers, width = model_sizes(loaded.model)
    per = sentence_bytes(
        layers=layers,
        width=width,
        vocab=loaded.vocab.size,
        beam=options.beam,
        max_length=options.max_length,
        value_bytes=next(loaded.model.parameters()).element_size(),
    )
    free = cuda_free_bytes(loaded.device) if free_bytes is None else free_bytes
    size = batch_for_free_memory(free, per)
    return BatchChoice(
        size,
        f"cuda: {MEMORY_SHARE} x {free / 2**30:.1f} GiB free / {per / 2**20:.1f} MiB a sentence -> {size}"
        f" (a power of two, at most {CUDA_CAP})",
    )
