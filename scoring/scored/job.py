"""Job kind ``score_resource``: a similarity regressor applied to every pair of a resource (ParaBank §5.1).

One chunk per ``ResourceShard``. A chunk streams its candidate shard, predicts a score for every
candidate in batches of ``batch_size`` pairs (memory holds one batch, never the shard) and writes a
scored shard that mirrors the candidate shard record for record, each candidate gaining ``"score"``
(0-100, or null where the regressor skipped the pair, e.g. a reference over 100 subword tokens).

Outputs are keyed by (scored resource, job, shard index):
``scored/<scored_resource>/job-<job>/shard-<index>.jsonl.gz``, written atomically (storage writes a
temporary file and renames it), so a chunk killed mid-way leaves nothing and a chunk that runs again
rewrites the same bytes. Each chunk's shard entry is its result; ``ScoredResource`` (``job``, ``shards``,
``n_pairs``) always describes the last *completed* scoring: a new scoring replaces it only in its
finishing step, and the replaced files (and any a failed or cancelled scoring left) are deleted
once that commits. Until then releases keep using the previous result, and a failed or cancelled
re-scoring leaves it as it was.

The regressor's ``trained_at`` is recorded when the job starts: a chunk refuses to run if the regressor
was retrained (``train_regressor --replace``) since, so one scoring never mixes two models, and a
release refuses a scoring whose regressor has been retrained (``releases.scoring_for``).

Job params (``scoring.scored.params.ScoreResourceParams``, stored flat): ``resource`` (id), ``regressor`` (name),
``batch_size`` (default 256 on the CPU, 2048 on a GPU), ``throttle_s`` (seconds to sleep after each batch, default
0: a brake for demos and for the fault test that must kill a worker in the middle of a chunk), and where the
embeddings run: ``device`` (``cpu``, ``cuda`` or ``auto``; absent: ``cpu``), ``dtype``, ``encode_batch`` and
``cpu_workers`` (``scoring.scored.device``). ``device`` picks the queue of the job's chunks (``gpu`` for cuda and
auto); each chunk's result says where it was encoded (``encoded_on``, e.g. ``cuda/float16``), and the job's result
lists them. A chunk computes its lexical
features on ``cpu_workers`` processes (absent or null: the worker's ``PARAFORGE_SCORING_CPU_WORKERS`` when it
encodes on a GPU, else 1), beside the encoder; the scores are the same whatever the number.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.db import transaction

from generation.models import Resource, ResourceShard
from infra.shards import read_jsonl_gz, write_jsonl_gz
from infra.storage import get_storage
from jobs.execution import ProgressListener, job_launch
from jobs.models import TERMINAL_STATUSES, Job, JobChunk
from jobs.params import from_values, to_json
from jobs.registry import JobKind, ProgressFn, register
from scoring.models import Regressor, ScoredResource
from scoring.scored.device import ScoringDevice, ScoringDeviceError, encoded_on
from scoring.scored.params import DEFAULT_BATCH_SIZE, ScoreResourceParams, default_batch_size
from scoring.similarity.embeddings import cuda_available, encoding_on
from scoring.similarity.lexical_processes import cpu_workers_on

if TYPE_CHECKING:
    import numpy as np

KIND = "score_resource"


class PairScorer(Protocol):
    """What scoring needs of a regressor (``scoring.regressor.FittedRegressor`` is one)."""

    def predict(self, pairs: list[dict[str, Any]]) -> np.ndarray: ...


def scored_shard_key(scored_resource_id: int, index: int, job_id: int) -> str:
    return f"scored/{scored_resource_id}/job-{job_id}/shard-{index:05d}.jsonl.gz"


def regressor_version(signature: dict | None) -> float | None:
    """What tells two trainings of one regressor name apart (``train_regressor --replace``)."""
    return (signature or {}).get("trained_at")


def pair_of(record: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """The regressor's input for one candidate of a shard record."""
    return {
        "reference": record["reference"],
        "paraphrase": candidate["text"],
        "nll": candidate.get("nll"),
        "constraints": candidate.get("constraints") or {},
    }


