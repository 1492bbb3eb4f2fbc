"""The ``generate`` job kind: plan, run a chunk, finish (the settings: :mod:`.params`; a chunk's decoding:
:mod:`.pipeline`; the evaluation sample: :mod:`.sample`).

The ``Resource`` row is created with the job (``plan``), which also records the model's weights hash, so
that every chunk (and a resumed job) decodes with the same weights. Chunks: one per corpus shard, or one
per slice of the sample (``sample_chunk_size`` references). A chunk writes ONE candidate shard at
``candidates/<job>/shard-<chunk>.jsonl.gz`` in the record format of :class:`generation.models.Resource`,
atomically (a chunk stopped half-way leaves nothing behind), then upserts its ``ResourceShard``. A chunk
that runs again rewrites the same file and the same row. ``finish`` sums the chunks into the resource and
records its settings; annotation's finish hook turns an evaluation sample into a campaign.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import transaction

from infra.shards import write_jsonl_gz
from jobs.models import Job, JobChunk
from jobs.params import from_values, to_json
from jobs.registry import JobKind, ProgressFn, register

from ..constraints.systems import system_sort_key
from ..decode_options import BEAM_ONLY, DIVERSE_SHARED
from ..gguf_source import model_origin
from ..model_source import ModelFolderError, model_folder
from ..models import Corpus, CorpusFormat, IdfTable, Resource, ResourceShard
from ..nlp import pipeline_signature
from . import KIND
from .cancel import job_stop_check, stopped_as_cancelled
from .diverse_chunk import DEVICE_INPUTS_RULE, DiverseSetup, diverse_records, diverse_setup
from .params import (
    NOT_WITH_DIVERSE,
    GenerateParams,
    GenerationSettingsError,
    check_name_free,
    checked_fingerprint,
    generate_params_checked,
    job_stop_rule,
    job_systems,
)
from .pipeline import (
    BATCH_RULE,
    DEVICE_BATCH_RULE,
    PREPARE_SWITCH_INTERVAL,
    ChunkTally,
    chunk_records,
    chunk_setup,
    decoded_windows,
    prepare_ahead_for,
    short_gil_slices,
)
from .sample import sample_references


def candidate_shard_key(job_id: int, chunk_index: int) -> str:
    return f"candidates/{job_id}/shard-{chunk_index:05d}.jsonl.gz"


def plan(job: Job) -> list[dict[str, Any]]:
    """Check the job's settings again (as stored: ``jobs.params.from_values``), create its resource, record
    the weights hash (a diverse job's backward model's too) and the name, draw the sample; one chunk per corpus
    shard or per slice of the sample."""
    settings = generate_params_checked(from_values(GenerateParams, job.params))
    corpus = Corpus.objects.get(pk=settings.corpus)
    name = settings.name or f"{corpus.name}-job{job.pk}"
    if settings.name is None:
        check_name_free(name)
    params = {**to_json(settings), "name": name, "model_sha256": checked_fingerprint(settings.model)}
    if settings.backward_model:
        params["backward_model_sha256"] = checked_fingerprint(settings.backward_model)
    params["resource"] = Resource.objects.create(name=name, corpus=corpus, job=job).pk
    if settings.sample_per_length is not None:
        sample = sample_references(
            corpus, per_length=settings.sample_per_length, lengths=settings.lengths, seed=settings.seed
        )
        params["sample"] = {str(L): sum(1 for r in sample if r["bucket"] == L) for L in settings.lengths}
        step = settings.sample_chunk_size
        chunks = [{"references": sample[k : k + step]} for k in range(0, len(sample), step)]
    else:
        chunks = [{"shard": s.index, "key": s.key, "n_records": s.n_records} for s in corpus.shards.order_by("index")]
    if not chunks:
        raise GenerationSettingsError(f"corpus {corpus.name!r} has no references to decode")
    job.params = params
    job.save(update_fields=["params"])
    return chunks


def run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict[str, Any]:
    """Decode a chunk's references window by window (:func:`.pipeline.decoded_windows`) into one shard,
    written atomically. On a GPU the next window is tagged and its constraints selected in a background
    thread while the current one decodes (``PREPARE_AHEAD``), the GIL handed over in short slices. A diverse
    job's chunk: :func:`run_diverse_chunk`. A cancel stops the decoder within a step (:mod:`.cancel`)."""
    params = job.params
    is_bitext = Corpus.objects.get(pk=params["corpus"]).format == CorpusFormat.BITEXT
    total = int(chunk.params.get("n_records") or len(chunk.params.get("references") or ()))
    tally = ChunkTally()
    should_stop = job_stop_check(job.pk)
    if params.get("diverse"):
        setup = diverse_setup(params, is_bitext, should_stop)
        with stopped_as_cancelled(job.pk):
            return run_diverse_chunk(job, chunk, setup, progress, total, tally)
    setup = chunk_setup(params, is_bitext, should_stop)
    ahead = prepare_ahead_for(setup.model.device.type)
    records = decoded_windows(chunk_records(chunk), setup, progress, total, tally, ahead)
    gil = short_gil_slices(PREPARE_SWITCH_INTERVAL) if ahead else contextlib.nullcontext()
    with gil, stopped_as_cancelled(job.pk):
        written = write_jsonl_gz(candidate_shard_key(job.pk, chunk.index), records)
    shard_row(job, chunk, written, tally)
    return chunk_result(
        written, tally, batch_size=setup.batch.size, batch_rule=setup.batch.rule, dtype=setup.model.dtype
    )


