"""Job kind ``export_release``: the admin's "export release" runs the export in a worker, not in the request.

One chunk. Params: ``resource`` (id), ``version``, ``format`` (tsv, jsonl, parquet), ``filters`` (the
``--filters`` text), ``min_score``, ``regressor`` (name or null), ``license`` (parquet's dataset card; null:
unknown), ``entailment_model`` (an NLI model folder the workers can
read, for ``entailment=``; checked when the job starts, loaded only in the worker). The files are written to a temporary folder and copied to
the configured storage under ``releases/<resource id>/<version>/`` (the Release's location). A chunk
that runs again finds its Release row and returns it instead of exporting twice.
"""
from __future__ import annotations

import tempfile

from django.conf import settings

from generation.models import Resource
from jobs.models import Job, JobChunk
from jobs.registry import JobKind, ProgressFn, register

from .models import Release
from .release_filters import parse_filters
from .releases import card_license, next_version, release_export, scoring_for

KIND = "export_release"


def release_storage_url(resource: Resource, version: str) -> str:
    return f"{settings.PARAFORGE_STORAGE_URL.rstrip('/')}/releases/{resource.pk}/{version}"


def _plan(job: Job) -> list[dict]:
    resource = Resource.objects.get(pk=job.params["resource"])
    parse_filters(job.params.get("filters") or "", min_score=job.params.get("min_score"),  # fail early
                  entailment_model=job.params.get("entailment_model"), load_model=False)
    scoring_for(resource, job.params.get("regressor"))
    card_license(job.params.get("format") or "tsv", job.params.get("license"))
    return [{}]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    resource = Resource.objects.get(pk=job.params["resource"])
    version = job.params["version"]
    existing = Release.objects.filter(resource=resource, version=version).first()
    if existing is None:
        progress(0, 1)
        filters = parse_filters(job.params.get("filters") or "", min_score=job.params.get("min_score"),
                                entailment_model=job.params.get("entailment_model"))
        with tempfile.TemporaryDirectory(prefix="release-") as tmp:
            existing = release_export(resource=resource, out_dir=tmp, version=version,
                                      fmt=job.params.get("format") or "tsv", filters=filters,
                                      regressor=job.params.get("regressor"),
                                      upload=release_storage_url(resource, version),
                                      license=job.params.get("license"))
    return {"release": existing.pk, "version": existing.version, "location": existing.location,
            "counts": existing.manifest.get("counts", {})}


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    return chunks[0].result


def export_release_start(*, resource: Resource, version: str | None = None, fmt: str = "tsv", filters: str = "",
                         min_score: float | None = None, regressor: str | None = None,
                         entailment_model: str | None = None, license: str | None = None) -> Job:
    from jobs.execution import job_start

    params = {"resource": resource.pk, "version": version or next_version(resource), "format": fmt,
              "filters": filters, "min_score": min_score, "regressor": regressor,
              "entailment_model": entailment_model or None, "license": license or None}
    return job_start(kind=KIND, params=params, label=f"release {params['version']} of {resource.name}")


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="cpu"))
