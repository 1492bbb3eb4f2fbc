"""Job kind ``generate`` (``gpu`` queue): decode a corpus (or its evaluation sample) under ParaBank systems.

Params (validated by :func:`generation_params`, which the CLI and any other caller use before starting):
``corpus`` (id), ``model`` (a local Hugging Face seq2seq folder the workers can read, or a hub id such as
``Helsinki-NLP/opus-mt-cs-en`` that they find in, or fetch into, their Hugging Face cache), ``systems``
(numbers, Tab. 3), ``idf_table`` (id; default the corpus's latest), ``beam`` (5), ``nbest`` (1),
``max_length`` (128), ``length_penalty`` (1.0), ``stop`` ("auto": when a sentence's search ends, see
``generation.decoding.decode``; a job planned before it existed has none and keeps "beam", the rule its
first chunks ran under), ``batch_size`` (None: each chunk takes the device's, 32 on the CPU and from the
free memory on a GPU: ``generation.decoding.batching``; its result says which), ``device`` (None: CUDA when
the worker has it), ``dtype`` (None: float16 on a GPU, float32 on the CPU; float16 and bfloat16 need a GPU),
``seed`` (0), ``ppdb`` (PPDB 2.0 file, needed by 35-37), ``name`` (the Resource's; default
``<corpus>-job<id>``), ``sample_per_length`` + ``lengths`` (the evaluation sample; absent = the whole
corpus), ``sample_chunk_size`` (references per chunk of a sample, 50) and ``pause_per_batch`` (seconds to
sleep after each decoded batch, 0: throttles a GPU shared with other work; the fault test uses it to kill a
worker mid-chunk).

The ``Resource`` row is created with the job (``plan``), which also records the model's weights hash, so
that every chunk (and a resumed job) decodes with the same weights. Chunks: one per corpus shard, or one
per slice of the sample. A chunk tags its references with spaCy, selects each system's constraints
(:mod:`generation.constraints`; on a GPU for the next window in a background thread while the current one
decodes), decodes every distinct (input, constraints) once, merges identical outputs
per reference keeping which systems produced them, and writes ONE candidate shard at
``candidates/<job>/shard-<chunk>.jsonl.gz`` in the record format of :class:`generation.models.Resource`
(candidates ordered by nll, then text), then upserts its ``ResourceShard``. A chunk that runs again
rewrites the same file and the same row. Outputs that are empty strings are dropped (counted).

**Evaluation sample** (``sample_per_length``): a reference belongs to the bucket whose length is nearest to
its spaCy token count (ties go to the shorter bucket); within a bucket references are taken by distance to
the bucket length first (exact lengths first, as ParaBank sampled them), then in an order fixed by a hash of
(seed, corpus index): deterministic by seed, a uniform random sample among equally near references. The
plan streams the corpus once through spaCy's tokenizer to draw it. The sample and its merged candidates
become an annotation ``Campaign`` linked to the job in the same transaction as ``finish``: annotation does
that in a finish hook it registers (``annotation/campaigns.py``), which fills in the result's ``campaign``.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import math
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from infra.shards import batched, read_jsonl_gz, write_jsonl_gz
from jobs.models import Job, JobChunk
from jobs.registry import JobKind, ProgressFn, register

from .beam_sizes import STOP_DEFAULT
from .constraint_job import load_idf_table
from .constraints import resolve_systems, select_for_all_systems, tag_sentences
from .decode_options import DecodeOptions, DecodeOptionsError
from .hooks import name_taken
from .model_source import ModelFolderError, model_folder
from .models import Corpus, CorpusFormat, CorpusStatus, IdfTable, Resource, ResourceShard
from .prompts import PromptTemplateError, for_folder
from .systems import PPDB_SYSTEMS, UnknownSystem, get_system

KIND = "generate"
DEFAULT_LENGTHS = (5, 10, 20, 40)
WINDOW = 512  # references tagged, selected and decoded together inside a chunk
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")


class GenerationSettingsError(ValueError):
    """Generation settings that cannot work (unknown model folder, bad system number, ...): one line."""


# --------------------------------------------------------------------------------------- settings


def candidate_shard_key(job_id: int, chunk_index: int) -> str:
    return f"candidates/{job_id}/shard-{chunk_index:05d}.jsonl.gz"


def resolve_model_folder(path: str) -> Path:
    """The model's local folder: as given, or relative to the project root (where workers run), or a hub id's
    snapshot in the Hugging Face cache (``generation.model_source.model_folder``, the one rule)."""
    try:
        return model_folder(path, base_dir=settings.BASE_DIR)
    except ModelFolderError as exc:
        raise GenerationSettingsError(str(exc)) from None


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(path: str) -> str:
    """SHA-256 of the folder's weights file (of its weights files' hashes when there are several)."""
    folder = resolve_model_folder(path)
    files = (
        sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))
        if folder.is_dir()
        else []
    )
    if not files:
        raise GenerationSettingsError(
            f"model folder {path!r} holds no weights file ({', '.join('*' + s for s in WEIGHT_SUFFIXES[:2])})"
        )
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    found = _FINGERPRINTS.get(key)
    if found is None:
        digests = []
        for f in files:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            digests.append((f.name, h.hexdigest()))
        found = (
            digests[0][1]
            if len(digests) == 1
            else hashlib.sha256("".join(f"{n}:{d}\n" for n, d in digests).encode()).hexdigest()
        )
        _FINGERPRINTS[key] = found
    return found


def _check_model_folder(path: str) -> bool:
    """Raises GenerationSettingsError for a folder the decoder cannot load; returns whether the model is
    decoder-only (a causal LM: it is prompted, ``generation/prompts.py``) rather than an encoder-decoder."""
    folder = resolve_model_folder(path)
    if not folder.is_dir():
        raise GenerationSettingsError(f"model folder {path!r} is not a folder")
    if not (folder / "config.json").is_file():
        raise GenerationSettingsError(f"model folder {path!r} has no config.json (not a Hugging Face checkpoint)")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GenerationSettingsError(f"model folder {path!r}: unreadable config.json ({exc})") from None
    if config.get("is_encoder_decoder"):
        return False
    if any(str(a).endswith(CAUSAL_ARCHITECTURES) for a in config.get("architectures") or []):
        return True
    raise GenerationSettingsError(
        f"model folder {path!r} is neither an encoder-decoder (seq2seq) nor a decoder-only (causal LM) model"
    )


CAUSAL_ARCHITECTURES = ("ForCausalLM", "LMHeadModel")  # config.json "architectures" of a decoder-only model


def _prompt_template(path: str, causal: bool, value: str | dict | None) -> dict | None:
    """The job's prompt template as stored (its JSON: a worker needs no file), None for an encoder-decoder
    model; GenerationSettingsError for one that cannot be used."""
    if not causal:
        if value is not None:
            raise GenerationSettingsError(
                f"prompt_template is for decoder-only models; {path!r} is an encoder-decoder model"
            )
        return None
    try:
        return for_folder(resolve_model_folder(path), value).to_json()
    except PromptTemplateError as exc:
        raise GenerationSettingsError(str(exc)) from None


def parse_systems(values: Sequence[int | str]) -> list[int]:
    """System numbers (duplicates dropped, order kept); GenerationSettingsError for a bad one."""
    out: list[int] = []
    for value in values:
        try:
            number = get_system(value).number
        except UnknownSystem as exc:
            raise GenerationSettingsError(str(exc)) from None
        if number not in out:
            out.append(number)
    if not out:
        raise GenerationSettingsError("give at least one system (1-37)")
    return out


def _finite(value, name: str) -> float:
    """A float that JSON (the job's params) can hold: NaN and infinities are refused."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise GenerationSettingsError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(x):
        raise GenerationSettingsError(f"{name} must be a finite number, not {value!r}")
    return x


def _int(value, name: str, minimum: int = 1) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise GenerationSettingsError(f"{name} must be an integer, not {value!r}") from None
    if n < minimum:
        raise GenerationSettingsError(f"{name} must be at least {minimum}, not {n}")
    return n


def generation_params(
    *,
    corpus: Corpus,
    model: str,
    systems: Sequence[int | str],
    idf_table: IdfTable | None = None,
    beam: int = 5,
    nbest: int = 1,
    max_length: int = 128,
    length_penalty: float = 1.0,
    batch_size: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
    seed: int = 0,
    ppdb: str | None = None,
    sample_per_length: int | None = None,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    name: str | None = None,
    sample_chunk_size: int = 50,
    pause_per_batch: float = 0.0,
    stop: str = STOP_DEFAULT,
    prompt_template: str | dict | None = None,
) -> dict[str, Any]:
    """Check every setting (nothing is created) and return the job's params. Raises GenerationSettingsError.
    The decoding settings are checked as one ``DecodeOptions`` (the rules ``paraphrase`` and ``decode`` use).
    ``prompt_template``: a decoder-only model's (a built-in's name, a file, or a stored template's JSON;
    None: the model's default), stored with the job as JSON."""
    if corpus.status != CorpusStatus.READY:
        raise GenerationSettingsError(f"corpus {corpus.name!r} is {corpus.status}, not ready")
    try:
        options = DecodeOptions(
            beam=beam,
            nbest=nbest,
            stop=stop,
            max_length=max_length,
            length_penalty=length_penalty,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
        )
    except DecodeOptionsError as exc:
        raise GenerationSettingsError(str(exc)) from None
    template = _prompt_template(model, _check_model_folder(model), prompt_template)
    model_fingerprint(model)
    numbers = parse_systems(systems)
    if not ppdb and any(n in PPDB_SYSTEMS for n in numbers):
        raise GenerationSettingsError("PPDB systems 35-37 need a PPDB file (--ppdb FILE)")
    if ppdb and Path(ppdb).is_dir():
        raise GenerationSettingsError(f"PPDB file {ppdb!r} is a directory, not a file")
    if ppdb and not Path(ppdb).is_file():
        raise GenerationSettingsError(f"PPDB file {ppdb!r} does not exist")
    if idf_table is None:
        idf_table = corpus.idf_tables.order_by("-created_at", "-pk").first()
        if idf_table is None:
            raise GenerationSettingsError(f"corpus {corpus.name!r} has no IDF table (run build_idf first)")
    params: dict[str, Any] = {
        "corpus": corpus.pk,
        "model": str(model),
        "systems": numbers,
        "idf_table": idf_table.pk,
        **options.job_params(),
        "seed": _int(seed, "seed", 0),
        "ppdb": str(ppdb) if ppdb else None,
        "sample_chunk_size": _int(sample_chunk_size, "sample_chunk_size"),
        "pause_per_batch": max(0.0, _finite(pause_per_batch, "pause_per_batch")),
    }
    if template is not None:
        params["prompt_template"] = template
    lengths = sorted({_int(n, "length") for n in lengths})  # checked even when unused: a typo is not ignored
    if not lengths:
        raise GenerationSettingsError("give at least one length bucket")
    if sample_per_length is not None:
        params["sample_per_length"] = _int(sample_per_length, "sample_per_length")
        params["lengths"] = lengths
    if name:
        name = str(name).strip()
        _check_name_free(name)
        params["name"] = name
    return params


def _check_name_free(name: str) -> None:
    if Resource.objects.filter(name=name).exists():
        raise GenerationSettingsError(f"a resource named {name!r} already exists")
    taken = name_taken(name)  # e.g. annotation: the evaluation sample's campaign takes the name
    if taken:
        raise GenerationSettingsError(taken)


# ------------------------------------------------------------------------------ evaluation sample


def length_bucket(n_tokens: int, lengths: Sequence[int]) -> int:
    """The bucket length nearest to ``n_tokens`` (ties: the shorter bucket)."""
    return min(lengths, key=lambda L: (abs(n_tokens - L), L))


def _sample_order(seed: int, ref_index: int) -> int:
    return int.from_bytes(
        hashlib.blake2b(f"{seed}\x1f{ref_index}".encode(), digest_size=8, person=b"eval-sample").digest(), "big"
    )


def sample_references(
    corpus: Corpus, *, per_length: int, lengths: Sequence[int], seed: int, batch_size: int = 1000
) -> list[dict[str, Any]]:
    """Up to ``per_length`` references per bucket (see the module docstring), bucket by bucket.

    One pass over the corpus with spaCy's tokenizer; memory holds ``per_length`` records per bucket."""
    from .corpora import corpus_records
    from .nlp import load_pipeline

    nlp = load_pipeline(tagger=False)
    heaps: dict[int, list] = {L: [] for L in lengths}

    def consider(batch: list[dict]) -> None:
        for record, doc in zip(batch, nlp.pipe([r["reference"] for r in batch], batch_size=batch_size)):
            n = sum(1 for t in doc if not t.is_space)
            bucket = length_bucket(n, lengths)
            key = (-abs(n - bucket), -_sample_order(seed, record["i"]))  # max-heap on (distance, order)
            item = (
                key,
                record["i"],
                {
                    "i": record["i"],
                    "reference": record["reference"],
                    "source": record.get("source", ""),
                    "length": n,
                    "bucket": bucket,
                },
            )
            heap = heaps[bucket]
            if len(heap) < per_length:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)

    for batch in batched(corpus_records(corpus), batch_size):
        consider(batch)
    out: list[dict[str, Any]] = []
    for L in lengths:
        out += [item[2] for item in sorted(heaps[L], key=lambda it: it[:2], reverse=True)]
    return out


