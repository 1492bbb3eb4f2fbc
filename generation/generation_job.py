"""Job kind ``generate`` (``gpu`` queue): decode a corpus (or its evaluation sample) under ParaBank systems.

Params (validated by :func:`generation_params`, which the CLI and any other caller use before starting):
``corpus`` (id), ``model`` (a local Hugging Face seq2seq folder the workers can read, or a hub id such as
``Helsinki-NLP/opus-mt-cs-en`` that they find in, or fetch into, their Hugging Face cache), ``systems``
(numbers, Tab. 3), ``idf_table`` (id; default the corpus's latest), ``beam`` (5), ``nbest`` (1),
``max_length`` (128), ``length_penalty`` (1.0), ``stop`` ("auto": when a sentence's search ends, see
``generation.decoding.decode``; a job planned before it existed has none and keeps "beam", the rule its
first chunks ran under), ``batch_size`` (32), ``device`` (None: CUDA when the
worker has it), ``seed`` (0), ``ppdb`` (PPDB 2.0 file, needed by 35-37), ``name`` (the Resource's; default
``<corpus>-job<id>``), ``sample_per_length`` + ``lengths`` (the evaluation sample; absent = the whole
corpus), ``sample_chunk_size`` (references per chunk of a sample, 50) and ``pause_per_batch`` (seconds to
sleep after each decoded batch, 0: throttles a GPU shared with other work; the fault test uses it to kill a
worker mid-chunk).

The ``Resource`` row is created with the job (``plan``), which also records the model's weights hash, so
that every chunk (and a resumed job) decodes with the same weights. Chunks: one per corpus shard, or one
per slice of the sample. A chunk tags its references with spaCy, selects each system's constraints
(:mod:`generation.constraints`), decodes every distinct (input, constraints) once, merges identical outputs
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

import hashlib
import heapq
import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from infra.shards import batched, read_jsonl_gz, write_jsonl_gz
from jobs.models import Job, JobChunk
from jobs.registry import JobKind, ProgressFn, register

from .beam_sizes import STOP_DEFAULT, beam_nbest_error, stop_rule_error
from .constraint_job import load_idf_table
from .constraints import resolve_systems, select_for_all_systems, tag_sentences
from .hooks import name_taken
from .model_source import ModelFolderError, model_folder
from .models import Corpus, CorpusFormat, CorpusStatus, IdfTable, Resource, ResourceShard
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


def _check_model_folder(path: str) -> None:
    folder = resolve_model_folder(path)
    if not folder.is_dir():
        raise GenerationSettingsError(f"model folder {path!r} is not a folder")
    if not (folder / "config.json").is_file():
        raise GenerationSettingsError(f"model folder {path!r} has no config.json (not a Hugging Face checkpoint)")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GenerationSettingsError(f"model folder {path!r}: unreadable config.json ({exc})") from None
    if not config.get("is_encoder_decoder"):
        raise GenerationSettingsError(f"model folder {path!r} is not an encoder-decoder (seq2seq) model")


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
    batch_size: int = 32,
    device: str | None = None,
    seed: int = 0,
    ppdb: str | None = None,
    sample_per_length: int | None = None,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    name: str | None = None,
    sample_chunk_size: int = 50,
    pause_per_batch: float = 0.0,
    stop: str = STOP_DEFAULT,
) -> dict[str, Any]:
    """Check every setting (nothing is created) and return the job's params. Raises GenerationSettingsError."""
    if corpus.status != CorpusStatus.READY:
        raise GenerationSettingsError(f"corpus {corpus.name!r} is {corpus.status}, not ready")
    _check_model_folder(model)
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
    beam, nbest = _int(beam, "beam"), _int(nbest, "nbest")
    problem = beam_nbest_error(beam, nbest) or stop_rule_error(stop)
    if problem:
        raise GenerationSettingsError(problem)
    if device not in (None, "", "cpu", "cuda"):
        raise GenerationSettingsError(f"device must be cpu or cuda, not {device!r}")
    params: dict[str, Any] = {
        "corpus": corpus.pk,
        "model": str(model),
        "systems": numbers,
        "idf_table": idf_table.pk,
        "beam": beam,
        "nbest": nbest,
        "stop": stop,
        "max_length": _int(max_length, "max_length", 2),
        "length_penalty": _finite(length_penalty, "length_penalty"),
        "batch_size": _int(batch_size, "batch_size"),
        "device": device or None,
        "seed": _int(seed, "seed", 0),
        "ppdb": str(ppdb) if ppdb else None,
        "sample_chunk_size": _int(sample_chunk_size, "sample_chunk_size"),
        "pause_per_batch": max(0.0, _finite(pause_per_batch, "pause_per_batch")),
    }
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
                "seed",
                "ppdb",
                "sample_per_length",
                "lengths",
                "name",
                "sample_chunk_size",
                "pause_per_batch",
                "stop",
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
_MODEL: dict[tuple[str, str | None], Any] = {}


