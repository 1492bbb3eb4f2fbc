"""The export service: a release of a scored resource written, all or nothing, into a folder (and optionally
uploaded), and recorded as a ``Release`` row.

A release folder holds the pairs (``pairs.tsv.gz``, ``pairs.jsonl.gz``, ``pairs.parquet``, or in ParaBank 2's
layout ``pairs.parabank2.tsv.gz``), the judgments, the ``README.md`` card and ``manifest.json``
(``docs/reference/release-format.md``). The package's modules each hold one part: ``columns`` (the files' shapes),
``checks`` (version, format, layout, licence, the scoring to release), ``rows`` (the screened, filtered pairs and
the judgments, streamed), ``writers`` (TSV, JSONL, Parquet; Paraforge's layout or ParaBank 2's),
``manifest`` (the files in a folder, the card and the manifest last), ``card``, ``filters``, ``params`` (the
export's settings) and ``job`` (the ``export_release`` job kind); ``access`` says who reads a release.

A release leaves out what a HIT batch leaves out (``scoring.releases.rows``). The licence asked for is checked
against the corpus's terms (``checks.release_license_check``) before anything is written. Files are 0644 and the
folder 0755: a release is for others to read (storage writes its own files owner-only). Deterministic: same
inputs give byte-identical files.

All or nothing: the files are written into a staging folder beside ``out_dir`` and moved into it only once
all of them, the manifest last, are complete; an export that fails for any reason (a filter, the disk, the
upload, the release's row) removes what it wrote, here and at the upload's place, so no orphan files and no
manifest of a release that does not exist are left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from generation.models import Resource
from infra.storage import LocalStorage, S3Storage, get_storage, storage_from_url
from scoring.models import Release, ScoredResource
from scoring.releases.checks import (
    ReleaseError,
    card_license,
    layout_check,
    next_version,
    release_license_check,
    release_version_check,
    release_version_free,
    scoring_for,
)
from scoring.releases.columns import MANIFEST_FILE, PARAFORGE
from scoring.releases.filters import ReleaseFilters
from scoring.releases.manifest import release_files, write_release_files
from scoring.releases.params import ReleaseExportParams

FILE_MODE, FOLDER_MODE = 0o644, 0o755


def _make_readable(folder: Path, names: list[str], *, up_to: Path | None = None) -> None:
    """The release's files 0644 and its folder 0755 (and, with ``up_to``, the folders between ``up_to`` and it):
    a release is for others to read, while storage creates its files owner-only."""
    for name in names:
        os.chmod(folder / name, FILE_MODE)
    os.chmod(folder, FOLDER_MODE)
    if up_to is not None:
        for parent in folder.parents:
            if parent == up_to or up_to not in parent.parents:
                break
            os.chmod(parent, FOLDER_MODE)


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first (what a failed export removes)."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


def _remove_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) where they are empty: those a failed export created."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _move_into_place(staging: Path, out_dir: Path, names: list[str], moved: list[Path]) -> None:
    """The complete release's files from ``staging`` into ``out_dir``: the whole folder in one rename when
    ``out_dir`` does not exist, else file by file with the manifest last (``moved`` gets each one moved)."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    if (out_dir / MANIFEST_FILE).exists():  # made meanwhile
        raise ReleaseError(f"{out_dir} already holds a release ({MANIFEST_FILE}); choose an empty folder")
    for name in names:  # release_files: the manifest comes last
        os.replace(staging / name, out_dir / name)
        moved.append(out_dir / name)


