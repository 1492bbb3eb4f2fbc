"""The decoder's options in one place: :class:`DecodeOptions`, checked once, where it is made.

``paraphrase`` and ``generate`` build one from their command-line options, a generation job from its params,
and it travels unchanged to ``decode`` and ``BeamSearch``. This module imports neither torch nor Django, so
that settings checks (a job's params, a web form) need not load the decoder.

A field's name is its command-line option's (``batch_size`` is ``--batch-size``) and its job param's: an
error names it the way the caller's user wrote it (:attr:`DecodeOptionsError.option_message` for commands).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.numbers import cli_float, cli_int

from .beam_sizes import STOP_DEFAULT, STOP_HELP, STOP_RULES, beam_nbest_error, stop_rule_error

DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float16", "bfloat16")
HALF_DTYPES = ("float16", "bfloat16")
# What None means: float16 on a GPU (what the decoder has always run there), float32 on the CPU
DEFAULT_CUDA_DTYPE = "float16"
DTYPE_HELP = (
    "the model's floating-point type on a GPU: float16 (default there), bfloat16 or float32; "
    "the CPU computes in float32 only"
)
BATCH_HELP = "sentences decoded together (default: follows the device: 32 on the CPU, from the free memory on a GPU)"


class DecodeOptionsError(ValueError):
    """A decoding option that cannot work. ``str()`` names fields as job params and ``decode`` keywords do
    (``batch_size``), :attr:`option_message` as the commands' options (``--batch-size``)."""

    def __init__(self, message: str, option_message: str | None = None) -> None:
        super().__init__(message)
        self.option_message = option_message or message


def option_flag(field: str) -> str:
    """``batch_size`` -> ``--batch-size``: a field's command-line option."""
    return "--" + field.replace("_", "-")


def _fail(template: str, *fields: str, **values: Any) -> DecodeOptionsError:
    """``template`` with ``{0}``, ``{1}`` ... standing for the fields' names, said both ways."""
    return DecodeOptionsError(
        template.format(*fields, **values), template.format(*(option_flag(f) for f in fields), **values)
    )


def _int(field: str, value: Any, minimum: int, why: str = "") -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise _fail("{0} must be an integer, not {value!r}", field, value=value) from None
    if n < minimum:
        raise _fail("{0} must be at least {minimum}, not {n}" + why, field, minimum=minimum, n=n)
    return n


