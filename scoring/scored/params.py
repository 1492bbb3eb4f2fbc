"""The ``score_resource`` job kind's parameters: :class:`ScoreResourceParams` (a ``jobs.params`` class), from
which ``score_resource``'s options, the admin's and the API's batch-size field, a scoring job's stored params and
the worker's reading of them are built. No torch and no models here: a command or a form checks them at once.

Stored flat, as every scoring job has stored them: ``resource`` (id), ``regressor`` (name), ``batch_size``,
``throttle_s``, then the device's ``device``, ``dtype``, ``encode_batch`` and ``cpu_workers``
(``scoring.scored.device``; jobs from before GPU scoring stored none of these and scored on the CPU)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from api.numbers import MAX_INT
from jobs.params import ParamsError, check_bounds, int_at_least, param
from scoring.scored.device import ScoringDevice

DEFAULT_BATCH_SIZE = 256
# pairs per prediction batch on a GPU: a batch of 256 pairs holds too few texts to fill the encoder's 1024
GPU_BATCH_SIZE = 2048
THROTTLE_HELP = "seconds to sleep after each batch (demos and fault drills; default 0)"


def default_batch_size(device: ScoringDevice) -> int:
    """Pairs per prediction batch when none is given: 256 on the CPU, more where a GPU encodes them."""
    return DEFAULT_BATCH_SIZE if device.queue == "cpu" else GPU_BATCH_SIZE


@dataclass(frozen=True)
class ScoreResourceParams:
    """A scoring job's parameters: what is scored by what (``resource``'s id, ``regressor``'s name), in batches
    of ``batch_size`` pairs (None: the device's, :func:`default_batch_size`; a job stores the number), sleeping
    ``throttle_s`` seconds after each batch (a brake for demos and fault drills), with the embeddings on
    ``device``. The numbers are checked when made, a :class:`jobs.params.ParamsError` naming the option."""

    resource: int = field(metadata=param(help="resource id", cli=False, form=False, minimum=1, maximum=MAX_INT))
    regressor: str = field(metadata=param(help="name of a trained regressor (train_regressor)", form=False))
    batch_size: int | None = field(
        default=None,
        metadata=param(
            help=f"pairs per prediction batch (default {DEFAULT_BATCH_SIZE} on the CPU, {GPU_BATCH_SIZE} for cuda "
            "and auto)",
            minimum=1,
            maximum=100_000,
        ),
    )
    throttle_s: float = field(
        default=0.0,
        # the command's option is --throttle (score_resource), not the --throttle-s this would make
        # (a brake of over a minute a batch holds a worker, it does not throttle one)
        metadata=param(help=THROTTLE_HELP, cli=False, form=False, minimum=0, maximum=60),
    )
    device: ScoringDevice = field(default_factory=ScoringDevice, metadata=param(flatten=True))

    def __post_init__(self) -> None:
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", int_at_least("batch_size", self.batch_size, 1))
        throttle = self.throttle_s
        if isinstance(throttle, bool) or not isinstance(throttle, (int, float)) or not 0 <= throttle < math.inf:
            raise ParamsError(  # (NaN fails the comparison too)
                f"throttle_s must be a finite number >= 0, not {throttle!r}",
                f"--throttle must be a finite number >= 0, not {throttle!r}",
            )
        object.__setattr__(self, "throttle_s", float(throttle))
        check_bounds(self)

    @property
    def prediction_batch(self) -> int:
        """Pairs per prediction batch: ``batch_size``, else the device's."""
        return self.batch_size or default_batch_size(self.device)