def run_diverse_chunk(
    job: Job, chunk: JobChunk, setup: DiverseSetup, progress: ProgressFn, total: int, tally: ChunkTally
) -> dict[str, Any]:
    """A diverse job's chunk (:mod:`.diverse_chunk`): one shard written atomically, as any chunk's; its result
    adds the engine's counts (``diverse``: what became of the samples, and ``fewer_than_keep``)."""
    records = diverse_records(chunk_records(chunk), setup, progress, total, tally)
    written = write_jsonl_gz(candidate_shard_key(job.pk, chunk.index), records)
    shard_row(job, chunk, written, tally)
    return chunk_result(
        written,
        tally,
        batch_size=setup.inputs_per_batch,
        batch_rule=setup.batch_rule,
        dtype=setup.model.dtype,
        diverse=dict(sorted(tally.diverse.items())),
    )


def chunk_result(written: dict[str, Any], tally: ChunkTally, **decoding: Any) -> dict[str, Any]:
    """A chunk's result, either mode: its shard, what it holds, and how it decoded (``decoding``: batch size and
    rule, dtype, and a diverse chunk's counts)."""
    return {
        "key": written["key"],
        "sha256": written["sha256"],
        "references": tally.references,
        "pairs": tally.pairs,
        "per_system": by_system(tally.per_system),
        **decoding,
    }


def shard_row(job: Job, chunk: JobChunk, written: dict[str, Any], tally: ChunkTally) -> None:
    """The chunk's ``ResourceShard``: created, or (a chunk that ran again) updated to the same values."""
    with transaction.atomic():
        ResourceShard.objects.update_or_create(
            resource_id=job.params["resource"],
            index=chunk.index,
            defaults={
                "key": written["key"],
                "n_references": tally.references,
                "n_pairs": tally.pairs,
                "sha256": written["sha256"],
            },
        )


def by_system(per_system: dict[str, Any]) -> dict[str, Any]:
    """``per_system`` in the order systems are listed (numbers, then ranks: ``generation.constraints.systems``)."""
    return dict(sorted(per_system.items(), key=lambda kv: system_sort_key(kv[0])))


# ----------------------------------------------------------------------------------------- finish


# The job's settings that a resource's card leaves out: how the job was run, not how its text was made (the
# corpus and the name are the resource's own fields; batching, chunking and pauses change no output). Every other
# setting of GenerateParams is on the card as the job stored it, a new one included.
CARD_LEAVES_OUT = ("corpus", "name", "batch_size", "sample_chunk_size", "pause_per_batch")