def job_stop_rule(params: dict[str, Any]) -> str:
    """The stopping rule a job decodes under: its own, or "beam" for a job planned before jobs had one (its
    chunks that already ran used Hugging Face's rule, and a resumed job must not mix two)."""
    return params.get("stop") or "beam"


# ------------------------------------------------------------------------------------------ plan


def _plan(job: Job) -> list[dict[str, Any]]:
    params = job.params
    corpus = Corpus.objects.get(pk=params["corpus"])
    table = IdfTable.objects.get(pk=params["idf_table"]) if params.get("idf_table") else None
    checked = generation_params(
        corpus=corpus,
        model=params["model"],
        systems=params.get("systems") or [],
        idf_table=table,
        **{
            k: params[k]
            for k in (
                "beam",
                "nbest",
                "max_length",
                "length_penalty",
                "batch_size",
                "device",
                "dtype",
                "seed",
                "ppdb",
                "sample_per_length",
                "lengths",
                "name",
                "sample_chunk_size",
                "pause_per_batch",
                "stop",
                "prompt_template",
            )
            if params.get(k) is not None
        },
    )
    name = checked.get("name") or f"{corpus.name}-job{job.pk}"
    if "name" not in checked:
        _check_name_free(name)
    checked.update(name=name, model_sha256=model_fingerprint(checked["model"]))
    resource = Resource.objects.create(name=name, corpus=corpus, job=job)
    checked["resource"] = resource.pk
    if "sample_per_length" in checked:
        sample = sample_references(
            corpus, per_length=checked["sample_per_length"], lengths=checked["lengths"], seed=checked["seed"]
        )
        checked["sample"] = {str(L): sum(1 for r in sample if r["bucket"] == L) for L in checked["lengths"]}
        step = checked["sample_chunk_size"]
        chunks = [{"references": sample[k : k + step]} for k in range(0, len(sample), step)]
    else:
        chunks = [{"shard": s.index, "key": s.key, "n_records": s.n_records} for s in corpus.shards.order_by("index")]
    if not chunks:
        raise GenerationSettingsError(f"corpus {corpus.name!r} has no references to decode")
    job.params = checked
    job.save(update_fields=["params"])
    return chunks