def loaded_model(path: str, device: str | None):
    """The decoder's model, loaded once per process (one model kept at a time)."""
    from .decoding import load_model

    key = (str(resolve_model_folder(path)), device)
    with _MODEL_LOCK:
        if key not in _MODEL:
            if device == "cuda":
                import torch

                if not torch.cuda.is_available():
                    raise RuntimeError("device 'cuda' was asked for but this worker has no CUDA device")
            _MODEL.clear()
            _MODEL[key] = load_model(key[0], device=device)
        return _MODEL[key]


def _chunk_records(chunk: JobChunk) -> Iterator[dict[str, Any]]:
    if "references" in chunk.params:
        return iter(chunk.params["references"])
    return read_jsonl_gz(chunk.params["key"])


def decode_references(
    records: list[dict[str, Any]], *, params: dict[str, Any], is_bitext: bool, progress: ProgressFn
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Resource records (one per reference) and per-system counts for a window of corpus records.

    ``progress(decoded, to_decode)`` counts distinct (input, constraints) decodings, after each batch."""
    from .decoding import decode
    from .nlp import load_pipeline

    systems = resolve_systems(params["systems"])
    numbers = [str(s.number) for s in systems]
    model = loaded_model(params["model"], params.get("device"))
    if model_fingerprint(params["model"]) != params["model_sha256"]:
        raise RuntimeError(f"the weights in {params['model']!r} changed since the job started")
    idf = load_idf_table(IdfTable.objects.get(pk=params["idf_table"]))
    ppdb = None
    if params.get("ppdb"):
        from .ppdb import open_ppdb

        ppdb = open_ppdb(params["ppdb"])
    tagged = tag_sentences([r["reference"] for r in records], nlp=load_pipeline(tagger=True))
    counts = {n: {"outputs": 0, "no_constraints": 0, "unsatisfiable": 0, "empty": 0} for n in numbers}
    out_records, jobs = [], []  # jobs: (record position, system, constraints, input key)
    inputs: dict[tuple[str, str], int] = {}
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
        source = record.get("source") if is_bitext else record["reference"]
        for selected in select_for_all_systems(sentence, idf, seed=params["seed"], ppdb=ppdb, systems=systems):
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
    results: dict[int, Any] = {}
    batch, pause = int(params["batch_size"]), float(params.get("pause_per_batch") or 0)
    for k in range(0, len(unique), batch):
        part = unique[k : k + batch]
        decoded = decode(
            model,
            [s for s, _ in part],
            [json.loads(c) for _, c in part],
            beam=params["beam"],
            nbest=params["nbest"],
            max_length=params["max_length"],
            stop=job_stop_rule(params),
            length_penalty=params["length_penalty"],
            batch_size=batch,
        )
        for key, result in zip(part, decoded):
            results[inputs[key]] = result
        if pause:
            time.sleep(pause)
        progress(min(k + batch, len(unique)), len(unique))
    merged: list[dict[str, dict]] = [{} for _ in records]
    for pos, system, cons, index in jobs:
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
    order = {n: i for i, n in enumerate(sorted(numbers, key=int))}
    for record, entries in zip(out_records, merged):
        for entry in entries.values():
            entry["systems"].sort(key=order.__getitem__)
        record["candidates"] = sorted(entries.values(), key=lambda e: (e["nll"], e["text"]))
        record["no_constraints"].sort(key=order.__getitem__)
    return out_records, counts


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict[str, Any]:
    """Decode a chunk's references window by window (memory stays flat on a 100,000-reference shard) into
    one shard, written atomically: a chunk stopped half-way leaves nothing behind."""
    params = job.params
    is_bitext = Corpus.objects.get(pk=params["corpus"]).format == CorpusFormat.BITEXT
    total = int(chunk.params.get("n_records") or len(chunk.params.get("references") or ()))
    counts: dict[str, dict[str, int]] = {}
    done = {"references": 0, "pairs": 0}

    def records() -> Iterator[dict[str, Any]]:
        progress(0, total)
        for window in batched(_chunk_records(chunk), WINDOW):
            window_size = len(window)

            def window_progress(decoded: int, of: int, n=window_size) -> None:
                progress(done["references"] + (n * decoded // of if of else 0), max(total, done["references"] + n))

            out, window_counts = decode_references(window, params=params, is_bitext=is_bitext, progress=window_progress)
            for system, n in window_counts.items():
                row = counts.setdefault(system, dict.fromkeys(n, 0))
                for key, value in n.items():
                    row[key] += value
            done["references"] += len(out)
            done["pairs"] += sum(len(r["candidates"]) for r in out)
            yield from out

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
    }


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="gpu", unit="references"))
