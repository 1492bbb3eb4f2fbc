"""The ``generate`` job's settings: one frozen :class:`GenerateParams`, from which ``manage.py generate``'s
options, the job's stored params and the worker's reading are built (``jobs.params``), and its checks.

Settings: ``corpus`` (id), ``model`` (a local Hugging Face seq2seq folder the workers can read, or a hub id
such as ``Helsinki-NLP/opus-mt-cs-en`` that they find in, or fetch into, their Hugging Face cache),
``systems`` (numbers, Tab. 3), ``idf_table`` (id; default the corpus's latest), the decoding options of
``generation.decode_options.DecodeOptions`` stored flat as jobs always stored them: ``beam`` (5), ``nbest``
(1), ``max_length`` (128), ``length_penalty`` (1.0), ``stop`` ("auto": when a sentence's search ends, see
``generation.decoding.decode``; a job planned before it existed has none and keeps "beam", the rule its first
chunks ran under: :func:`job_stop_rule`), ``batch_size`` (None: each chunk takes the device's, 32 on the CPU
and from the free memory on a GPU: ``generation.decoding.batching``; its result says which), ``device``
(None: CUDA when the worker has it), ``dtype`` (None: float16 on a GPU, float32 on the CPU; float16 and
bfloat16 need a GPU); then ``seed`` (0), ``ppdb`` (PPDB 2.0 file, needed by 35-37), ``name`` (the
Resource's; default ``<corpus>-job<id>``), ``sample_per_length`` + ``lengths`` (the evaluation sample;
absent = the whole corpus), ``sample_chunk_size`` (references per chunk of a sample, 50),
``pause_per_batch`` (seconds to sleep after each decoded batch, 0: throttles a GPU shared with other work;
the fault test uses it to kill a worker mid-chunk) and ``prompt_template`` (a decoder-only model's prompt,
stored as its JSON so that a worker needs no file).

``diverse`` (stored only when true) decodes with ParaBank 2's diverse mode instead of constraint systems:
``generation.decode_options.DiverseOptions``' fields, flattened (``negative_sets`` ... ``max_nll``, stored only
by a diverse job: None otherwise); ``backward_model`` (stored when given, either mode's: a beam search job orders
each beam by forward plus backward NLL per token, ``generation.decoding.decode``); ``seed``, ``max_length`` and
``batch_size`` are the job's own, one value each, which the sampler reads too. A diverse job takes no
``systems`` (not stored), IDF table or PPDB file, nor beam search's settings other than their defaults (a
decoder-only model's ``prompt_template`` it takes and stores as a beam search job does; a decoder-only backward
model is read with it when it is the same folder, else with its own default);
its candidates' systems are the ranks "r1" .. "r<keep>" (:func:`job_systems`). A plain job's stored JSON is
what it always was.

Checks that need nothing but the values run when a :class:`GenerateParams` is made; those that read the
database or the file system (the corpus is ready, the model folder loads, the PPDB file is there, the name
is free, the default IDF table) run in :func:`generate_params_checked`, the one service the command, the
demo and the plan use. A job of an older shape (no ``stop``, ``dtype``, ``batch_size`` or
``prompt_template``) reads with the defaults, and decodes under :func:`job_stop_rule`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from api.numbers import MAX_INT, is_ascii_int
from jobs.params import (
    ParamsError,
    check_bounds,
    fail,
    finite,
    from_values,
    int_at_least,
    param,
    to_json,
    true_false_or_unset,
)

from ..constraints.systems import PPDB_SYSTEMS, UnknownSystem, get_system, rank_system
from ..decode_options import (
    BACKWARD_HELP,
    BEAM_ONLY,
    DIVERSE_HELP,
    MAX_SEED,
    NOT_JOB_OPTIONS,
    DecodeOptions,
    DiverseOptions,
    diverse_settings_given,
    with_shared_settings,
)
from ..hooks import name_taken
from ..model_source import (
    MODEL_HELP,
    ModelFolderError,
    checkpoint_is_decoder_only,
    model_fingerprint,
    model_folder,
)
from ..models import Corpus, CorpusStatus, Resource
from ..prompts import PROMPT_TEMPLATE_HELP, PromptTemplateError, for_folder
from .budget import beam_memory_error, diverse_memory_error, diverse_time_error

DEFAULT_LENGTHS = (5, 10, 20, 40)
# the job's --diverse: the command's help and what the job makes of it (its systems are the ranks)
DIVERSE_JOB_HELP = DIVERSE_HELP + "; each reference's kept outputs become systems r1, r2, ... by rank (no --systems)"
# settings of constrained decoding that the diverse mode cannot honour (it draws its own negative sets)
NOT_WITH_DIVERSE = ("systems", "ppdb", "idf_table")


class GenerationSettingsError(ParamsError):
    """Generation settings that cannot work (unknown model folder, bad system number, ...): one line."""


# ------------------------------------------------------------------------------------- model folder


def check_model_folder(path: str, field: str = "model") -> bool:
    """Raises GenerationSettingsError for a checkpoint the decoder cannot load; returns whether the model is
    decoder-only (a causal LM: it is prompted, ``generation/prompts.py``) rather than an encoder-decoder
    (``generation.model_source.checkpoint_is_decoder_only``, the one rule)."""
    try:
        return checkpoint_is_decoder_only(path)
    except ModelFolderError as exc:
        raise GenerationSettingsError(str(exc), field=field) from None


def checked_fingerprint(path: str, field: str = "model") -> str:
    """``model_source.model_fingerprint`` of a job's model, its failure in the job's settings' words."""
    try:
        return model_fingerprint(path)
    except ModelFolderError as exc:
        raise GenerationSettingsError(str(exc), field=field) from None