# ------------------------------------------------------------------------------------------ chunk

_MODEL_LOCK = threading.Lock()
_MODEL: dict[tuple[str, str | None, str | None, str], Any] = {}
# Windows prepared (tagged, constraints selected) ahead of the one decoding, in a background thread: the
# bounded queue's size; 0: prepare each window only when it is its turn (the sequential version). None:
# 1 where the model is on a GPU, 0 on the CPU, where the decoder itself keeps the cores and the GIL busy
# (bench/generate_chunk.py measured the overlapped chunk slower there: bench/results/generate-chunk-*.txt).
PREPARE_AHEAD: int | None = None
# While a chunk overlaps, the interpreter hands the GIL over every this many seconds (Python's default:
# 0.005). Why: the decoding thread gives the GIL up whenever it waits for the GPU and must get it back as
# soon as the GPU is done; with 5 ms slices it could wait longer than a decoding step takes.
PREPARE_SWITCH_INTERVAL = 0.0002
BATCH_RULE = "given by the job's batch_size"
DEVICE_BATCH_RULE = (
    "follows the device: 32 on the CPU; on a GPU the largest power of two <= half the usable memory over "
    "one sentence's estimated bytes, at most 512 (generation/decoding/batching.py)"
)


def loaded_model(path: str, device: str | None, dtype: str | None = None, prompt_template: dict | None = None):
    """The decoder's model, loaded once per process (one model kept at a time); a decoder-only one with the
    job's ``prompt_template``."""
    from .decoding import load_model

    key = (str(resolve_model_folder(path)), device, dtype, json.dumps(prompt_template, sort_keys=True))
    with _MODEL_LOCK:
        if key not in _MODEL:
            if device == "cuda":
                import torch

                if not torch.cuda.is_available():
                    raise RuntimeError("device 'cuda' was asked for but this worker has no CUDA device")
            _MODEL.clear()
            _MODEL[key] = load_model(key[0], device=device, dtype=dtype, prompt_template=prompt_template)
        return _MODEL[key]


