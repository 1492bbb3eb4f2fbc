"""Issue 48, item 5: the admin's score form left the only resource unselected, so pressing Score raised the
browser's "select an item" popup. A choice with exactly one option starts on it (the score form's resource and
regressor, the training form's campaign); with two, the researcher still picks. In headless Chromium."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import sync_playwright

from annotation.models import Campaign
from scoring.forms import TrainRegressorForm

from .resource_data import build_resource, make_regressor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
SCORE = "/admin/scoring/scoredresource/score/"


def valid(page, selector: str) -> bool:
    return page.eval_on_selector(selector, "e => e.checkValidity()")


def test_the_only_resource_and_regressor_are_preselected(live_server, monkeypatch, storage_dir):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    resource = build_resource()
    regressor = make_regressor()
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/login/?next={SCORE}")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")
            page.wait_for_url(f"**{SCORE}")
            assert page.input_value("#id_resource") == str(resource.pk)
            assert page.input_value("#id_regressor") == str(regressor.pk)
            # nothing for the browser to stop the Score button with
            assert page.eval_on_selector("#id_resource", "e => e.form.checkValidity()")

            build_resource(name="res-2")  # two resources: the researcher picks one
            page.goto(f"{live_server.url}{SCORE}")
            assert page.input_value("#id_resource") == "" and not valid(page, "#id_resource")
            assert page.input_value("#id_regressor") == str(regressor.pk)
        finally:
            browser.close()


def test_the_training_form_preselects_the_only_campaign():
    only = Campaign.objects.create(name="only")
    assert TrainRegressorForm().initial["campaign"] == only.pk
    assert "campaign" not in TrainRegressorForm(data={}).initial  # a posted form keeps what was posted
    Campaign.objects.create(name="second")
    assert TrainRegressorForm().initial.get("campaign") is None
