"""Issue 48, item 5: the job page said "Waiting for a worker…" while its job ran at 50%. Its sentence follows
the job's real state, on first render (``jobs.widgets.state_text``) and as the page updates itself
(job-progress.js), in headless Chromium."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from jobs.models import Job, JobChunk, JobStatus
from jobs.widgets import state_text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def progress(status, fraction=0.0, stage=""):
    return {"status": status, "fraction": fraction, "stage": stage}


def test_the_sentence_names_each_state():
    assert state_text(progress("pending")).startswith("Waiting for a worker")
    running = state_text(progress("running", 0.5, "fold 2 of 5"))
    assert running.startswith("Running: 50% done (fold 2 of 5)") and "Waiting" not in running
    assert state_text(progress("succeeded", 1.0)) == "Finished."
    assert state_text(progress("failed")) == "The job failed."
    assert state_text(progress("cancelled")) == "The job was cancelled."


def train_job(status: str, done: int) -> Job:
    job = Job.objects.create(kind="train_regressor", label="train x", params={"train": {"name": "x"}}, status=status)
    JobChunk.objects.create(job=job, index=0, status=status, done_units=done, total_units=4)
    return job


def test_the_job_page_follows_the_job_from_waiting_to_running(live_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    running = train_job(JobStatus.RUNNING, 2)
    waiting = train_job(JobStatus.PENDING, 0)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")

            # first render: a job at 50% is running, not waiting
            page.goto(f"{live_server.url}/admin/scoring/regressor/train/{running.pk}/")
            state = page.locator("#job-page [data-job-state]")
            expect(state).to_have_text("Running: 50% done. This page updates by itself.")
            expect(page.locator("#job-page")).not_to_contain_text("Waiting for a worker")

            # a queued job waits; once a worker takes it, the page says so by itself
            page.goto(f"{live_server.url}/admin/scoring/regressor/train/{waiting.pk}/")
            expect(state).to_contain_text("Waiting for a worker")
            Job.objects.filter(pk=waiting.pk).update(status=JobStatus.RUNNING)
            JobChunk.objects.filter(job=waiting).update(status=JobStatus.RUNNING, done_units=3, stage="fold 4 of 5")
            expect(state).to_have_text("Running: 75% done (fold 4 of 5). This page updates by itself.", timeout=10_000)
            expect(page.locator("[data-job-text]")).to_have_text("running 75% — fold 4 of 5")

            # and a failed job says it failed (the page reloads itself once the job has ended)
            Job.objects.filter(pk=waiting.pk).update(status=JobStatus.FAILED, error="out of memory")
            expect(page.locator("#job-page")).to_contain_text("The job failed: out of memory", timeout=10_000)
            expect(page.locator("#job-page")).not_to_contain_text("updates by itself")
        finally:
            browser.close()