def _chunk_records(chunk: JobChunk) -> Iterator[dict[str, Any]]:
    if "references" in chunk.params:
        return iter(chunk.params["references"])
    return read_jsonl_gz(chunk.params["key"])


def job_decode_options(params: dict[str, Any]) -> DecodeOptions:
    """The decoding options of a job's params (a job planned before some option existed gets the value its
    first chunks ran under: ``job_stop_rule``; no dtype, the device's; no batch_size, the device's rule)."""
    return DecodeOptions.from_values({**params, "stop": job_stop_rule(params)})


@dataclass
class ChunkSetup:
    """What every window of a chunk uses, loaded once per chunk in the worker's own thread (the only one that
    reads the database): the systems, IDF values, PPDB index, spaCy pipeline, model and decoding options
    (``batch_size`` resolved: the job's, or the device's rule, ``batch`` says which)."""

    params: dict[str, Any]
    is_bitext: bool
    systems: list
    idf: Any
    ppdb: Any
    nlp: Any
    model: Any
    options: DecodeOptions
    batch: Any  # decoding.BatchChoice


def chunk_setup(params: dict[str, Any], is_bitext: bool) -> ChunkSetup:
    from .decoding import BatchChoice, default_batch_size
    from .nlp import load_pipeline

    options = job_decode_options(params)
    model = loaded_model(params["model"], options.device, options.dtype, params.get("prompt_template"))
    if model_fingerprint(params["model"]) != params["model_sha256"]:
        raise RuntimeError(f"the weights in {params['model']!r} changed since the job started")
    options = options.on_device(model.device.type)
    if options.batch_size is None:
        batch = default_batch_size(model, options)
        options = options.replace(batch_size=batch.size)
    else:
        batch = BatchChoice(options.batch_size, BATCH_RULE)
    ppdb = None
    if params.get("ppdb"):
        from .ppdb import open_ppdb

        ppdb = open_ppdb(params["ppdb"])
    return ChunkSetup(
        params=params,
        is_bitext=is_bitext,
        systems=resolve_systems(params["systems"]),
        idf=load_idf_table(IdfTable.objects.get(pk=params["idf_table"])),
        ppdb=ppdb,
        nlp=load_pipeline(tagger=True),
        model=model,
        options=options,
        batch=batch,
    )


