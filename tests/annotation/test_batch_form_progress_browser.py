"""Headless Chromium: the batch form says at once that a Preview is being worked out (issue 37.7: the first one
took 15.7 s with nothing on the page), keeps a second click from sending it twice, and the preview then comes."""

import json

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

import annotation.batches.preview
from annotation.models import Batch

from .builders import sample_campaign
from .test_admin_batch_browser import log_in
from .test_browser import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_preview_shows_at_once_that_it_is_on_its_way(live_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = sample_campaign("pilot", buckets=(5, 10), refs_per_bucket=3, candidates=7)
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    calls = []
    real = annotation.batches.preview.batch_preview

    def counted_preview(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(annotation.batches.preview, "batch_preview", counted_preview)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            log_in(page, live_server.url)
            page.goto(f"{live_server.url}/admin/annotation/campaign/{campaign.pk}/batch/")
            status = page.locator("#batch-form-status")
            expect(status).to_be_hidden()
            page.select_option("#id_provider", "local")
            page.fill("#id_lengths", "5,10")
            # what the page shows the moment the form is sent (read after the page's own submit handler, kept
            # across the navigation in sessionStorage; Playwright itself waits for the navigation to finish)
            page.evaluate(
                """() => document.getElementById("batch-form").addEventListener("submit", () => {
                    const status = document.getElementById("batch-form-status");
                    sessionStorage.setItem("seen", JSON.stringify({
                        hidden: status.hidden, text: status.textContent,
                        disabled: [...document.querySelectorAll("#batch-form input[type=submit]")].map(b => b.disabled),
                    }));
                })"""
            )
            page.click("input[name=preview]")
            expect(page.locator("#batch-preview")).to_contain_text("Preview (nothing made yet)", timeout=20000)
            expect(page.locator("#preview-reliability")).to_contain_text("Split-half reliability, stepped up to 3")
            seen = json.loads(page.evaluate("sessionStorage.getItem('seen')"))
            assert seen["hidden"] is False and "Working out the preview" in seen["text"]
            assert seen["disabled"] == [True, True]  # no second Preview, no Create meanwhile
            expect(page.locator("#batch-form-status")).to_be_hidden()  # the new page: the form ready again
            assert len(calls) == 1 and not Batch.objects.exists()  # one preview, nothing made
            page.click("input[name=create]")  # the clicked button's name still reaches the server
            expect(page.locator(".messagelist")).to_contain_text("Draft batch")
            assert Batch.objects.count() == 1
        finally:
            browser.close()
