"""What a release is checked against before anything is written -- its version, its format and licence, the
scoring it releases -- and the version and folder it gets when none is given.

Why one module: the export command, the admin's and the API's form, the ``export_release`` job's start and its
worker ask the same questions, and each rule has its one place here (``release_version_check``,
``card_license``, ``release_license_check``, ``scoring_for``), so the answers cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from generation.models import Resource
from jobs.models import JobStatus
from scoring.models import Release, ScoredResource
from scoring.releases.card import NO_LICENSE, license_check, license_conflict
from scoring.releases.columns import FORMATS, LAYOUTS, PARABANK2
from scoring.scored.job import regressor_version

# a version names a folder (releases/<resource id>/<version>/): no separators, no "." or "..", no newline
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
VERSION_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64 characters"


class ReleaseError(ValueError):
    """A release that cannot be made as asked (nothing is written)."""


class LicenseConflictError(ReleaseError):
    """A release licence that grants more than the corpus's terms allow (bad input, not a conflict of state)."""


def release_version_check(version: Any) -> str:
    """``version`` if it may name a release (``VERSION_RULE``), else a ReleaseError: the one rule of the
    admin's export form, ``manage.py export_release --version`` and the ``export_release`` job."""
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r}: use {VERSION_RULE}")
    return version


def release_version_free(resource: Resource, version: str) -> None:
    """ReleaseError if ``resource`` already has a release ``version``."""
    if Release.objects.filter(resource=resource, version=version).exists():
        raise ReleaseError(f"release {version!r} of {resource.name!r} already exists: choose another version")


def next_version(resource: Resource) -> str:
    numbers = [
        int(m.group(1))
        for v in resource.releases.values_list("version", flat=True)
        if (m := re.fullmatch(r"v(\d+)", v))
    ]
    return f"v{max(numbers, default=0) + 1}"


def release_key(resource: Resource, version: str) -> str:
    """Where every export of ``resource``'s ``version`` lands in the configured storage, the admin's and the API's
    jobs and ``export_release`` without ``--out`` alike: ``releases/<resource name>/<version>`` (the resource's
    id where its name is not a plain folder name), one folder per version, so the next version never meets the
    last one's files. With the default storage: ``var/storage/releases/demo-sample/v1/``."""
    name = resource.name if re.fullmatch(r"[\w][\w.-]*", resource.name) else str(resource.pk)
    return f"releases/{name}/{version}"


def release_storage_url(resource: Resource, version: str) -> str:
    """``release_key``'s folder in the configured storage (``PARAFORGE_STORAGE_URL``), as a storage URL."""
    return f"{settings.PARAFORGE_STORAGE_URL.rstrip('/')}/{release_key(resource, version)}"


def format_check(fmt: Any) -> str:
    """``fmt`` if it is a release format (``FORMATS``), else a ReleaseError."""
    if fmt not in FORMATS:
        raise ReleaseError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    return fmt


def layout_check(fmt: str, layout: Any) -> str:
    """``layout`` if it is a pairs layout (``LAYOUTS``) that ``fmt`` can hold, else a ReleaseError: ParaBank 2's
    layout is its TSV, so it is written only as ``tsv`` (a JSONL or Parquet file of ParaBank 2's lines would be
    neither ParaBank 2's file nor Paraforge's typed pairs)."""
    if layout not in LAYOUTS:
        raise ReleaseError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    if layout == PARABANK2 and fmt != "tsv":
        raise ReleaseError(
            f"layout {PARABANK2} is ParaBank 2's TSV and is written only as format tsv, not {fmt}: export it with "
            f"format tsv, or choose layout paraforge for {fmt}"
        )
    return layout


def card_license(fmt: str, license: str | None) -> str:
    """The format checked, and the release's licence as its SPDX id (``card.license_check``; none given:
    ``NOASSERTION``, stated as such on the card and in the manifest), for every format: the one check of the
    command, the admin's form and the job."""
    format_check(fmt)
    try:
        return license_check(license)
    except ValueError as exc:
        raise ReleaseError(str(exc)) from None


def release_license_check(scored: ScoredResource, license: str) -> None:
    """ReleaseError when ``license`` (an SPDX id) grants more than the terms of the resource's corpus allow
    (``infra.licences.license_conflict``): the message says why and what to give instead."""
    corpus = scored.resource.corpus
    conflict = license_conflict(corpus.license or NO_LICENSE, license)
    if conflict is not None:
        terms = f" ({corpus.terms})" if corpus.terms else ""
        raise LicenseConflictError(
            f"--license {license} is refused for a release of corpus {corpus.name!r}, under {corpus.license}{terms}: "
            f"{conflict}"
        )


def scoring_for(resource: Resource, regressor: str | None = None) -> ScoredResource:
    """The completed scoring of ``resource`` by the named regressor (default: the latest completed one)."""
    done = resource.scorings.select_related("regressor", "job").filter(job__status=JobStatus.SUCCEEDED)
    if regressor:
        found = done.filter(regressor__name=regressor).first()
        if found is None:
            raise ReleaseError(
                f"resource {resource.name!r} has no completed scoring by regressor {regressor!r}: "
                f"run manage.py score_resource {resource.name} --regressor {regressor} --wait"
            )
    else:
        found = done.order_by("-created_at", "-pk").first()
        if found is None:
            raise ReleaseError(
                f"resource {resource.name!r} has no completed scoring: run manage.py score_resource "
                f"{resource.name} --regressor NAME --wait first"
            )
    if _scored_by_an_earlier_training(found):
        raise ReleaseError(
            f"resource {resource.name!r} was scored by an earlier training of regressor "
            f"{found.regressor.name!r} (retrained since with --replace), so its scores and the "
            f"regressor's signature disagree: run manage.py score_resource {resource.name} "
            f"--regressor {found.regressor.name} --wait again"
        )
    return found


def _scored_by_an_earlier_training(scored: ScoredResource) -> bool:
    """Scorings from before the version was recorded (no ``regressor_trained_at``) are taken as they are."""
    result = scored.job.result or {}
    return "regressor_trained_at" in result and result["regressor_trained_at"] != regressor_version(
        scored.regressor.signature
    )
