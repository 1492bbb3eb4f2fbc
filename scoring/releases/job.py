"""Job kind ``export_release``: the admin's "export release" runs the export in a worker, not in the request.

One chunk. Params: ``ReleaseExportParams`` (``scoring.releases.params``, which says what each key holds and how a
job stored before a setting existed is read). The NLI model folder of ``entailment=`` is one the workers can
read, under ``PARAFORGE_MODEL_ROOTS``: checked when the job starts, loaded only in the worker. The files are
written to a temporary folder and copied to the configured storage under ``releases/<resource>/<version>/``
(``checks.release_key``, where ``export_release`` without ``--out`` writes too; the Release's location).

One export per version: a job is refused when it starts if the version exists or another export of it is
queued or running (checked with the resource's row locked, so of two starts at once the second sees the
first). A chunk that runs again finds the Release row it made (``Release.job``) and returns it instead of
exporting twice; a row of that version made by anything else fails the job.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

from generation.models import Resource
from jobs.execution import job_start
from jobs.models import Job, JobChunk, JobStatus
from jobs.params import from_values, to_json
from jobs.registry import JobKind, ProgressFn, register
from scoring.models import Release, ScoredResource
from scoring.releases.checks import (
    ReleaseError,
    card_license,
    next_version,
    release_license_check,
    release_storage_url,
    release_version_check,
    release_version_free,
    scoring_for,
)
from scoring.releases.export import release_export
from scoring.releases.params import ReleaseExportParams

KIND = "export_release"


def job_params(job: Job) -> ReleaseExportParams:
    """The settings ``job`` stored, as the worker reads them (a key it lacks keeps its default)."""
    return from_values(ReleaseExportParams, job.params)


def _claim_version(job: Job, params: ReleaseExportParams) -> None:
    """ReleaseError unless ``job`` is the only export of its version: none exists, none is queued or running.
    Runs in ``job_start``'s transaction with the resource's row locked: a second start of the same version
    waits for the first to commit, then sees its job."""
    resource = Resource.objects.select_for_update().get(pk=params.resource)
    version = release_version_check(params.version)
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
    params = job_params(job)
    _claim_version(job, params)
    resource = Resource.objects.get(pk=params.resource)
    params.release_filters(load_model=False, confined=True)  # fail early
    scored = scoring_for(resource, params.regressor)
    release_license_check(scored, card_license(params.format, params.license))
    return [{}]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    params = job_params(job)
    resource = Resource.objects.get(pk=params.resource)
    version = release_version_check(params.version)
    existing = Release.objects.filter(resource=resource, version=version).first()
    if existing is not None and existing.job_id != job.pk:
        raise ReleaseError(
            f"release {version!r} of {resource.name!r} was made meanwhile by "
            f"{f'job {existing.job_id}' if existing.job_id else 'another export'}: "
            f"export again with another version"
        )
    if existing is None:
        progress(0, 1)
        existing = release_export_to_storage(params, resource, version, job=job, confined=True)
    return {
        "release": existing.pk,
        "version": existing.version,
        "location": existing.location,
        "counts": existing.manifest.get("counts", {}),
    }


def release_export_to_storage(
    params: ReleaseExportParams, resource: Resource, version: str, *, job: Job | None = None, confined: bool = False
) -> Release:
    """Export ``version`` of ``resource`` into the configured storage at ``release_storage_url`` (written in a
    temporary folder, then copied there): the export job's and ``export_release``'s without ``--out``."""
    params = dataclasses.replace(params, version=version)
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        return release_export(
            params, out_dir=tmp, upload=release_storage_url(resource, version), job=job, confined=confined
        )


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    return chunks[0].result


def export_release_start(params: ReleaseExportParams) -> Job:
    """Queue the export ``params`` ask for (no version: the resource's next free ``vN``); the job's start check
    (``_plan``) refuses one that cannot succeed, with nothing queued."""
    if params.resource is None:
        raise ValueError("an export job needs its resource")
    resource = Resource.objects.get(pk=params.resource)
    if params.version is None:
        params = dataclasses.replace(params, version=next_version(resource))
    return job_start(kind=KIND, params=to_json(params), label=f"release {params.version} of {resource.name}")


def export_release_for(scored: ScoredResource, **options: Any) -> Job:
    """Start the export of a scored resource (the admin's form and the API; ``options``: ``ReleaseExportParams``
    settings by name): ``ReleaseError``, ``FilterError`` or ``ValueError`` when it cannot start, with nothing
    queued."""
    params = from_values(ReleaseExportParams, options, resource=scored.resource_id, regressor=scored.regressor.name)
    scoring_for(scored.resource, scored.regressor.name)
    release_license_check(scored, card_license(params.format, params.license))
    return export_release_start(params)


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="cpu"))