@dataclass
class PreparedWindow:
    """A window's CPU work before decoding: its output records (candidates still empty), per-system counts
    so far, and each distinct (input, constraints) to decode once, in decoding order (``unique``; ``jobs``:
    (record position, system, constraints, index of its input in ``inputs``))."""

    out_records: list[dict[str, Any]]
    counts: dict[str, dict[str, int]]
    jobs: list[tuple[int, str, dict, int]]
    inputs: dict[tuple[str, str], int]
    unique: list[tuple[str, str]]


def prepare_window(records: list[dict[str, Any]], setup: ChunkSetup) -> PreparedWindow:
    """Tag a window's references with spaCy and select every system's constraints (no database, no model:
    this runs in the background thread while the previous window decodes)."""
    numbers = [str(s.number) for s in setup.systems]
    tagged = tag_sentences([r["reference"] for r in records], nlp=setup.nlp)
    counts = {n: {"outputs": 0, "no_constraints": 0, "unsatisfiable": 0, "empty": 0} for n in numbers}
    out_records, jobs = [], []
    inputs: dict[tuple[str, str], int] = {}
    seed = setup.params["seed"]
    for pos, (record, sentence) in enumerate(zip(records, tagged)):
        out_records.append(
            {
                "ref_index": record["i"],
                "reference": record["reference"],
                "source": record.get("source") or "",
                "length": len(sentence.tokens),
                "candidates": [],
                "no_constraints": [],
            }
        )
        source = record.get("source") if setup.is_bitext else record["reference"]
        for selected in select_for_all_systems(sentence, setup.idf, seed=seed, ppdb=setup.ppdb, systems=setup.systems):
            system = str(selected.system)
            if not selected.is_constraint_set:
                out_records[-1]["no_constraints"].append(system)
                counts[system]["no_constraints"] += 1
                continue
            value = selected.to_json()
            cons = {k: value[k] for k in ("positive", "negative", "bos_avoid")}
            key = (source, json.dumps(cons, sort_keys=True))
            jobs.append((pos, system, cons, inputs.setdefault(key, len(inputs))))
    # Each distinct (input, constraints) is decoded once, shortest inputs first (less padding per batch).
    unique = sorted(inputs, key=lambda k: (len(k[0]), inputs[k]))
    return PreparedWindow(out_records, counts, jobs, inputs, unique)