def checked_folder(path: str, field: str = "model") -> Path:
    """``model_source.model_folder`` of a job's model, its failure in the job's settings' words."""
    try:
        return model_folder(path)
    except ModelFolderError as exc:
        raise GenerationSettingsError(str(exc), field=field) from None


def prompt_template_json(path: str, causal: bool, value: str | dict | None) -> dict | None:
    """The job's prompt template as stored (its JSON: a worker needs no file), None for an encoder-decoder
    model; GenerationSettingsError for one that cannot be used."""
    if not causal:
        if value is not None:
            raise GenerationSettingsError(
                f"prompt_template is for decoder-only models; {path!r} is an encoder-decoder model",
                field="prompt_template",
            )
        return None
    try:
        return for_folder(checked_folder(path), value).to_json()
    except PromptTemplateError as exc:
        raise GenerationSettingsError(str(exc), field="prompt_template") from None


# ----------------------------------------------------------------------------------------- settings


# The ranges of the job's own numbers (jobs.params: declared on each field, checked by CLI, admin, API and
# worker alike). Why these: each is far past what a ParaBank-style run asks for (ParaBank samples 100s of
# references per bucket, of at most a few dozen tokens) yet keeps one job from holding a 2-core, 24 GiB worker:
# a pause longer than a minute per batch is a stuck job, not a throttle.
MAX_SAMPLE_PER_LENGTH = 100_000
MAX_LENGTH_BUCKET = 1_000  # spaCy tokens; the decoder reads at most 1024 subwords
MAX_CHUNK = 10_000
MAX_PAUSE = 60.0  # seconds


def parse_systems(values: Sequence[int | str]) -> list[int]:
    """System numbers (duplicates dropped, order kept); GenerationSettingsError for a bad one."""
    out: list[int] = []
    for value in values:
        if isinstance(value, str) and not is_ascii_int(value):  # int() reads "١٥" and "1_5" as 15: refused
            raise GenerationSettingsError(
                f"unknown system {value!r}: {value!r} is not a number written in digits 0-9; systems are numbered 1-37",
                field="systems",
            )
        try:
            number = get_system(value).number
        except UnknownSystem as exc:
            raise GenerationSettingsError(str(exc), field="systems") from None
        if number not in out:
            out.append(number)
    if not out:
        raise GenerationSettingsError("give at least one system (1-37)", field="systems")
    return out


def _items(value: Any) -> list:
    """A list setting's items: a comma-separated string's (a form's, a command's) or the sequence's."""
    if isinstance(value, str):
        return [x.strip() for x in value.split(",") if x.strip()]
    return list(value)


def _int(name: str, value: Any, minimum: int = 1) -> int:
    return int_at_least(name, value, minimum, error=GenerationSettingsError)


