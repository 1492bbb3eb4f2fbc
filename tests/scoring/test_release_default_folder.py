"""``export_release RESOURCE`` without ``--out`` (issue 37, item 2): the README's ``export_release demo-sample
--format parquet --license cc-by-4.0`` exited 2 asking for ``--out``; it now writes into
``var/releases/RESOURCE/VERSION/``, a folder per version, so the next export does not meet the last one's files."""

from pathlib import Path

import pytest
from django.conf import settings

from .test_releases import export, scored  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def test_without_out_each_version_goes_into_its_own_folder_under_var(scored):  # noqa: F811
    first = export("res", "--format", "parquet", "--license", "cc-by-4.0")
    folder = Path(settings.VAR_DIR) / "releases" / "res" / "v1"
    assert first["version"] == "v1" and Path(first["out"]) == folder
    assert (folder / "pairs.parquet").is_file() and (folder / "manifest.json").is_file()
    second = export("res")
    assert second["version"] == "v2" and Path(second["out"]) == folder.parent / "v2"
    assert (folder.parent / "v2" / "pairs.tsv.gz").is_file()
    named = export("res", "--version", "2026-pilot")
    assert Path(named["out"]) == folder.parent / "2026-pilot"
