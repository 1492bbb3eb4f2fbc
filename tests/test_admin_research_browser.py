"""A researcher's way from the admin's index in headless Chromium (issue 37, items 6 and 7): the index links the
constraints page, which opens on an example with each word's IDF and says why systems find the pool too small
(and following its suggestion lets more of them work); the index links the results; a campaign's page links its
workers' comments."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from annotation.models import Assignment, Worker
from generation.web.views_constraints import EXAMPLE_SENTENCE
from tests.annotation.builders import sample_campaign
from tests.annotation.test_browser import CHROMIUM_ARGS
from tests.generation.test_constraints_page import COMMON_WORDS, small_corpus_table

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PERMS = ["view_campaign", "view_judgment", "view_corpus", "view_assignment"]


def test_from_the_admin_index_to_constraints_results_and_comments(live_server, storage_dir, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    small_corpus_table()
    campaign = sample_campaign("pilot")
    Assignment.objects.create(
        campaign=campaign,
        worker=Worker.objects.create(external_id="W7", provider="mturk"),
        provider="mturk",
        external_assignment_id="A7",
        submitted_at=timezone.now(),
        comment="Two candidates were the same sentence.",
    )
    user = get_user_model().objects.create_user("researcher", password="pw-for-the-browser", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=PERMS))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "researcher")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")

            page.click("#constraints-link")
            expect(page.locator("#example-note")).to_be_visible()
            expect(page.locator("input[name=sentence]")).to_have_value(EXAMPLE_SENTENCE)
            expect(page.locator("table.systems tbody tr")).to_have_count(37)
            expect(page.locator("#word-idf")).to_contain_text("proud")
            expect(page.locator("#word-idf")).to_contain_text("7.60")

            page.fill("input[name=sentence]", COMMON_WORDS)
            page.click("form.pick button[type=submit]")
            hint = page.locator("#pool-hint")
            expect(hint).to_be_visible()
            expect(hint).to_contain_text("find the pool too small")
            expect(hint).to_contain_text("ln(3000) = 8.0")
            failing = int(re.match(r"(\d+) of 37", hint.inner_text()).group(1))
            page.click("#pool-hint-try")
            expect(page.locator("input[name=min_idf]")).to_have_value("5.0")
            now_failing = page.locator("td.c", has_text="pool too small").count()
            assert now_failing < failing

            page.goto(f"{live_server.url}/admin/")
            page.click("#results-link")
            expect(page).to_have_url(re.compile(r"/research/campaigns/$"))
            expect(page.locator("body")).to_contain_text("pilot")

            page.goto(f"{live_server.url}/admin/annotation/campaign/{campaign.pk}/change/")
            page.click("#campaign-comments")
            expect(page.locator("#worker-comments")).to_contain_text("Two candidates were the same sentence.")
            expect(page.locator("#worker-comments")).to_contain_text("W7")
        finally:
            browser.close()