@dataclass(frozen=True, kw_only=True)
class GenerateParams:
    """A generation job's settings (the module docstring says each), checked when made (those needing no
    database or file: :func:`generate_params_checked` does the rest). Declared in the order
    ``manage.py generate`` lists its options. ``lengths`` is None without a sample (it is checked even
    then, so a typo is not ignored, but a job without a sample does not store it)."""

    corpus: int = field(metadata=param(help="the corpus's id", cli=False, minimum=1, maximum=MAX_INT))
    model: str = field(metadata=param(help=MODEL_HELP))
    prompt_template: str | dict | None = field(
        default=None, metadata=param(help=PROMPT_TEMPLATE_HELP, kind=str, stored="if_set")
    )
    systems: tuple[int, ...] = field(
        default=(),
        metadata=param(
            help="comma-separated system numbers (1-37, Tab. 3); needed, except with --diverse (which takes none)",
            kind=str,
            stored="non_default",
            minimum=1,
            maximum=37,
        ),
    )
    sample_per_length: int | None = field(
        default=None,
        metadata=param(
            help="decode only this many references per length bucket (the evaluation sample)",
            stored="if_set",
            minimum=1,
            maximum=MAX_SAMPLE_PER_LENGTH,
        ),
    )
    lengths: tuple[int, ...] | None = field(
        default=DEFAULT_LENGTHS,
        metadata=param(
            help="length buckets of the sample (spaCy tokens; default 5,10,20,40); used with --sample-per-length",
            kind=str,
            stored="if_set",
            minimum=1,
            maximum=MAX_LENGTH_BUCKET,
        ),
    )
    decode: DecodeOptions = field(default=DecodeOptions(), metadata=param(flatten=True))
    diverse: bool = field(default=False, metadata=param(help=DIVERSE_JOB_HELP, stored="non_default"))
    diverse_options: DiverseOptions | None = field(default=None, metadata=param(flatten=True, kind=DiverseOptions))
    backward_model: str | None = field(default=None, metadata=param(help=BACKWARD_HELP, stored="if_set"))
    seed: int = field(
        default=0,
        metadata=param(
            help="seed of the systems' random choices of words (with --diverse: of its draws)",
            minimum=0,
            maximum=MAX_SEED,
        ),
    )
    ppdb: str | None = field(default=None, metadata=param(help="PPDB 2.0 lexical file (systems 35-37)"))
    idf_table: int | None = field(
        default=None,
        metadata=param(help="IDF table id (default: the corpus's latest)", cli=False, minimum=1, maximum=MAX_INT),
    )
    name: str | None = field(
        default=None, metadata=param(help="the resource's name (default: <corpus>-job<id>)", stored="if_set")
    )
    sample_chunk_size: int = field(
        default=50, metadata=param(help="sampled references per chunk", minimum=1, maximum=MAX_CHUNK)
    )
    pause_per_batch: float = field(
        default=0.0,
        metadata=param(
            help="seconds to sleep after each decoded batch (throttles a shared GPU)", minimum=0, maximum=MAX_PAUSE
        ),
    )

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("corpus", _int("corpus", self.corpus))
        put("model", str(self.model))
        if not isinstance(self.decode, DecodeOptions):
            raise GenerationSettingsError(f"decode must be DecodeOptions, not {type(self.decode).__name__}")
        knobs = [n for n in NOT_JOB_OPTIONS if getattr(self.decode, n) != getattr(DecodeOptions(), n)]
        if knobs:
            raise fail("{0} is not a generation job's setting", knobs[0], error=GenerationSettingsError)
        put("seed", _int("seed", self.seed, 0))
        put("diverse", bool(true_false_or_unset("diverse", self.diverse, error=GenerationSettingsError)))
        put("backward_model", str(self.backward_model) if self.backward_model else None)
        put("systems", tuple(_items(self.systems)))
        put("diverse_options", self._checked_diverse_options())
        if not self.diverse:
            put("systems", tuple(parse_systems(self.systems)))
        put("ppdb", str(self.ppdb) if self.ppdb else None)
        if not self.ppdb and any(n in PPDB_SYSTEMS for n in self.systems):
            raise GenerationSettingsError("PPDB systems 35-37 need a PPDB file (--ppdb FILE)", field="ppdb")
        if self.idf_table is not None:
            put("idf_table", _int("idf_table", self.idf_table))
        put("sample_chunk_size", _int("sample_chunk_size", self.sample_chunk_size))
        put("pause_per_batch", max(0.0, finite("pause_per_batch", self.pause_per_batch, error=GenerationSettingsError)))
        lengths = _items(DEFAULT_LENGTHS if self.lengths is None else self.lengths)
        try:  # checked even when unused: a typo is not ignored
            lengths = sorted({_int("length", n) for n in lengths})
        except GenerationSettingsError as exc:
            raise GenerationSettingsError(str(exc), exc.option_message, field="lengths") from None
        if not lengths:
            raise GenerationSettingsError("give at least one length bucket", field="lengths")
        if self.sample_per_length is not None:
            put("sample_per_length", _int("sample_per_length", self.sample_per_length))
        put("lengths", tuple(lengths) if self.sample_per_length is not None else None)
        put("name", (str(self.name).strip() or None) if self.name is not None else None)
        check_bounds(self, error=GenerationSettingsError)

    def _checked_diverse_options(self) -> DiverseOptions | None:
        """The diverse mode's options (None without ``diverse``): its own settings refused without it, and with
        it the settings it cannot honour (constraint systems, their IDF table and PPDB file, beam search's);
        ``seed``, ``max_length`` and ``batch_size`` are the job's own, one value each."""
        options = self.diverse_options
        if options is not None and not isinstance(options, DiverseOptions):
            raise GenerationSettingsError(f"diverse_options must be DiverseOptions, not {type(options).__name__}")
        if not self.diverse:
            given = diverse_settings_given(options)
            if given:
                raise fail("{0} needs {1}", given[0], "diverse", error=GenerationSettingsError)
            return None
        clash = [n for n in NOT_WITH_DIVERSE if getattr(self, n)]
        if clash:
            raise fail(
                "{1} samples its own negative constraints: leave out {0}",
                clash[0],
                "diverse",
                error=GenerationSettingsError,
            )
        search = [n for n in BEAM_ONLY if getattr(self.decode, n) != getattr(DecodeOptions(), n)]
        if search:
            raise fail(
                "{0} is beam search's; {1} samples: leave it out", search[0], "diverse", error=GenerationSettingsError
            )
        return with_shared_settings(options, self.decode, self.seed, owner="the job", error=GenerationSettingsError)


