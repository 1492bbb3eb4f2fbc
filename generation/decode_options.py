"""The decoder's options in one place: :class:`DecodeOptions`, checked once, where it is made.

``paraphrase`` and ``generate`` build one from their command-line options, a generation job from its params,
and it travels unchanged to ``decode`` and ``BeamSearch``. This module imports neither torch nor a domain
app, so that settings checks (a job's params, a web form) need not load the decoder.

The options are ``jobs.params`` fields: a field's name is its command-line option's (``batch_size`` is
``--batch-size``) and its job param's, its :func:`jobs.params.param` metadata says its help and whether a job
stores it, and the commands' options are derived from them (``GenerateParams``, ``ParaphraseParams``). An
error names a field the way the caller's user wrote it (:attr:`DecodeOptionsError.option_message` for commands). A
generation job stores the eight options ``beam`` to ``dtype`` (always, as jobs have since they existed) and
``keep_facts`` and ``avoid_copies`` when on (so a job stored before they existed reads the same); the others are
per-process knobs (``paraphrase``, benches) that a job never stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.params import (
    ParamsError,
    check_bounds,
    fail,
    fields_in_scope,
    finite,
    int_at_least,
    param,
    true_false_or_unset,
)

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
DEVICE_HELP = "default: CUDA where there is one, else the CPU"
# The decoder's ranges (jobs.params: declared on each field, one check for CLI, admin, API and worker). Why
# these: ParaBank decodes with beams of 5-20 and sentences of a few dozen subwords; a beam of 100, 1024 tokens or
# 4096 sentences a batch is already past any research use, and above them one job's tensors outgrow a 2-core,
# 24 GiB worker. The diverse mode's rows (sets x samples) are bounded again by its budget (resource_budget).
MAX_BEAM = 100
MAX_TOKENS = 1024
MAX_BATCH = 4096
MAX_SEED = 2**32 - 1
# Each option's scope (``jobs.params.param``'s ``scope``, one on every field of DecodeOptions and DiverseOptions;
# the lists below are derived from them): beam search's own, shared by beam search and the diverse mode, a
# process's knob (paraphrase, benches; never a job's), the diverse mode's own
SEARCH, SHARED, PROCESS, DIVERSE = "search", "shared", "process", "diverse"
SCOPES = (SEARCH, SHARED, PROCESS, DIVERSE)


class DecodeOptionsError(ParamsError):
    """A decoding option that cannot work. ``str()`` names fields as job params and ``decode`` keywords do
    (``batch_size``), :attr:`option_message` as the commands' options (``--batch-size``)."""


def _fail(template: str, *fields: str, **values: Any) -> DecodeOptionsError:
    return fail(template, *fields, error=DecodeOptionsError, **values)  # type: ignore[return-value]


def _int(name: str, value: Any, minimum: int, why: str = "") -> int:
    return int_at_least(name, value, minimum, why, error=DecodeOptionsError)


def _finite(name: str, value: Any) -> float:
    return finite(name, value, error=DecodeOptionsError)


def _flag(name: str, value: Any) -> bool | None:
    return true_false_or_unset(name, value, error=DecodeOptionsError)


