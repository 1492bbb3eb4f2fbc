"""Issue 30 in headless Chromium: an export job's result page says what the release holds and offers its files;
following a file link downloads exactly the file the manifest describes."""

import hashlib
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from jobs.execution import job_run_inline
from jobs.models import JobStatus
from scoring.models import Release
from scoring.releases.job import export_release_start
from scoring.releases.params import ReleaseExportParams
from tests.screens import shoot

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with
from .test_admin_browser import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_export_result_page_offers_the_release_files(live_server, monkeypatch, tmp_path, storage_dir):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    scored = score_with(build_resource(), make_regressor(), OverlapScorer(max_words=10))
    job = job_run_inline(
        job_id=export_release_start(ReleaseExportParams(resource=scored.resource.pk, license="CC-BY-4.0")).pk
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(accept_downloads=True)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/scoring/scoredresource/export/{job.pk}/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")

            expect(page.locator("p.job-done")).to_contain_text("release v1 of res")
            figures = page.locator("table.job-figures")
            expect(figures).to_contain_text("17 of 18 read")  # the copy of its reference left out
            expect(figures).to_contain_text("CC-BY-4.0")
            expect(figures).to_contain_text("n = 20 held-out pairs")
            expect(page.locator("ul.job-warnings")).to_contain_text("fewer than 100")
            expect(page.locator("details.job-raw pre")).to_be_hidden()  # the raw result waits behind a click
            shoot(page, "admin-6-release-result")

            with page.expect_download() as info:
                page.click("table.job-files >> text=pairs.tsv.gz")
            download = info.value
            assert download.suggested_filename == "pairs.tsv.gz"
            body = Path(download.path()).read_bytes()
            assert hashlib.sha256(body).hexdigest() == release.manifest["files"]["pairs.tsv.gz"]["sha256"]

            page.click("details.job-raw summary")
            expect(page.locator("details.job-raw pre")).to_contain_text('"release"')
        finally:
            browser.close()
