"""Where a scoring job computes its sentence embeddings: :class:`ScoringDevice`, the job's choice, and the
encoder placement a worker turns it into.

The choice is made when the job starts (``score_resource --device``, the admin's and the API's ``device``, else
``PARAFORGE_SCORING_DEVICE``) and travels in the job's params, so the job's chunks go to the queue it names
(``cpu``, or ``gpu`` for ``cuda`` and ``auto``) and a resumed or re-queued chunk runs where the job asked.

* ``cpu`` (the default): the ``cpu`` queue, the encoder in float32 on the CPU: the scores of every scoring
  before GPU scoring, byte for byte.
* ``cuda``: the ``gpu`` queue, the encoder in float16 (``dtype``) on the worker's GPU, ``encode_batch`` texts per
  forward pass (1024 unless given). Pooling, normalisation, cosines and the token alignment stay float32; the
  scores differ from the CPU's within the tolerance docs/performance.md states (tests/scoring/test_scoring_gpu.py
  measures it on the CPU's float16).
* ``auto``: the ``gpu`` queue; the GPU when the worker that takes the chunk has one, else the CPU in float32,
  with a warning in the worker's log and the chunk's ``encoded_on``.

``cpu_workers``: how many processes compute a chunk's lexical features (``lexical_processes.cpu_workers_on``), so that a
GPU's rate follows the host cores given to it rather than one core's. None (the default): the worker's own
``PARAFORGE_SCORING_CPU_WORKERS`` for a chunk encoded on a GPU (the cores are the worker host's, which the
process that starts the job does not know) and 1 for a chunk encoded on the CPU, where the encoder takes nearly
all the time and more processes would only take cores from the other chunks. Any number gives the same scores.

No torch here, and of Django only its forms (``jobs.params``): a form or a command checks a device without
loading torch. :class:`ScoringDevice` is a ``jobs.params`` class, flattened into the scoring job's parameters
(``scoring.scored.params.ScoreResourceParams``): its fields are ``score_resource``'s options and keys of the job's
params, at the top level.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from jobs.params import ParamsError, check_bounds, param
from scoring.similarity.embeddings import CPU_FLOAT32, EncoderPlacement

logger = logging.getLogger(__name__)

DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("float32", "float16", "bfloat16")
HALF_DTYPES = ("float16", "bfloat16")
DEFAULT_CUDA_DTYPE = "float16"
DEFAULT_CUDA_ENCODE_BATCH = 1024  # texts per forward pass on a GPU; the CPU keeps its 64
DEVICE_HELP = (
    "where the sentence embeddings run: cpu (cpu queue, float32), cuda (gpu queue, float16 on the worker's GPU; "
    "a worker without one fails the chunk) or auto (gpu queue; the GPU if the worker has one, else its CPU in "
    "float32, logged); default: PARAFORGE_SCORING_DEVICE"
)
DTYPE_HELP = "the encoder's floating-point type on a GPU: float16 (default), bfloat16 or float32; the CPU is float32"
ENCODE_BATCH_HELP = f"texts per forward pass of the encoder on a GPU (default {DEFAULT_CUDA_ENCODE_BATCH})"


class ScoringDeviceError(ParamsError):
    """A device choice that cannot work: an unknown device or dtype, half precision on the CPU, or ``cuda`` on a
    worker without CUDA."""


@dataclass(frozen=True)
class ScoringDevice:
    """A scoring job's device: ``device`` (cpu, cuda or auto), ``dtype`` (None: float16 on a GPU; the CPU
    computes in float32 only), ``encode_batch`` (texts per forward pass on a GPU; None: 1024) and ``cpu_workers``
    (processes for the lexical features; None: the worker's choice, module docstring). Checked when made. A job
    started before these options existed stored none of them: it scored on the CPU, the default."""

    device: str = field(default="cpu", metadata=param(help=DEVICE_HELP, choices=DEVICES))
    dtype: str | None = field(default=None, metadata=param(help=DTYPE_HELP, choices=DTYPES))
    encode_batch: int | None = field(default=None, metadata=param(help=ENCODE_BATCH_HELP, minimum=1, maximum=65_536))
    cpu_workers: int | None = field(
        default=None,
        # a caller's (score_resource_launch's device), not offered by the command or the forms
        metadata=param(
            help="processes computing a chunk's lexical features", cli=False, form=False, minimum=1, maximum=256
        ),
    )

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ScoringDeviceError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        object.__setattr__(self, "dtype", self.dtype or None)
        if self.dtype not in (None, *DTYPES):
            raise ScoringDeviceError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.device == "cpu" and self.dtype in HALF_DTYPES:
            raise ScoringDeviceError(
                f"dtype {self.dtype} needs a GPU: on the CPU scoring computes in float32, the scores of every "
                "scoring before (give device cuda or auto, or leave dtype out)"
            )
        if self.encode_batch is not None:
            if isinstance(self.encode_batch, bool) or not isinstance(self.encode_batch, int) or self.encode_batch < 1:
                raise ScoringDeviceError(f"encode_batch must be a whole number >= 1, not {self.encode_batch!r}")
            if self.device == "cpu":
                raise ScoringDeviceError(
                    "encode_batch applies on a GPU only (the CPU keeps its batches, and so its exact scores)"
                )
        if self.cpu_workers is not None and not is_count(self.cpu_workers):
            raise ScoringDeviceError(f"cpu_workers must be a whole number >= 1, not {self.cpu_workers!r}")
        check_bounds(self, error=ScoringDeviceError)

    @property
    def queue(self) -> str:
        """The queue of the job's chunks: ``gpu`` when it asks for a GPU (cuda, auto), else ``cpu``."""
        return "cpu" if self.device == "cpu" else "gpu"

    def placement(self, *, cuda_available: bool) -> EncoderPlacement:
        """Where the encoder runs on a worker that has (``cuda_available``) a GPU or not.

        ``cuda`` on a worker without one is an error, not a quiet fallback: the researcher asked for the GPU's
        throughput, a chunk that crawled on a GPU worker's few cores would look hung (about 100 pairs/s/core
        instead of thousands), and its scores would come from other arithmetic than the job says. The failed
        chunk resumes (``manage.py job resume``) once a worker with a GPU takes the ``gpu`` queue. ``auto`` says
        "either will do", so there the CPU in float32 is the fallback, logged as a warning."""
        if self.device == "cpu":
            return CPU_FLOAT32
        if cuda_available:
            return EncoderPlacement(
                device="cuda",
                dtype=self.dtype or DEFAULT_CUDA_DTYPE,
                batch_size=self.encode_batch or DEFAULT_CUDA_ENCODE_BATCH,
            )
        if self.device == "cuda":
            raise ScoringDeviceError(
                "scoring on device 'cuda' was asked for but this worker has no CUDA device (torch.cuda.is_available() "
                "is false): run a gpu-queue worker on a machine with a GPU and resume the job, or score with "
                "--device cpu (or auto, which falls back to the CPU)"
            )
        logger.warning("scoring device 'auto': this worker has no CUDA device; encoding on the CPU in float32")
        return CPU_FLOAT32

    def chunk_cpu_workers(self, placement: EncoderPlacement, *, worker_default: int) -> int:
        """The processes that compute a chunk's lexical features on a worker whose
        ``PARAFORGE_SCORING_CPU_WORKERS`` is ``worker_default``, the encoder on ``placement``: the job's
        ``cpu_workers`` when it gave one, else ``worker_default`` on a GPU and 1 on the CPU (module docstring)."""
        if self.cpu_workers is not None:
            return self.cpu_workers
        if placement.device == "cpu":
            return 1
        if not is_count(worker_default):
            raise ScoringDeviceError(
                f"PARAFORGE_SCORING_CPU_WORKERS must be a whole number >= 1, not {worker_default!r}"
            )
        return worker_default


def is_count(value: object) -> bool:
    """A whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def encoded_on(placement: EncoderPlacement) -> str:
    """How a chunk's result names where it was encoded: ``cpu/float32``, ``cuda/float16``."""
    return f"{placement.device}/{placement.dtype}"