def _knob(help: str = "", *, cli: bool = False) -> dict[str, Any]:
    """A process's decoding knob: never stored by a job (left out while it has its default), never a form's."""
    return param(help=help, cli=cli, form=False, stored="non_default", scope=PROCESS)


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
    Marian and BART); ``keep_facts``: search the whole beam and put first the outputs that change fewest of the
    reference's facts (``generation.facts``); ``avoid_copies``: search the whole beam, put last the outputs
    that copy the reference or nearly or hold a non-word, then its extensions, drop those the length limit ended
    or that loop (``generation.decoding.rerank.avoided``), and search a beam of copies again with the reference's
    first word avoided at the start (``generation.decoding.start_avoided``);
    ``rerank_dissimilar``: order each n-best list by word edit distance to the reference."""

    beam: int = field(
        default=5,
        metadata=param(
            help="hypotheses kept per input at each step (the beam size)", minimum=1, maximum=MAX_BEAM, scope=SEARCH
        ),
    )
    nbest: int = field(
        default=1,
        metadata=param(
            help="outputs returned per input, best first (at most --beam)", minimum=1, maximum=MAX_BEAM, scope=SEARCH
        ),
    )
    stop: str = field(default=STOP_DEFAULT, metadata=param(help=STOP_HELP, choices=STOP_RULES, scope=SEARCH))
    max_length: int = field(
        default=128,
        metadata=param(
            help="maximum output length in subword tokens, decoder start token included",
            minimum=2,
            maximum=MAX_TOKENS,
            scope=SHARED,
        ),
    )
    length_penalty: float = field(
        default=1.0,
        metadata=param(
            help="finished hypotheses' scores are divided by their length to this power",
            minimum=-10,
            maximum=10,
            scope=SEARCH,
        ),
    )
    keep_facts: bool = field(
        default=False,
        metadata=param(
            help="put first the outputs that keep the reference's numbers and names and add none (generation.facts): "
            "beam search orders its whole beam so, ties by score, then returns the n-best; the diverse mode picks "
            "each cluster's best and ranks them so",
            stored="non_default",
            scope=SHARED,
        ),
    )
    avoid_copies: bool = field(
        default=False,
        metadata=param(
            help="put last the outputs that are the reference again or a near-copy of it (the release's rule, which "
            "would drop them) or hold a non-word (a HIT batch would leave them out), and after them the reference with "
            "words added or an empty output (generation.copies); drop the outputs the length limit ended or that "
            "repeat themselves (no sentence: a reference whose whole beam ran on gets none): beam search orders "
            "its whole beam so, ties by score, then returns the n-best; a beam of nothing better than copies is "
            "searched again with the reference's first word avoided at the start",
            stored="non_default",
            scope=SEARCH,
        ),
    )
    early_stopping: bool | str = field(default=False, metadata=_knob())
    batch_size: int | None = field(
        default=None, metadata=param(help=BATCH_HELP, minimum=1, maximum=MAX_BATCH, scope=SHARED)
    )
    device: str | None = field(default=None, metadata=param(help=DEVICE_HELP, choices=DEVICES, scope=SHARED))
    dtype: str | None = field(default=None, metadata=param(help=DTYPE_HELP, choices=DTYPES, scope=SHARED))
    int8: bool = field(
        default=False,
        metadata=_knob(
            "CPU, Marian/BART: the decoder's products on dynamic int8 weights (faster; outputs can differ from "
            "float32's)",
            cli=True,
        ),
    )
    rerank_dissimilar: bool = field(
        default=False,
        metadata=_knob("order each n-best list by word Levenshtein distance to the reference (ties: score)", cli=True),
    )
    cuda_graph: bool | None = field(default=None, metadata=_knob())
    shrink: bool | None = field(default=None, metadata=_knob())
    fast_step: bool | None = field(default=None, metadata=_knob())

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
        for name in ("keep_facts", "avoid_copies", "int8", "rerank_dissimilar"):
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
        check_bounds(self, error=DecodeOptionsError)

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


BEAM_ONLY = fields_in_scope(DecodeOptions, SEARCH)  # what a diverse job refuses when not at its default
NOT_JOB_OPTIONS = fields_in_scope(DecodeOptions, PROCESS)  # a job decodes with their defaults, never stores them


DIVERSE_HELP = "ParaBank 2's diverse mode: sampling under random negative constraints, scoring, clustering"
BACKWARD_HELP = (
    "a model scoring the input given each output (the paraphraser itself, or one trained target-to-source): "
    "added to each --diverse candidate's score; beam search orders its whole beam by forward + backward NLL per token"
)
DISCOURAGE_HELP = (
    "--diverse: instead of banning each sample's negative words outright, lower the log-probability of the "
    "tokens that would complete one by PENALTY (a banned word may then appear)"
)

# the diverse sampler's inputs per batch when a run gives none (DiverseOptions.inputs_per_batch): on a GPU 8; on the
# CPU as many as fill this many rows, since a step's cost at a few rows is mostly reading the weights (Gemma 3 270M's
# 1 GB a step): at the quick start's 3 x 8 rows ten inputs sampled 12 demo-corpus lines in 45 s against 79 s one at
# a time, the same outputs (the demo model: 1.6 s against 2.8 s for 24 lines)
CPU_DIVERSE_ROWS = 256
CUDA_DIVERSE_INPUTS = 8


@dataclass(frozen=True)
class DiverseOptions:
    """ParaBank 2's diverse mode (Hu et al., CoNLL 2019, sections 2-3), every number in one value:
    ``negative_sets`` random sets of the reference's words (``ban_fraction`` of its distinct words each, or
    graded evenly over ``ban_fraction`` +- ``ban_spread``; each at least one word; its function words only
    with ``ban_function_words``), ``samples`` top-``top_k``
    samples at ``temperature`` under each set; a set's words (and their casing variants) are banned
    exactly, or, with ``discourage``, their completing tokens lose that much log-probability. Candidates
    with a word that is no English word and not the reference's are dropped unless ``allow_non_words``;
    those whose score (forward NLL per token, plus the backward model's when one is given) exceeds ``max_nll``
    are dropped; the rest are clustered into ``clusters`` k-medoids clusters (one pinned on the
    reference) and the best of each other cluster kept, ``keep`` at most. ``seed``: the same seed and
    device give the same outputs. ``batch_size``: inputs decoded together (each is ``negative_sets x
    samples`` rows; None: :meth:`inputs_per_batch`'s rule). ``max_length`` counts the decoder start token, as in
    :class:`DecodeOptions`."""

    # ParaBank 2 draws 5 sets x 30 samples; 50 x 500 is far past it (the budget then bounds their product)
    negative_sets: int = field(default=5, metadata=param(scope=DIVERSE, help="--diverse", minimum=1, maximum=50))
    samples: int = field(default=30, metadata=param(scope=DIVERSE, help="--diverse: per set", minimum=1, maximum=500))
    top_k: int = field(default=10, metadata=param(scope=DIVERSE, help="--diverse", minimum=1, maximum=1000))
    temperature: float = field(
        default=1.0, metadata=param(scope=DIVERSE, help="--diverse (above 0)", minimum=0, maximum=100)
    )
    ban_fraction: float = field(
        default=0.3,
        metadata=param(
            scope=DIVERSE,
            help="--diverse: share of the reference's distinct words in each negative set "
            "(with --ban-spread: the mean)",
            minimum=0,
            maximum=1,
        ),
    )
    ban_spread: float = field(
        default=0.0,
        metadata=param(
            scope=DIVERSE,
            help="--diverse: grade the sets' shares evenly from ban-fraction minus this to plus this, lightest "
            "first (0.2: 0.1 .. 0.5; 0, ParaBank 2's way: every set at ban-fraction)",
            stored="non_default",
            minimum=0,
            maximum=1,
        ),
    )
    ban_function_words: bool = field(
        default=False,
        metadata=param(
            scope=DIVERSE,
            help="--diverse: draw negative sets from every word of the reference, articles and the like included",
        ),
    )
    allow_non_words: bool = field(
        default=False,
        metadata=param(
            scope=DIVERSE,
            help="--diverse: keep candidates with a word that is neither an English word nor the reference's",
        ),
    )
    discourage: float | None = field(
        default=None, metadata=param(scope=DIVERSE, help=DISCOURAGE_HELP, metavar="PENALTY", minimum=0, maximum=1000)
    )
    clusters: int = field(default=8, metadata=param(scope=DIVERSE, help="--diverse", minimum=2, maximum=100))
    keep: int = field(default=5, metadata=param(scope=DIVERSE, help="--diverse", minimum=1, maximum=100))
    max_nll: float = field(
        default=3.5,
        metadata=param(scope=DIVERSE, help="--diverse: drop candidates scored above", minimum=0, maximum=100),
    )
    # the command's own --seed, --max-length and --batch-size (shared with constrained decoding; a generate
    # job's one value of each, its own option and form field: never offered twice)
    seed: int = field(default=0, metadata=param(scope=SHARED, cli=False, form=False, minimum=0, maximum=MAX_SEED))
    max_length: int = field(
        default=128, metadata=param(scope=SHARED, cli=False, form=False, minimum=2, maximum=MAX_TOKENS)
    )
    batch_size: int | None = field(
        default=None, metadata=param(scope=SHARED, cli=False, form=False, minimum=1, maximum=MAX_BATCH)
    )
    keep_facts: bool = field(default=False, metadata=param(scope=SHARED, cli=False, form=False))

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
        for name in ("ban_fraction", "ban_spread"):
            put(name, _finite(name, getattr(self, name)))
        for name in ("ban_function_words", "allow_non_words", "keep_facts"):
            put(name, bool(_flag(name, getattr(self, name))))
        put("max_nll", _finite("max_nll", self.max_nll))
        if self.max_nll <= 0:
            raise _fail("{0} must be above 0, not {value!r}", "max_nll", value=self.max_nll)
        if self.discourage is not None:
            put("discourage", _finite("discourage", self.discourage))
            if self.discourage <= 0:
                raise _fail("{0} must be above 0, not {value!r}", "discourage", value=self.discourage)
        check_bounds(self, error=DecodeOptionsError)

    @property
    def ban_fractions(self) -> list[float]:
        """Each negative set's share of the reference's words, lowest first: ``ban_fraction`` +-
        ``ban_spread`` in even steps, within 0 and 1. Why grade: a lightly banned set keeps its samples near
        the reference, where rank 1 is usually found; a heavily banned one pushes them away. On the demo model
        (``bench/diversity.py``) 0.1 .. 0.5 against 0.3 for every set raised rank 1's similarity to the
        reference by 0.021 on development lines 1000-1191 and by 0.023 on held-out lines 2000-2023, but
        pairwise 1-BLEU among the outputs rose on the former (2.04x -> 2.13x beam's) and fell on the latter
        (3.14x -> 2.76x): a trade, so off by default, as in ParaBank 2."""
        n = self.negative_sets
        steps = [0.0] if n == 1 else [2 * i / (n - 1) - 1 for i in range(n)]
        return [min(1.0, max(0.0, self.ban_fraction + self.ban_spread * step)) for step in steps]

    @property
    def rows(self) -> int:
        """Sampled candidates per input: ``negative_sets x samples`` rows of the decoder."""
        return self.negative_sets * self.samples

    def inputs_per_batch(self, device_type: str) -> int:
        """Inputs the sampler decodes together: ``batch_size`` where given; else 8 on a GPU, and on the CPU as
        many as keep within :data:`CPU_DIVERSE_ROWS` rows, at least one (one at ParaBank 2's 5 x 30 rows, ten
        at the quick start's 3 x 8)."""
        if self.batch_size:
            return self.batch_size
        return CUDA_DIVERSE_INPUTS if device_type == "cuda" else max(1, CPU_DIVERSE_ROWS // self.rows)

    def replace(self, **changes: Any) -> DiverseOptions:
        """A copy with ``changes`` (field names), checked again."""
        return dataclasses.replace(self, **changes)


# DiverseOptions' fields that are the command's or the job's own (one value each, shared with beam search)
DIVERSE_SHARED = fields_in_scope(DiverseOptions, SHARED)
# ... and the diverse mode's own settings, in DiverseOptions' order: what a command, a form and a job refuse
# without --diverse (each adds its --backward-model, a model, not a number)
DIVERSE_ONLY = fields_in_scope(DiverseOptions, DIVERSE)


def diverse_settings_given(options: DiverseOptions | Mapping[str, Any] | None) -> list[str]:
    """The diverse mode's own settings (:data:`DIVERSE_ONLY`) that ``options`` gives: off their defaults in a
    :class:`DiverseOptions`, present at all in a mapping of typed values (a command's: even a default typed out is
    refused without ``--diverse``). What a command and a job refuse without ``diverse``."""
    if isinstance(options, DiverseOptions):
        default = DiverseOptions()
        return [n for n in DIVERSE_ONLY if getattr(options, n) != getattr(default, n)]
    return [n for n in DIVERSE_ONLY if options is not None and options.get(n) is not None]


def with_shared_settings(
    options: DiverseOptions | Mapping[str, Any] | None,
    decode: DecodeOptions,
    seed: int,
    *,
    owner: str,
    error: type[ParamsError] = DecodeOptionsError,
) -> DiverseOptions:
    """The diverse options with the settings they share with their command or job (:data:`DIVERSE_SHARED`:
    ``seed``, and ``decode``'s ``max_length``, ``batch_size`` and ``keep_facts``): one value each, so a
    :class:`DiverseOptions` that says otherwise is refused (``owner``: "the job", "the command", as the message
    says it)."""
    shared = {
        "seed": seed,
        "max_length": decode.max_length,
        "batch_size": decode.batch_size,
        "keep_facts": decode.keep_facts,
    }
    if not isinstance(options, DiverseOptions):
        return DiverseOptions(**{**dict(options or {}), **shared})
    for name, value in shared.items():
        if getattr(options, name) != value:
            raise fail(
                "{0} is one setting of " + owner + " and of its diverse sampling: {value!r} and {other!r} differ",
                name,
                error=error,
                value=value,
                other=getattr(options, name),
            )
    return options