def resource_settings(params: dict[str, Any]) -> dict[str, Any]:
    """What the resource records of how it was made (the release card reads it): the job's settings as it
    decoded them (``GenerateParams`` read back from the job and written by ``to_json``, less
    :data:`CARD_LEAVES_OUT`; ``stop``: :func:`job_stop_rule`), and the facts computed when it ran: the weights'
    hashes, the IDF table's name, the tokenizer's version, a GGUF model's origin and the evaluation sample. A
    diverse job's card groups its own options under ``diverse`` and has none of beam search's or the constraint
    systems' settings (it took none); its systems are the ranks."""
    settings = from_values(GenerateParams, {**params, "stop": job_stop_rule(params)})
    out = {k: v for k, v in to_json(settings).items() if k not in CARD_LEAVES_OUT}
    out.update(model_sha256=params["model_sha256"], tokenizer=pipeline_signature())
    if settings.diverse:
        options = to_json(settings.diverse_options)
        dropped = {*BEAM_ONLY, *NOT_WITH_DIVERSE, *options}
        out = {k: v for k, v in out.items() if k not in dropped or k in DIVERSE_SHARED}
        out.update(
            systems=job_systems(params),
            diverse={k: v for k, v in options.items() if k not in DIVERSE_SHARED},
            backward_model=params.get("backward_model"),
            backward_model_sha256=params.get("backward_model_sha256"),
        )
    else:
        table = IdfTable.objects.filter(pk=params["idf_table"]).first()
        out["idf_table_name"] = table.name if table else None
        if params.get("backward_model"):  # (ordered each beam: its weights' hash beside the model's)
            out["backward_model_sha256"] = params.get("backward_model_sha256")
    _add_model_origin(out, params)
    if "sample_per_length" in params:
        out["sample"] = params.get("sample")
    return out


def _add_model_origin(out: dict[str, Any], params: dict[str, Any]) -> None:
    """A model converted from a GGUF file: what the file said of itself (its licence above all), for the cards."""
    try:
        origin = model_origin(model_folder(params["model"]))
    except ModelFolderError:
        origin = None
    if origin:
        out["model_origin"] = origin


def finish(job: Job, chunks: list[JobChunk]) -> dict[str, Any]:
    """Sum the chunks into the resource (in one transaction) and the job's result."""
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
        resource.settings = resource_settings(params)
        resource.save(update_fields=["n_references", "n_pairs", "settings"])
    out = {
        "resource": resource.pk,
        "name": resource.name,
        "references": resource.n_references,
        "pairs": resource.n_pairs,
        "shards": [c.result["key"] for c in chunks],
        "campaign": None,  # an evaluation sample's campaign: filled in by annotation's finish hook
        "per_system": by_system(per_system),
        "decoding": decoding_summary(params, chunks),
    }
    if params.get("diverse"):
        counts: dict[str, int] = {}
        for c in chunks:
            for key, n in c.result.get("diverse", {}).items():
                counts[key] = counts.get(key, 0) + n
        out["diverse"] = dict(sorted(counts.items()))
    return out


def decoding_summary(params: dict[str, Any], chunks: list[JobChunk]) -> dict[str, Any]:
    """How the chunks decoded: their batch sizes and dtypes (each chunk's own figures are in its result;
    chunks that ran before these were recorded state none)."""
    return {
        "batch_size": sorted({c.result["batch_size"] for c in chunks if "batch_size" in c.result}),
        "batch_rule": BATCH_RULE
        if params.get("batch_size")
        else (DEVICE_INPUTS_RULE if params.get("diverse") else DEVICE_BATCH_RULE),
        "dtype": sorted({c.result["dtype"] for c in chunks if "dtype" in c.result}),
    }


register(JobKind(name=KIND, plan=plan, run_chunk=run_chunk, finish=finish, queue="gpu", unit="references"))