def check_name_free(name: str) -> None:
    """GenerationSettingsError when a resource (or what another app keeps under it, e.g. the evaluation
    sample's campaign) already has the name."""
    if Resource.objects.filter(name=name).exists():
        raise GenerationSettingsError(f"a resource named {name!r} already exists", field="name")
    taken = name_taken(name)  # e.g. annotation: the evaluation sample's campaign takes the name
    if taken:
        raise GenerationSettingsError(taken, field="name")


def check_backward_model(path: str) -> None:
    """A backward model (either mode's) checked as the model is, its failures said as ``--backward-model``'s: a
    checkpoint the decoder can load, and a decoder-only one with a default template it can use (it is read with
    the model's template when it is the same folder, else with its own)."""
    try:
        causal = check_model_folder(path, "backward_model")
        if causal:
            prompt_template_json(path, causal, None)
        checked_fingerprint(path, "backward_model")
    except GenerationSettingsError as exc:
        raise GenerationSettingsError(f"--backward-model: {exc}", field="backward_model") from None


def checked_models(params: GenerateParams) -> tuple[dict | None, Path, Path | None]:
    """A job's model and backward model checked, either mode's: the model's prompt template as stored (None for
    an encoder-decoder model), and both models' local folders (what the memory budgets read)."""
    template = prompt_template_json(params.model, check_model_folder(params.model), params.prompt_template)
    checked_fingerprint(params.model)
    backward = None
    if params.backward_model:
        check_backward_model(params.backward_model)
        backward = checked_folder(params.backward_model, "backward_model")
    return template, checked_folder(params.model), backward


