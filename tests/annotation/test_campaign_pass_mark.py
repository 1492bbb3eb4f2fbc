"""The campaign page states the attention pass mark each batch checks at (issue 48): it said 100, the campaign's
setting, while every batch scored its checks at 85."""

import re

import pytest

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import Batch

from .builders import sample_campaign

pytestmark = pytest.mark.django_db


def pass_mark_row(admin_client, campaign) -> str:
    page = admin_client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    row = re.search(r"<th scope=\"row\">score an attention copy needs to pass</th><td>(.*?)</td>", page)
    assert row, "no pass mark row"
    return row.group(1)


def test_the_campaign_page_shows_each_batchs_own_pass_mark(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    assert pass_mark_row(admin_client, campaign) == "100"  # no batch yet: the campaign's own
    first = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=[5]))
    second = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=[5]))
    assert Batch.objects.get(pk=first.pk).settings["attention_pass_mark"] == 85  # the batches' default
    shown = pass_mark_row(admin_client, campaign)
    assert shown.startswith(f"85 in batches {first.pk}, {second.pk} (each batch&#x27;s own); 100 for imported")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_pass_marks_show_on_the_campaign_page_on_a_desktop_and_a_phone(live_server, monkeypatch):
    from django.contrib.auth import get_user_model
    from playwright.sync_api import expect, sync_playwright

    from .test_browser import CHROMIUM_ARGS

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    batch = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=[5]))
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{live_server.url}/admin/login/?next=/admin/annotation/campaign/{campaign.pk}/change/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")
            for width, height in ((1280, 900), (390, 844)):
                page.set_viewport_size({"width": width, "height": height})
                row = page.locator("table.campaign-settings tr", has_text="score an attention copy needs to pass")
                row.scroll_into_view_if_needed()
                expect(row.locator("td").first).to_have_text(
                    f"85 in batch {batch.pk} (each batch's own); 100 for imported judgments and batches without "
                    "their own"
                )
                expect(row.locator("td").first).to_be_in_viewport()
        finally:
            browser.close()
