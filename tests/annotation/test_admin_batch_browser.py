"""The researcher's batch form in headless Chromium: from the campaign's page to its batch form, only the
chosen provider's fields shown (all of them without JavaScript), a preview that makes nothing, then the draft."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from annotation.models import Batch
from tests.screens import shoot

from .builders import sample_campaign
from .test_browser import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, url: str) -> None:
    page.goto(f"{url}/admin/login/?next=/admin/annotation/campaign/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "pw-for-the-browser")
    page.click("input[type=submit]")


def test_from_the_campaign_page_to_a_previewed_draft_batch(live_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = sample_campaign("pilot", buckets=(5, 10), refs_per_bucket=3, candidates=7)
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            log_in(page, live_server.url)
            page.click(f"text={campaign.name}")
            expect(page.locator("#campaign-dashboard")).to_have_attribute("href", f"/research/campaigns/{campaign.pk}/")
            page.click("#create-batch")

            prolific = page.locator("fieldset[data-providers=prolific]")
            mturk = page.locator("fieldset[data-providers='mturk-sandbox mturk']")
            page.select_option("#id_provider", "local")
            expect(prolific).to_be_hidden()
            expect(mturk).to_be_hidden()
            page.select_option("#id_provider", "mturk")
            expect(mturk).to_be_visible()
            expect(prolific).to_be_hidden()
            page.select_option("#id_provider", "prolific")
            expect(prolific).to_be_visible()
            expect(mturk).to_be_hidden()

            page.fill("#id_per_length", "3")
            page.fill("#id_lengths", "5,10")
            page.fill("#id_reward_per_session", "0.50")
            page.fill("#id_estimated_minutes", "10")
            page.click("input[name=preview]")
            expect(page.locator("#batch-preview")).to_contain_text("Preview (nothing made yet)")
            expect(page.locator("#preview-pay")).to_contain_text("3.00 USD an hour")
            expect(page.locator("#batch-preview .errornote").first).to_contain_text("below Prolific's minimum")
            expect(page.locator("#preview-reliability")).to_contain_text("expected")
            expect(prolific).to_be_visible()  # the form comes back as filled in, the provider's fields shown
            assert not Batch.objects.exists()
            page.fill("#id_reward_per_session", "2.00")
            page.click("input[name=preview]")
            expect(page.locator("#preview-pay")).to_contain_text("12.00 USD an hour")
            shoot(page, "admin-batch-preview")
            page.click("input[name=create]")
            expect(page.locator(".messagelist")).to_contain_text("Draft batch")
            assert Batch.objects.get().settings["reward_per_session"] == "2.00"

            # without JavaScript every field is there, and the form still works
            plain = browser.new_context(java_script_enabled=False)
            page = plain.new_page()
            log_in(page, live_server.url)
            page.goto(f"{live_server.url}/admin/annotation/campaign/{campaign.pk}/batch/")
            expect(page.locator("fieldset[data-providers=prolific]")).to_be_visible()
            expect(page.locator("fieldset[data-providers='mturk-sandbox mturk']")).to_be_visible()
            page.select_option("#id_provider", "local")
            page.fill("#id_per_length", "1")
            page.fill("#id_lengths", "5")
            page.click("input[name=create]")
            expect(page.locator(".messagelist")).to_contain_text("Draft batch")
            assert Batch.objects.count() == 2
        finally:
            browser.close()
