"""The admin's scoring path in headless Chromium: train a regressor, score a resource with it, export a
release, each page's progress bar following its job (run here, as a worker would) until the page shows
what the job made."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Release
from tests.screens import shoot

from .resource_data import build_resource
from .test_regressor import build_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def run_latest(kind: str) -> Job:
    job = Job.objects.filter(kind=kind).latest("pk")
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job


def test_train_score_and_export_from_the_admin(live_server, monkeypatch, tmp_path, storage_dir):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = build_campaign(tmp_path, n_refs=20)
    resource = build_resource()
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/login/?next=/admin/scoring/regressor/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")

            page.click("text=Train a regressor")
            page.select_option("#id_campaign", str(campaign.pk))
            page.fill("#id_name", "browser-reg")
            page.uncheck("#id_with_embeddings")
            shoot(page, "admin-1-train-regressor")
            page.click("input[value=Train]")
            expect(page.locator("progress.job-progress")).to_have_count(1)
            expect(page.locator("#job-page")).to_contain_text("Waiting for a worker")
            run_latest("train_regressor")
            # the bar polls the job and the page reloads itself once the job has ended
            expect(page.locator("p.job-done")).to_contain_text("regressor browser-reg", timeout=20_000)
            expect(page.locator("[data-job-text]")).to_have_text("succeeded 100%")
            shoot(page, "admin-2-training-done")
            # issue 48: one truth about the figures, on a desktop and on a phone
            job_page = page.locator("#job-page")
            for width, height in ((1280, 900), (390, 844)):
                page.set_viewport_size({"width": width, "height": height})
                figures = page.locator("table.job-figures")
                expect(figures).to_contain_text("no interval: too few references, fewer than 5")  # 4 references
                expect(figures).to_contain_text("cross-validated Spearman's rho (5 folds by reference, nested)")
                title = job_page.locator("h2", has_text="no calibration map: score = raw_score")
                expect(title).to_be_visible()
                note = job_page.locator("p.help", has_text="There is no calibration map")
                note.scroll_into_view_if_needed()
                expect(note).to_be_visible()
                expect(job_page).not_to_contain_text("Calibration on the held-out pairs")
            page.set_viewport_size({"width": 1280, "height": 900})

            page.click("text=score a resource with it…")
            page.select_option("#id_resource", str(resource.pk))
            shoot(page, "admin-3-score-resource")
            page.click("input[value=Score]")
            run_latest("score_resource")
            expect(page.locator("p.job-done")).to_contain_text("res scored (18 pairs)", timeout=20_000)

            page.click("text=export a release…")
            shoot(page, "admin-4-export-release")
            page.click("input[value=Export]")
            run_latest("export_release")
            expect(page.locator("p.job-done")).to_contain_text("release v1 of res", timeout=20_000)
            shoot(page, "admin-5-release-exported")
            for width, height in ((390, 844), (1280, 900)):
                page.set_viewport_size({"width": width, "height": height})
                near = page.locator("table.job-figures tr", has_text="near-copies of their reference")
                near.scroll_into_view_if_needed()
                expect(near).to_be_visible()
                expect(near).to_contain_text("left out")
            page.click("p.job-done a")
            assert re.search(r"/admin/scoring/release/\d+/change/$", page.url)
        finally:
            browser.close()
    assert Release.objects.get().manifest["regressor"]["name"] == "browser-reg"
