"""``export_release RESOURCE`` without ``--out`` (issue 37, item 2: the README's command exited 2 asking for
``--out``) writes a folder per version, so the next export does not meet the last one's files; and (issue 48,
item 5) into the same folder as the admin's exports: releases made in the admin landed in
``var/storage/releases/1/v1/``, from the command in ``var/releases/demo-sample/v2/``. Both now go through
``scoring.releases.checks.release_key``: ``<storage>/releases/<resource name>/<version>/``."""

from pathlib import Path

import pytest

from jobs.execution import job_run_inline
from jobs.models import JobStatus
from scoring.models import Release
from scoring.releases.checks import release_key
from scoring.releases.job import export_release_for

from .test_releases import export, scored  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def test_without_out_each_version_goes_into_its_own_folder_in_the_storage(scored, storage_dir):  # noqa: F811
    first = export("res", "--format", "parquet", "--license", "cc-by-4.0")
    folder = storage_dir / "releases" / "res" / "v1"
    assert first["version"] == "v1" and Path(first["out"]) == folder
    assert (folder / "pairs.parquet").is_file() and (folder / "manifest.json").is_file()
    second = export("res")
    assert second["version"] == "v2" and Path(second["out"]) == folder.parent / "v2"
    assert (folder.parent / "v2" / "pairs.tsv.gz").is_file()
    named = export("res", "--version", "2026-pilot")
    assert Path(named["out"]) == folder.parent / "2026-pilot"
    # the release's recorded location is that folder, readable through the release API as the admin's are
    assert Release.objects.get(version="v1").location == f"file://{folder}"


def test_the_admin_and_the_command_share_one_layout(scored, storage_dir):  # noqa: F811
    job = export_release_for(scored)
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    by_command = export("res")
    admin = Release.objects.get(version="v1")
    assert release_key(scored.resource, "v1") == "releases/res/v1"
    assert admin.location == f"file://{storage_dir / 'releases' / 'res' / 'v1'}"
    assert by_command["version"] == "v2" and Path(by_command["out"]) == storage_dir / "releases" / "res" / "v2"
    assert sorted(p.name for p in (storage_dir / "releases" / "res").iterdir()) == ["v1", "v2"]


def test_upload_needs_out(scored):  # noqa: F811
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--upload copies a release written with --out"):
        export("res", "--upload", "s3://bucket/prefix")