def decode_window(
    window: PreparedWindow, setup: ChunkSetup, progress: ProgressFn
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Decode a prepared window and merge its outputs into resource records (one per reference) and per-system
    counts. ``progress(decoded, to_decode)`` counts distinct (input, constraints) decodings, after each batch."""
    from .decoding import decode

    unique, counts = window.unique, window.counts
    results: dict[int, Any] = {}
    batch, pause = setup.options.batch_size, float(setup.params.get("pause_per_batch") or 0)
    for k in range(0, len(unique), batch):
        part = unique[k : k + batch]
        decoded = decode(setup.model, [s for s, _ in part], [json.loads(c) for _, c in part], options=setup.options)
        for key, result in zip(part, decoded):
            results[window.inputs[key]] = result
        if pause:
            time.sleep(pause)
        progress(min(k + batch, len(unique)), len(unique))
    merged: list[dict[str, dict]] = [{} for _ in window.out_records]
    for pos, system, cons, index in window.jobs:
        result = results[index]
        if result.unsatisfiable:
            counts[system]["unsatisfiable"] += 1
            continue
        for output in result.outputs:
            text = output["text"]
            if not text.strip():
                counts[system]["empty"] += 1
                continue
            counts[system]["outputs"] += 1
            nll = -float(output["score"])
            entry = merged[pos].setdefault(text, {"text": text, "nll": nll, "systems": [], "constraints": {}})
            entry["nll"] = min(entry["nll"], nll)
            if system not in entry["systems"]:
                entry["systems"].append(system)
                entry["constraints"][system] = cons
    order = {str(s.number): i for i, s in enumerate(sorted(setup.systems, key=lambda s: s.number))}
    for record, entries in zip(window.out_records, merged):
        for entry in entries.values():
            entry["systems"].sort(key=order.__getitem__)
        record["candidates"] = sorted(entries.values(), key=lambda e: (e["nll"], e["text"]))
        record["no_constraints"].sort(key=order.__getitem__)
    return window.out_records, counts


def decode_references(
    records: list[dict[str, Any]], *, params: dict[str, Any], is_bitext: bool, progress: ProgressFn
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Resource records (one per reference) and per-system counts for a window of corpus records, prepared
    and decoded one after the other (a chunk overlaps the two: :func:`prepared_ahead`)."""
    setup = chunk_setup(params, is_bitext)
    return decode_window(prepare_window(records, setup), setup, progress)


_END = object()


def prepared_ahead(items: Iterator[Any], prepare: Callable[[Any], Any], ahead: int) -> Iterator[Any]:
    """``prepare(item)`` for each item, in order. With ``ahead`` > 0 a background thread prepares the next
    items while the caller works on the current one, at most ``ahead`` of them waiting in a bounded queue
    (and one more being prepared): why, a GPU decodes while the CPU tags and selects the next window
    instead of idling through it. An exception in the thread is raised here, at the item it failed on;
    closing this generator (the caller stopped: a cancelled job) stops the thread and waits for it."""
    if ahead <= 0:
        for item in items:
            yield prepare(item)
        return
    ready: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if stop.is_set() or not put((prepare(item), None)):
                    return
            put((_END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            put((None, exc))

    thread = threading.Thread(target=work, name="generate-prepare", daemon=True)
    thread.start()
    try:
        while True:
            value, error = ready.get()
            if error is not None:
                raise error
            if value is _END:
                return
            yield value
    finally:
        stop.set()
        thread.join()


def prepare_ahead_for(device_type: str) -> int:
    """How many windows a chunk prepares ahead of the one decoding (``PREPARE_AHEAD``)."""
    if PREPARE_AHEAD is not None:
        return PREPARE_AHEAD
    return 1 if device_type == "cuda" else 0


@contextlib.contextmanager
def short_gil_slices(seconds: float) -> Iterator[None]:
    """``sys.setswitchinterval`` at most ``seconds`` inside the block, as it was after it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict[str, Any]:
    """Decode a chunk's references window by window (memory stays flat on a 100,000-reference shard) into
    one shard, written atomically: a chunk stopped half-way leaves nothing behind. On a GPU the next window
    is tagged and its constraints selected in a background thread while the current one decodes
    (``PREPARE_AHEAD``); outputs are those of the sequential version (each window's preparation is the same
    whenever it runs)."""
    params = job.params
    setup = chunk_setup(params, Corpus.objects.get(pk=params["corpus"]).format == CorpusFormat.BITEXT)
    total = int(chunk.params.get("n_records") or len(chunk.params.get("references") or ()))
    counts: dict[str, dict[str, int]] = {}
    done = {"references": 0, "pairs": 0}

    ahead = prepare_ahead_for(setup.model.device.type)

    def records() -> Iterator[dict[str, Any]]:
        progress(0, total)
        windows = prepared_ahead(batched(_chunk_records(chunk), WINDOW), lambda w: prepare_window(w, setup), ahead)
        try:
            for window in windows:
                window_size = len(window.out_records)

                def window_progress(decoded: int, of: int, n=window_size) -> None:
                    progress(done["references"] + (n * decoded // of if of else 0), max(total, done["references"] + n))

                out, window_counts = decode_window(window, setup, window_progress)
                for system, n in window_counts.items():
                    row = counts.setdefault(system, dict.fromkeys(n, 0))
                    for key, value in n.items():
                        row[key] += value
                done["references"] += len(out)
                done["pairs"] += sum(len(r["candidates"]) for r in out)
                yield from out
        finally:
            windows.close()

    with short_gil_slices(PREPARE_SWITCH_INTERVAL) if ahead else contextlib.nullcontext():
        written = write_jsonl_gz(candidate_shard_key(job.pk, chunk.index), records())
    with transaction.atomic():
        ResourceShard.objects.update_or_create(
            resource_id=params["resource"],
            index=chunk.index,
            defaults={
                "key": written["key"],
                "n_references": done["references"],
                "n_pairs": done["pairs"],
                "sha256": written["sha256"],
            },
        )
    return {
        "key": written["key"],
        "sha256": written["sha256"],
        "references": done["references"],
        "pairs": done["pairs"],
        "per_system": dict(sorted(counts.items(), key=lambda kv: int(kv[0]))),
        "batch_size": setup.batch.size,
        "batch_rule": setup.batch.rule,
        "dtype": setup.model.dtype,
    }


# ----------------------------------------------------------------------------------------- finish


def _resource_settings(params: dict[str, Any]) -> dict[str, Any]:
    table = IdfTable.objects.filter(pk=params["idf_table"]).first()
    from .nlp import pipeline_signature

    out = {
        "model": params["model"],
        "model_sha256": params["model_sha256"],
        "systems": params["systems"],
        "beam": params["beam"],
        "nbest": params["nbest"],
        "stop": job_stop_rule(params),
        "max_length": params["max_length"],
        "length_penalty": params["length_penalty"],
        "idf_table": params["idf_table"],
        "idf_table_name": table.name if table else None,
        "seed": params["seed"],
        "ppdb": params.get("ppdb"),
        "device": params.get("device"),
        "tokenizer": pipeline_signature(),
    }
    if params.get("prompt_template"):  # a decoder-only model's prompt (shown on the release card)
        out["prompt_template"] = params["prompt_template"]
    if "sample_per_length" in params:
        out.update(
            sample_per_length=params["sample_per_length"], lengths=params["lengths"], sample=params.get("sample")
        )
    return out


def _finish(job: Job, chunks: list[JobChunk]) -> dict[str, Any]:
    params = job.params
    per_system: dict[str, dict[str, int]] = {}
    for c in chunks:
        for system, n in c.result["per_system"].items():
            row = per_system.setdefault(system, dict.fromkeys(n, 0))
            for key, value in n.items():
                row[key] = row.get(key, 0) + value
    with transaction.atomic():  # a failure leaves the resource as it was
        resource = Resource.objects.select_for_update().get(pk=params["resource"])
        resource.n_references = sum(c.result["references"] for c in chunks)
        resource.n_pairs = sum(c.result["pairs"] for c in chunks)
        resource.settings = _resource_settings(params)
        resource.save(update_fields=["n_references", "n_pairs", "settings"])
    return {
        "resource": resource.pk,
        "name": resource.name,
        "references": resource.n_references,
        "pairs": resource.n_pairs,
        "shards": [c.result["key"] for c in chunks],
        "campaign": None,  # an evaluation sample's campaign: filled in by annotation's finish hook
        "per_system": dict(sorted(per_system.items(), key=lambda kv: int(kv[0]))),
        "decoding": _decoding_summary(params, chunks),
    }


def _decoding_summary(params: dict[str, Any], chunks: list[JobChunk]) -> dict[str, Any]:
    """How the chunks decoded: their batch sizes and dtypes (each chunk's own figures are in its result;
    chunks that ran before these were recorded state none)."""
    return {
        "batch_size": sorted({c.result["batch_size"] for c in chunks if "batch_size" in c.result}),
        "batch_rule": BATCH_RULE if params.get("batch_size") else DEVICE_BATCH_RULE,
        "dtype": sorted({c.result["dtype"] for c in chunks if "dtype" in c.result}),
    }


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="gpu", unit="references"))