def _finite(field: str, value: Any) -> float:
    """A float that JSON (a job's params) can hold: NaN and infinities are refused."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _fail("{0} must be a number, not {value!r}", field, value=value) from None
    if not math.isfinite(x):
        raise _fail("{0} must be a finite number, not {value!r}", field, value=value)
    return x


def _flag(field: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _fail("{0} must be true, false or unset, not {value!r}", field, value=value)


def dtype_device_error(dtype: str | None, device_type: str) -> DecodeOptionsError | None:
    """The one rule of dtype and device: half precision (float16, bfloat16) runs on a GPU only. Why: the
    CPU path (its lean step's oneDNN and int8 products, the block-maxima top-k) is built and measured for
    float32, and torch's CPU half-precision products are slower than float32's, not faster."""
    if dtype in HALF_DTYPES and device_type != "cuda":
        return _fail(
            "{0} {dtype} needs a CUDA device: on the CPU the decoder computes in float32 (leave {0} out, "
            "or give {0} float32)",
            "dtype",
            dtype=dtype,
        )
    return None


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode: search, stopping, batching, device and arithmetic. Checked when made (a
    :class:`DecodeOptionsError` names what is wrong); :meth:`on_device` checks it again against the device
    the model is on. ``None`` means "as the device has it": ``batch_size`` (see
    ``generation.decoding.batching``), ``device`` (CUDA where there is one), ``dtype`` (float16 on a GPU,
    float32 on the CPU), ``cuda_graph``, ``shrink`` and ``fast_step`` (``generation.decoding.dba.beam_search``).

    ``stop``: when a sentence's search ends (``generation.beam_sizes``); ``max_length`` counts the decoder
    start token, as in ``transformers``; ``int8``: the lean step's products on dynamic int8 weights (CPU,
    Marian and BART); ``rerank_dissimilar``: order each n-best list by word edit distance to the reference."""

    beam: int = 5
    nbest: int = 1
    stop: str = STOP_DEFAULT
    max_length: int = 128
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    batch_size: int | None = None
    device: str | None = None
    dtype: str | None = None
    int8: bool = False
    rerank_dissimilar: bool = False
    cuda_graph: bool | None = None
    shrink: bool | None = None
    fast_step: bool | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("beam", _int("beam", self.beam, 1))
        put("nbest", _int("nbest", self.nbest, 1))
        problem = beam_nbest_error(self.beam, self.nbest)
        if problem:
            raise DecodeOptionsError(problem, f"{problem} (need 1 <= --nbest <= --beam)")
        problem = stop_rule_error(self.stop)
        if problem:
            raise DecodeOptionsError(problem)
        put("max_length", _int("max_length", self.max_length, 2, " (it counts the decoder start token)"))
        put("length_penalty", _finite("length_penalty", self.length_penalty))
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise _fail(
                "{0} must be true, false or 'never', not {value!r}", "early_stopping", value=self.early_stopping
            )
        if self.batch_size is not None:
            put("batch_size", _int("batch_size", self.batch_size, 1))
        put("device", self.device or None)
        if self.device not in (None, *DEVICES):
            raise _fail("{0} must be cpu or cuda, not {value!r}", "device", value=self.device)
        put("dtype", self.dtype or None)
        if self.dtype not in (None, *DTYPES):
            raise _fail("{0} must be one of {names}, not {value!r}", "dtype", names=", ".join(DTYPES), value=self.dtype)
        for name in ("int8", "rerank_dissimilar"):
            put(name, bool(_flag(name, getattr(self, name))))
        for name in ("cuda_graph", "shrink", "fast_step"):
            _flag(name, getattr(self, name))
        if self.int8 and self.device == "cuda":
            raise _fail("{0} runs on the CPU only (give {1} cpu or leave {1} out)", "int8", "device")
        if self.int8 and self.dtype in HALF_DTYPES:
            raise _fail("{0} runs on float32 weights only (leave {1} out)", "int8", "dtype")
        if self.device is not None:
            problem = dtype_device_error(self.dtype, self.device)
            if problem:
                raise problem
        if self.cuda_graph and self.shrink:
            raise DecodeOptionsError("shrink and cuda_graph exclude each other (a graph replays fixed shapes)")

    @property
    def model_device(self) -> str | None:
        """The device to load the model on: the CPU for int8, else ``device`` (None: CUDA where there is one)."""
        return "cpu" if self.int8 else self.device

    def on_device(self, device_type: str) -> DecodeOptions:
        """These options for a model on ``device_type`` ("cpu" or "cuda"), checked again (half precision
        needs a GPU, int8 the CPU). A ``device`` other than the model's is an error."""
        if self.device is not None and self.device != device_type:
            raise DecodeOptionsError(f"the options ask for device {self.device!r}, the model is on {device_type!r}")
        return self if self.device == device_type else dataclasses.replace(self, device=device_type)

    def replace(self, **changes: Any) -> DecodeOptions:
        """A copy with ``changes`` (field names; an unknown one is a TypeError), checked again."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> DecodeOptions:
        """Options from a mapping that holds them among other things under their field names: a command's
        parsed options, a job's params. Absent or None values keep the defaults."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})

    def job_params(self) -> dict[str, Any]:
        """The decoding part of a generation job's params (the names jobs have always stored)."""
        return {
            "beam": self.beam,
            "nbest": self.nbest,
            "stop": self.stop,
            "max_length": self.max_length,
            "length_penalty": self.length_penalty,
            "batch_size": self.batch_size,
            "device": self.device,
            "dtype": self.dtype,
        }


def add_arguments(parser, *, device_help: str | None = None) -> None:
    """The decoding options ``paraphrase`` and ``generate`` share, named as :class:`DecodeOptions`' fields
    (``--batch-size`` is ``batch_size``: :meth:`DecodeOptions.from_values` reads the parsed options)."""
    parser.add_argument("--beam", type=cli_int, default=5)
    parser.add_argument("--nbest", type=cli_int, default=1)
    parser.add_argument("--stop", choices=STOP_RULES, default=STOP_DEFAULT, help=STOP_HELP)
    parser.add_argument(
        "--max-length",
        type=cli_int,
        default=128,
        help="maximum output length in subword tokens, decoder start token included",
    )
    parser.add_argument("--length-penalty", type=cli_float, default=1.0)
    parser.add_argument("--batch-size", type=cli_int, default=None, help=BATCH_HELP)
    parser.add_argument("--device", choices=DEVICES, default=None, help=device_help)
    parser.add_argument("--dtype", choices=DTYPES, default=None, help=DTYPE_HELP)


DISCOURAGE_HELP = (
    "--diverse: instead of banning each sample's negative words outright, lower the log-probability of the "
    "tokens that would complete one by PENALTY (a banned word may then appear)"
)


@dataclass(frozen=True)
class DiverseOptions:
    """ParaBank 2's diverse mode (Hu et al., CoNLL 2019, sections 2-3), every number in one value:
    ``negative_sets`` random sets of the reference's words (``ban_fraction`` of its distinct words each,
    at least one; its function words only with ``ban_function_words``), ``samples`` top-``top_k``
    samples at ``temperature`` under each set; a set's words (and their casing variants) are banned
    exactly, or, with ``discourage``, their completing tokens lose that much log-probability. Candidates
    with a word that is no English word and not the reference's are dropped unless ``allow_non_words``;
    those whose score (forward NLL per token, plus the backward model's when one is given) exceeds ``max_nll``
    are dropped; the rest are clustered into ``clusters`` k-medoids clusters (one pinned on the
    reference) and the best of each other cluster kept, ``keep`` at most. ``seed``: the same seed and
    device give the same outputs. ``batch_size``: inputs decoded together (each is ``negative_sets x
    samples`` rows; None: 1 on the CPU, 8 on a GPU). ``max_length`` counts the decoder start token, as in
    :class:`DecodeOptions`."""

    negative_sets: int = 5
    samples: int = 30
    top_k: int = 10
    temperature: float = 1.0
    ban_fraction: float = 0.3
    ban_function_words: bool = False
    allow_non_words: bool = False
    discourage: float | None = None
    clusters: int = 8
    keep: int = 5
    max_nll: float = 3.5
    seed: int = 0
    max_length: int = 128
    batch_size: int | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("negative_sets", "samples", "top_k", "keep"):
            put(name, _int(name, getattr(self, name), 1))
        put("clusters", _int("clusters", self.clusters, 2, " (one cluster is pinned on the reference)"))
        put("seed", _int("seed", self.seed, 0))
        put("max_length", _int("max_length", self.max_length, 2, " (it counts the decoder start token)"))
        if self.batch_size is not None:
            put("batch_size", _int("batch_size", self.batch_size, 1))
        put("temperature", _finite("temperature", self.temperature))
        if self.temperature <= 0:
            raise _fail("{0} must be above 0, not {value!r}", "temperature", value=self.temperature)
        put("ban_fraction", _finite("ban_fraction", self.ban_fraction))
        if not 0.0 <= self.ban_fraction <= 1.0:
            raise _fail("{0} must be between 0 and 1, not {value!r}", "ban_fraction", value=self.ban_fraction)
        for name in ("ban_function_words", "allow_non_words"):
            put(name, bool(_flag(name, getattr(self, name))))
        put("max_nll", _finite("max_nll", self.max_nll))
        if self.max_nll <= 0:
            raise _fail("{0} must be above 0, not {value!r}", "max_nll", value=self.max_nll)
        if self.discourage is not None:
            put("discourage", _finite("discourage", self.discourage))
            if self.discourage <= 0:
                raise _fail("{0} must be above 0, not {value!r}", "discourage", value=self.discourage)

    @property
    def rows(self) -> int:
        """Sampled candidates per input: ``negative_sets x samples`` rows of the decoder."""
        return self.negative_sets * self.samples

    def replace(self, **changes: Any) -> DiverseOptions:
        """A copy with ``changes`` (field names), checked again."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> DiverseOptions:
        """Options from a mapping that holds them among other things under their field names (a command's
        parsed options, a job's params). Absent or None values keep the defaults."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})


def add_diverse_arguments(parser) -> None:
    """``--diverse`` and its options, named as :class:`DiverseOptions`' fields (``--negative-sets`` is
    ``negative_sets``). ``--seed``, ``--max-length`` and ``--batch-size`` are the command's own."""
    d = DiverseOptions()
    parser.add_argument(
        "--diverse",
        action="store_true",
        help="ParaBank 2's diverse mode: sampling under random negative constraints, scoring, clustering",
    )
    parser.add_argument("--negative-sets", type=cli_int, default=None, help=f"--diverse (default {d.negative_sets})")
    parser.add_argument("--samples", type=cli_int, default=None, help=f"--diverse: per set (default {d.samples})")
    parser.add_argument("--top-k", type=cli_int, default=None, help=f"--diverse (default {d.top_k})")
    parser.add_argument("--temperature", type=cli_float, default=None, help=f"--diverse (default {d.temperature})")
    parser.add_argument(
        "--ban-fraction",
        type=cli_float,
        default=None,
        help=f"--diverse: share of the reference's distinct words in each negative set (default {d.ban_fraction})",
    )
    parser.add_argument(
        "--ban-function-words",
        action="store_true",
        default=None,
        help="--diverse: draw negative sets from every word of the reference, articles and the like included",
    )
    parser.add_argument(
        "--allow-non-words",
        action="store_true",
        default=None,
        help="--diverse: keep candidates with a word that is neither an English word nor the reference's",
    )
    parser.add_argument("--discourage", type=cli_float, default=None, metavar="PENALTY", help=DISCOURAGE_HELP)
    parser.add_argument("--clusters", type=cli_int, default=None, help=f"--diverse (default {d.clusters})")
    parser.add_argument("--keep", type=cli_int, default=None, help=f"--diverse (default {d.keep})")
    parser.add_argument(
        "--backward-model",
        default=None,
        help="--diverse: a model scoring the input given each candidate (the rewriter itself, or target-to-source)",
    )
    parser.add_argument(
        "--max-nll", type=cli_float, default=None, help=f"--diverse: drop candidates scored above (default {d.max_nll})"
    )