def _score_value(x: float) -> float | None:
    """JSON-safe score: null for a skipped pair (NaN), else clipped to 0-100 and rounded to 1e-4."""
    x = float(x)
    if not math.isfinite(x):
        return None
    return round(min(100.0, max(0.0, x)), 4)


def score_records(
    records: Iterable[dict[str, Any]],
    *,
    regressor: PairScorer,
    batch_size: int = DEFAULT_BATCH_SIZE,
    throttle_s: float = 0.0,
    progress: Callable[[int], None] | None = None,
    counts: dict[str, int] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each record with every candidate gaining ``"score"``; predicts in batches of about
    ``batch_size`` pairs (whole records: a batch never splits a reference). ``counts`` (if given) gets
    ``pairs`` and ``skipped``; ``progress`` is called with the number of pairs scored so far."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    counts = counts if counts is not None else {}
    counts.setdefault("pairs", 0)
    counts.setdefault("skipped", 0)
    pending: list[dict[str, Any]] = []
    n_pending = 0

    def flush() -> None:
        import numpy as np  # loaded when a resource is scored, not with the app (issue 37)

        pairs = [pair_of(r, c) for r in pending for c in r.get("candidates") or []]
        scores = np.asarray(regressor.predict(pairs), dtype=float) if pairs else np.zeros(0)
        if scores.shape != (len(pairs),):
            raise ValueError(f"the regressor returned {scores.shape} scores for {len(pairs)} pairs")
        it = iter(scores)
        for r in pending:
            for c in r.get("candidates") or []:
                c["score"] = _score_value(next(it))
                counts["skipped"] += c["score"] is None
        counts["pairs"] += len(pairs)
        if progress is not None:
            progress(counts["pairs"])
        if throttle_s and pairs:
            time.sleep(throttle_s)

    for record in records:
        pending.append(record)
        n_pending += len(record.get("candidates") or [])
        if n_pending >= batch_size:
            flush()
            yield from pending
            pending, n_pending = [], 0
    if pending:
        flush()
        yield from pending


def score_shard(
    *,
    shard: ResourceShard,
    scored: ScoredResource,
    job_id: int,
    regressor: PairScorer,
    batch_size: int = DEFAULT_BATCH_SIZE,
    throttle_s: float = 0.0,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write the scored copy of one candidate shard for job ``job_id``. Returns the shard entry
    ``{"index", "key", "n_pairs", "n_skipped", "sha256"}`` (the chunk's result; the finishing step puts
    the entries on the ScoredResource)."""
    storage = get_storage()
    key = scored_shard_key(scored.pk, shard.index, job_id)
    counts: dict[str, int] = {}
    records = score_records(
        read_jsonl_gz(shard.key, storage=storage),
        regressor=regressor,
        batch_size=batch_size,
        throttle_s=throttle_s,
        progress=progress,
        counts=counts,
    )
    info = write_jsonl_gz(key, records, storage=storage)
    return {
        "index": shard.index,
        "key": key,
        "n_pairs": counts["pairs"],
        "n_skipped": counts["skipped"],
        "sha256": info["sha256"],
    }


def scoring_job_running(*, resource_id: int, regressor_name: str, exclude_job: int | None = None) -> Job | None:
    """The unfinished scoring job of this resource by this regressor, if any."""
    jobs = Job.objects.filter(kind=KIND, params__resource=resource_id, params__regressor=regressor_name)
    jobs = jobs.exclude(status__in=TERMINAL_STATUSES)
    if exclude_job is not None:
        jobs = jobs.exclude(pk=exclude_job)
    return jobs.order_by("-pk").first()


def _scored_of(job: Job, *, for_update: bool = False) -> ScoredResource:
    """The row a scoring job fills: one per (resource, regressor), found from the job's params."""
    rows = ScoredResource.objects.select_related("resource", "regressor")
    if for_update:
        rows = rows.select_for_update()
    return rows.get(resource_id=job.params["resource"], regressor__name=job.params["regressor"])


def score_start_check(*, resource: Resource, regressor: Regressor) -> None:
    """Whether a scoring can succeed, checked before any job is queued: the resource has candidate shards, and
    this installation can apply the regressor (its model file loads, with the encoder head it was trained
    with, and this code computes the features it was trained on). A ValueError (``RegressorError`` is one)
    naming what is missing. The job's plan and the admin's form both call it."""
    from scoring.regressor import RegressorError, regressor_load  # numpy: once a scoring is asked for
    from scoring.similarity.features import feature_names

    if not resource.shards.exists():
        raise ValueError(f"resource {resource.name!r} has no candidate shards yet: generate it first")
    fitted = regressor_load(regressor.name)  # (cached per process)
    trained_on = getattr(fitted, "features", None)  # (a PairScorer that is not a FittedRegressor has none)
    if trained_on is not None and list(trained_on) != feature_names(
        with_embeddings=fitted.with_embeddings, families=fitted.families
    ):
        raise RegressorError(
            f"regressor {regressor.name!r} was trained on other features than this code computes: retrain it"
        )


def _plan(job: Job) -> list[dict]:
    try:
        resource = Resource.objects.get(pk=job.params["resource"])
    except Resource.DoesNotExist:
        raise ValueError(f"no resource with id {job.params['resource']!r}") from None
    try:
        regressor = Regressor.objects.get(name=job.params["regressor"])
    except Regressor.DoesNotExist:
        raise ValueError(f"no regressor named {job.params['regressor']!r}") from None
    score_start_check(resource=resource, regressor=regressor)
    shards = list(resource.shards.order_by("index"))
    ScoredResource.objects.select_for_update().get_or_create(resource=resource, regressor=regressor)
    other = scoring_job_running(resource_id=resource.pk, regressor_name=regressor.name, exclude_job=job.pk)
    if other is not None:
        raise ValueError(
            f"resource {resource.name!r} is already being scored by {regressor.name!r} in job "
            f"{other.pk}; resume that job (manage.py job resume {other.pk}) instead"
        )
    job.params = {**job.params, "regressor_trained_at": regressor_version(regressor.signature)}
    job.save(update_fields=["params"])
    return [{"shard": s.pk, "index": s.index, "key": s.key, "n_pairs": s.n_pairs} for s in shards]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    from scoring.regressor import regressor_load  # numpy, scikit-learn and the encoder: in the worker

    scored = _scored_of(job)
    shard = ResourceShard.objects.get(pk=chunk.params["shard"])
    total = shard.n_pairs
    progress(0, total)
    params = from_values(ScoreResourceParams, job.params)  # (a key stored before its option existed: the default)
    device = params.device  # (torch is asked about CUDA only by a job that wants a GPU)
    placement = device.placement(cuda_available=device.queue == "gpu" and cuda_available())
    workers = device.chunk_cpu_workers(placement, worker_default=settings.PARAFORGE_SCORING_CPU_WORKERS)
    regressor = regressor_load(params.regressor)
    if regressor_version(getattr(regressor, "signature", None)) != job.params.get("regressor_trained_at"):
        raise ValueError(
            f"regressor {params.regressor!r} was retrained since job {job.pk} started; score the resource again"
        )
    with encoding_on(placement), cpu_workers_on(workers):
        entry = score_shard(
            shard=shard,
            scored=scored,
            job_id=job.pk,
            regressor=regressor,
            batch_size=params.prediction_batch,
            throttle_s=params.throttle_s,
            progress=lambda done: progress(done, max(total, done)),
        )
    return {**entry, "encoded_on": encoded_on(placement)}


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    """Make this job's shards the scoring of record; the replaced files (and those of failed or cancelled
    scorings) go once that commits."""
    scored = _scored_of(job, for_update=True)
    scored.job = job
    # the shard entries are score_shard's; where each chunk was encoded goes to the job's result
    entries = [{k: v for k, v in c.result.items() if k != "encoded_on"} for c in chunks]
    scored.shards = sorted(entries, key=lambda e: e["index"])
    scored.n_pairs = sum(e["n_pairs"] for e in scored.shards)
    scored.save(update_fields=["job", "shards", "n_pairs"])
    keep = {e["key"] for e in scored.shards}
    transaction.on_commit(lambda: _delete_other_files(scored.pk, keep))
    return {
        "scored_resource": scored.pk,
        "resource": scored.resource.name,
        "regressor": scored.regressor.name,
        "regressor_trained_at": job.params.get("regressor_trained_at"),
        "n_pairs": scored.n_pairs,
        "n_skipped": sum(e.get("n_skipped", 0) for e in scored.shards),
        "shards": len(scored.shards),
        "encoded_on": sorted({c.result.get("encoded_on", "cpu/float32") for c in chunks}),
    }


def _delete_other_files(scored_resource_id: int, keep: set[str]) -> None:
    """No other scoring of this row can be under way: one job at a time per (resource, regressor)."""
    storage = get_storage()
    folder = f"scored/{scored_resource_id}/"
    for key in storage.list(folder.rstrip("/")):
        if key.startswith(folder) and key not in keep:  # (an S3 prefix "scored/1" also lists "scored/12/...")
            storage.delete(key)


def scoring_device(values: Mapping[str, Any] | None = None) -> ScoringDevice:
    """The device a new scoring asks for, from ``values`` (a command's options, a cleaned form: ``device``,
    ``dtype``, ``encode_batch``, ``cpu_workers``); without a ``device``, the installation's
    ``PARAFORGE_SCORING_DEVICE``."""
    values = values or {}
    if values.get("device"):
        return from_values(ScoringDevice, values)
    try:
        return from_values(ScoringDevice, values, device=settings.PARAFORGE_SCORING_DEVICE or "cpu")
    except ScoringDeviceError as exc:
        raise ScoringDeviceError(f"PARAFORGE_SCORING_DEVICE={settings.PARAFORGE_SCORING_DEVICE!r}: {exc}") from None


def score_resource_launch(
    *,
    resource: Resource,
    regressor: Regressor,
    wait: bool = False,
    batch_size: int | None = None,
    throttle_s: float = 0.0,
    device: ScoringDevice | None = None,
    timeout: float | None = None,
    on_progress: ProgressListener | None = None,
) -> Job:
    """Start (and with ``wait`` run or wait for) the scoring of ``resource`` by ``regressor``. ``device``
    (None: ``PARAFORGE_SCORING_DEVICE``'s) picks the queue and the encoder's arithmetic; ``batch_size`` (None:
    the device's, ``default_batch_size``)."""
    device = device or scoring_device()
    params = ScoreResourceParams(
        resource=resource.pk,
        regressor=regressor.name,
        batch_size=default_batch_size(device) if batch_size is None else batch_size,  # (stored: kept if resumed)
        throttle_s=throttle_s,
        device=device,
    )
    return job_launch(
        kind=KIND,
        params=to_json(params),
        label=f"score {resource.name} with {regressor.name}",
        wait=wait,
        timeout=timeout,
        on_progress=on_progress,
    )


def chunks_queue(params: dict[str, Any]) -> str:
    """The queue of a scoring job's chunks: ``gpu`` when its device asks for a GPU, else ``cpu``."""
    return from_values(ScoringDevice, params).queue


register(
    JobKind(
        name=KIND,
        plan=_plan,
        run_chunk=_run_chunk,
        finish=_finish,
        queue="cpu",
        unit="pairs",
        queue_for=chunks_queue,
    )
)
