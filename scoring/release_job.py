"""Job kind ``export_release``: the admin's "export release" runs the export in a worker, not in the request.

One chunk. Params: ``resource`` (id), ``version`` (``releases.release_version_check``), ``format`` (tsv,
jsonl, parquet), ``filters`` (the ``--filters`` text), ``min_score``, ``regressor`` (name or null),
``license`` (an SPDX id; null: NOASSERTION, said so on the card), ``keep_copies`` (keep paraphrases identical
to their reference; absent in older jobs: false), ``keep_non_words`` (keep, marked, paraphrases with a
non-word, ``generation.screening``; absent: false), ``entailment_model`` (an NLI model folder the workers
can read, under ``PARAFORGE_MODEL_ROOTS``, for ``entailment=``; checked when the job starts, loaded only in
the worker). The files are written to a temporary folder and copied to the configured storage under
``releases/<resource id>/<version>/`` (the Release's location).

One export per version: a job is refused when it starts if the version exists or another export of it is
queued or running (checked with the resource's row locked, so of two starts at once the second sees the
first). A chunk that runs again finds the Release row it made (``Release.job``) and returns it instead of
exporting twice; a row of that version made by anything else fails the job.
"""

from __future__ import annotations

import tempfile

from django.conf import settings

from generation.models import Resource
from jobs.models import Job, JobChunk, JobStatus
from jobs.registry import JobKind, ProgressFn, register

from .models import Release
from .release_filters import parse_filters
from .releases import (
    ReleaseError,
    card_license,
    next_version,
    release_export,
    release_license_check,
    release_version_check,
    release_version_free,
    scoring_for,
)

KIND = "export_release"


def release_storage_url(resource: Resource, version: str) -> str:
    return f"{settings.PARAFORGE_STORAGE_URL.rstrip('/')}/releases/{resource.pk}/{version}"


def _claim_version(job: Job) -> None:
    """ReleaseError unless ``job`` is the only export of its version: none exists, none is queued or running.
    Runs in ``job_start``'s transaction with the resource's row locked: a second start of the same version
    waits for the first to commit, then sees its job."""
    resource = Resource.objects.select_for_update().get(pk=job.params["resource"])
    version = release_version_check(job.params.get("version"))
    release_version_free(resource, version)
    other = (
        Job.objects.filter(kind=KIND, params__resource=resource.pk, params__version=version)
        .exclude(pk=job.pk)
        .filter(status__in=(JobStatus.PENDING, JobStatus.RUNNING))
        .order_by("pk")
        .first()
    )
    if other is not None:
        raise ReleaseError(
            f"release {version!r} of {resource.name!r} is already being exported in job {other.pk}: "
            f"wait for it, or choose another version"
        )


def _plan(job: Job) -> list[dict]:
    _claim_version(job)
    resource = Resource.objects.get(pk=job.params["resource"])
    parse_filters(
        job.params.get("filters") or "",
        min_score=job.params.get("min_score"),  # fail early
        entailment_model=job.params.get("entailment_model"),
        load_model=False,
        confined=True,
        keep_copies=bool(job.params.get("keep_copies")),
        keep_non_words=bool(job.params.get("keep_non_words")),
    )
    scored = scoring_for(resource, job.params.get("regressor"))
    release_license_check(scored, card_license(job.params.get("format") or "tsv", job.params.get("license")))
    return [{}]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    resource = Resource.objects.get(pk=job.params["resource"])
    version = release_version_check(job.params["version"])
    existing = Release.objects.filter(resource=resource, version=version).first()
    if existing is not None and existing.job_id != job.pk:
        raise ReleaseError(
            f"release {version!r} of {resource.name!r} was made meanwhile by "
            f"{f'job {existing.job_id}' if existing.job_id else 'another export'}: "
            f"export again with another version"
        )
    if existing is None:
        progress(0, 1)
        filters = parse_filters(
            job.params.get("filters") or "",
            min_score=job.params.get("min_score"),
            entailment_model=job.params.get("entailment_model"),
            confined=True,
            keep_copies=bool(job.params.get("keep_copies")),
            keep_non_words=bool(job.params.get("keep_non_words")),
        )
        with tempfile.TemporaryDirectory(prefix="release-") as tmp:
            existing = release_export(
                resource=resource,
                out_dir=tmp,
                version=version,
                fmt=job.params.get("format") or "tsv",
                filters=filters,
                regressor=job.params.get("regressor"),
                upload=release_storage_url(resource, version),
                license=job.params.get("license"),
                job=job,
            )
    return {
        "release": existing.pk,
        "version": existing.version,
        "location": existing.location,
        "counts": existing.manifest.get("counts", {}),
    }


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    return chunks[0].result


def export_release_start(
    *,
    resource: Resource,
    version: str | None = None,
    fmt: str = "tsv",
    filters: str = "",
    min_score: float | None = None,
    regressor: str | None = None,
    entailment_model: str | None = None,
    license: str | None = None,
    keep_copies: bool = False,
    keep_non_words: bool = False,
) -> Job:
    from jobs.execution import job_start

    params = {
        "resource": resource.pk,
        "version": version or next_version(resource),
        "format": fmt,
        "filters": filters,
        "min_score": min_score,
        "regressor": regressor,
        "entailment_model": entailment_model or None,
        "license": license or None,
        "keep_copies": bool(keep_copies),
        "keep_non_words": bool(keep_non_words),
    }
    return job_start(kind=KIND, params=params, label=f"release {params['version']} of {resource.name}")


def export_release_for(scored, **options) -> Job:
    """Start the export of a scored resource (the admin's form and the API): ``ReleaseError``, ``FilterError`` or
    ``ValueError`` when it cannot start, with nothing queued."""
    scoring_for(scored.resource, scored.regressor.name)
    release_license_check(scored, card_license(options.get("fmt") or "tsv", options.get("license")))
    return export_release_start(resource=scored.resource, regressor=scored.regressor.name, **options)


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="cpu"))