def generate_params_checked(params: GenerateParams) -> GenerateParams:
    """``params`` checked against the database and the file system (nothing is created), completed: the
    corpus's latest IDF table where none is given, a decoder-only model's prompt template as its JSON.
    Raises GenerationSettingsError."""
    corpus = Corpus.objects.filter(pk=params.corpus).first()
    if corpus is None:
        raise GenerationSettingsError(f"no corpus numbered {params.corpus}")
    if corpus.status != CorpusStatus.READY:
        raise GenerationSettingsError(f"corpus {corpus.name!r} is {corpus.status}, not ready")
    if params.diverse:
        return diverse_params_checked(params)
    template, model, backward = checked_models(params)
    problem = beam_memory_error(params.decode, model, backward, settings.PARAFORGE_JOB_MEMORY_GIB)
    if problem:
        raise GenerationSettingsError(problem)
    if params.ppdb and Path(params.ppdb).is_dir():
        raise GenerationSettingsError(f"PPDB file {params.ppdb!r} is a directory, not a file", field="ppdb")
    if params.ppdb and not Path(params.ppdb).is_file():
        raise GenerationSettingsError(f"PPDB file {params.ppdb!r} does not exist", field="ppdb")
    idf_table = params.idf_table
    if idf_table is None:
        idf_table = corpus.idf_tables.order_by("-created_at", "-pk").values_list("pk", flat=True).first()
        if idf_table is None:
            raise GenerationSettingsError(f"corpus {corpus.name!r} has no IDF table (run build_idf first)")
    if params.name:
        check_name_free(params.name)
    return dataclasses.replace(params, idf_table=idf_table, prompt_template=template)


def diverse_params_checked(params: GenerateParams) -> GenerateParams:
    """A diverse job's models checked (a decoder-only ``model`` gets its prompt template stored as its JSON,
    as a beam search job's does; a decoder-only backward model is read with that template when it is the same
    folder, else with its own default, checked here), its estimated peak memory and time against the workers'
    budgets (``budget``), and its name; it takes no IDF table, no PPDB file."""
    template, model, backward = checked_models(params)
    options = params.diverse_options or DiverseOptions()
    problem = diverse_memory_error(options, model, backward, settings.PARAFORGE_JOB_MEMORY_GIB)
    references = Corpus.objects.filter(pk=params.corpus).values_list("n_references", flat=True).first() or 0
    problem = problem or diverse_time_error(
        options,
        model,
        backward,
        references,
        flops=settings.PARAFORGE_DIVERSE_FLOPS,
        budget_hours=settings.PARAFORGE_DIVERSE_HOURS,
    )
    if problem:
        raise GenerationSettingsError(problem)
    if params.name:
        check_name_free(params.name)
    return dataclasses.replace(params, prompt_template=template)


def job_diverse_options(params: dict[str, Any]) -> DiverseOptions | None:
    """The diverse mode's options of a job's params (None for a job of constraint systems): one reading of the
    stored settings, where the job's ``seed``, ``max_length`` and ``batch_size`` are the sampler's too."""
    return from_values(DiverseOptions, params) if params.get("diverse") else None


def job_systems(params: dict[str, Any]) -> list[str]:
    """The systems a job's candidates carry, as shard records and campaigns spell them: its constraint systems'
    numbers, or the diverse mode's ranks ("r1" .. "r<keep>")."""
    options = job_diverse_options(params)
    if options is None:
        return [str(n) for n in params["systems"]]
    return [rank_system(r) for r in range(1, options.keep + 1)]


def generation_params(params: GenerateParams) -> dict[str, Any]:
    """The params a generate job starts with: ``params`` checked (:func:`generate_params_checked`), as JSON."""
    return to_json(generate_params_checked(params))


# ----------------------------------------------------------------------------- the worker's reading


def job_stop_rule(params: dict[str, Any]) -> str:
    """The stopping rule a job decodes under: its own, or "beam" for a job planned before jobs had one (its
    chunks that already ran used Hugging Face's rule, and a resumed job must not mix two)."""
    return params.get("stop") or "beam"


def job_decode_options(params: dict[str, Any]) -> DecodeOptions:
    """The decoding options of a job's params (a job planned before some option existed gets the value its
    first chunks ran under: ``job_stop_rule``; no dtype, the device's; no batch_size, the device's rule)."""
    return from_values(DecodeOptions, params, stop=job_stop_rule(params))