def release_write(
    *,
    scored: ScoredResource,
    out_dir: str | Path,
    version: str,
    fmt: str = "tsv",
    filters: ReleaseFilters | None = None,
    license: str | None = None,
    layout: str = PARAFORGE,
) -> dict[str, Any]:
    """Write a release's files into ``out_dir`` (which must not hold a release yet); returns the manifest.
    ``license``: an SPDX id (``card_license``), stated on the card and in the manifest; ``layout``: the pairs'
    (``layout_check``: parabank2 only as tsv). All or nothing: the
    files are made in a staging folder beside ``out_dir`` and moved in once complete; on any failure nothing
    is left (the staging folder and any folder made for ``out_dir`` are removed)."""
    license = card_license(fmt, license)
    layout_check(fmt, layout)
    release_license_check(scored, license)
    release_version_check(version)
    filters = filters or ReleaseFilters()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReleaseError(f"{out_dir} is a file, not a folder")
    if any(p.exists() and not p.is_dir() for p in out_dir.parents):
        raise ReleaseError(f"{out_dir}: a part of that path is a file, not a folder")
    if (out_dir / MANIFEST_FILE).exists():
        raise ReleaseError(f"{out_dir} already holds a release ({MANIFEST_FILE}); choose an empty folder")
    created = _missing_folders(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    moved: list[Path] = []
    try:
        manifest = write_release_files(LocalStorage(staging), scored, version, fmt, filters, license, layout)
        _move_into_place(staging, out_dir, release_files(manifest), moved)
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        _remove_folders(created)
        raise
    shutil.rmtree(staging, ignore_errors=True)  # renamed into out_dir (gone), or emptied file by file
    _make_readable(out_dir, release_files(manifest))
    return manifest


def _upload(out_dir: Path, names: list[str], target: LocalStorage | S3Storage) -> None:
    for name in names:
        with open(out_dir / name, "rb") as src, target.open_write(name) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    if isinstance(target, LocalStorage):  # readable by others there too, up to the configured storage's root
        storage = get_storage()
        _make_readable(target.root, names, up_to=storage.root if isinstance(storage, LocalStorage) else None)


def release_export(
    params: ReleaseExportParams,
    *,
    out_dir: str | Path,
    upload: str | None = None,
    job: Any = None,
    confined: bool = False,
) -> Release:
    """Export the release ``params`` ask for into ``out_dir`` (optionally uploaded to ``upload``, e.g.
    ``s3://bucket/prefix``) and record it as a ``Release`` row (``job``: the export job making it, if
    any); its location is the upload URL if any, else the folder. The filters are parsed first (an NLI model
    loads before anything is written; ``confined``: its folder was typed into a web form). Of two exports of one
    version at once, the second to finish fails with a ReleaseError (the row's unique constraint)."""
    filters = params.release_filters(confined=confined)
    resource = Resource.objects.get(pk=params.resource)
    version = release_version_check(params.version) if params.version is not None else next_version(resource)
    scored = scoring_for(resource, params.regressor)
    release_version_free(resource, version)
    target = storage_from_url(upload) if upload else None
    if target is not None and target.exists(MANIFEST_FILE):
        raise ReleaseError(f"{target.url} already holds a release ({MANIFEST_FILE})")
    out_dir = Path(out_dir).resolve()
    created = _missing_folders(out_dir)
    manifest = release_write(
        scored=scored,
        out_dir=out_dir,
        version=version,
        fmt=params.format,
        filters=filters,
        license=params.license,
        layout=params.layout,
    )
    names = release_files(manifest)
    try:
        if target is not None:
            _upload(out_dir, names, target)
        try:
            with transaction.atomic():
                return Release.objects.create(
                    resource=resource,
                    version=version,
                    manifest=manifest,
                    job=job,
                    location=target.url if target is not None else str(out_dir),
                )
        except IntegrityError:
            if not Release.objects.filter(resource=resource, version=version).exists():
                raise  # not the version's uniqueness: say what it was, not "another export"
            raise ReleaseError(
                f"release {version!r} of {resource.name!r} was made by another export meanwhile: choose another version"
            ) from None
    except BaseException:
        _discard(out_dir, names, created, target)
        raise


def _discard(out_dir: Path, names: list[str], created: list[Path], target: LocalStorage | S3Storage | None) -> None:
    """Undo a failed export: its files in ``out_dir`` and at the upload's place, and the folders it made; but
    never files a recorded release stands on (an export of the same version that finished first, there)."""
    recorded = set(
        Release.objects.filter(location__in=[str(out_dir), getattr(target, "url", "")]).values_list(
            "location", flat=True
        )
    )
    for name in reversed(names):  # the manifest first: what is left is never taken for a release
        if str(out_dir) not in recorded:
            (out_dir / name).unlink(missing_ok=True)
        if target is not None and target.url not in recorded:
            with contextlib.suppress(Exception):  # the export's own error is the one to report
                target.delete(name)
    _remove_folders(created)
