"""Issue 48, item 4, in headless Chromium on a desktop's and a phone's width: the admin's generate form offers
the installed models in a picker (``demo`` after ``manage.py demo_setup``), shows the group of settings of the
mode the "diverse" box picks and hides (and disables) the other's, each field with its help; a diverse job
started from it posts none of beam search's settings and leads to its progress page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect, sync_playwright

from generation.demo_settings import install_shipped_models
from generation.generation_job import KIND
from jobs.models import Job
from tests.screens import shoot

from .test_generate_admin_api import corpus as demo_corpus  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
# the screenshot of a group starts at its title
SCROLL_TO = "window.scrollBy(0, document.querySelector('fieldset[data-group=%s]').getBoundingClientRect().top - 8)"
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture
def corpus(demo_corpus, tmp_path, monkeypatch, settings):  # noqa: F811
    var = tmp_path / "var"
    monkeypatch.setenv("PARAFORGE_VAR_DIR", str(var))
    settings.PARAFORGE_MODEL_ROOTS = [str(var / "models")]
    install_shipped_models()  # what demo_setup does
    return demo_corpus


@pytest.mark.parametrize("size", sorted(SIZES))
def test_the_generate_form_shows_the_groups_of_its_mode(corpus, live_server, monkeypatch, size):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    width, height = SIZES[size]
    url = reverse("admin:generation_corpus_generate", args=[corpus.pk])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{live_server.url}/admin/login/?next={url}")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")
            common = page.locator('fieldset[data-group="common"]')
            constraints = page.locator('fieldset[data-group="constraints"]')
            diverse = page.locator('fieldset[data-group="diverse"]')
            expect(common.locator("h2")).to_have_text("Model and sample")
            # the model: a picker of the installed ones, the box only for "another model"
            pick = page.locator("select.model-pick")
            expect(pick).to_have_value("demo")
            expect(page.locator("input.model-path")).to_be_hidden()
            pick.select_option("")
            expect(page.locator("input.model-path")).to_be_visible()
            pick.select_option("demo")
            # constraint systems by default; the diverse group hidden and its fields disabled
            expect(constraints).to_be_visible()
            expect(diverse).to_be_hidden()
            expect(page.locator("#id_negative_sets")).to_be_disabled()
            expect(constraints.locator(".field-beam .help")).to_contain_text("the beam size")
            page.evaluate(SCROLL_TO % "constraints")
            shoot(page, f"admin-generate-constraints-{size}")
            page.check("#id_diverse")
            expect(diverse).to_be_visible()
            expect(constraints).to_be_hidden()
            for name in ("beam", "nbest", "length_penalty", "systems", "stop"):
                expect(page.locator(f"#id_{name}")).to_be_disabled()
            expect(diverse.locator(".field-negative_sets .help")).to_contain_text("random negative sets")
            expect(diverse.locator(".field-keep .help")).to_contain_text("r1 .. r<keep>")
            expect(diverse).not_to_contain_text("--diverse")
            # every visible field fits the window (no sideways scrolling on a phone)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, overflow
            page.evaluate(SCROLL_TO % "diverse")
            shoot(page, f"admin-generate-diverse-{size}")
            page.uncheck("#id_diverse")
            expect(constraints).to_be_visible()
            expect(diverse).to_be_hidden()
            page.check("#id_diverse")
            page.fill("#id_name", f"web-diverse-{size}")
            page.click("input[value=Generate]")
            expect(page.locator("progress.job-progress")).to_have_count(1)
            job = Job.objects.get(kind=KIND)
            assert job.params["diverse"] is True and "systems" not in job.params
            assert job.params["beam"] == 5  # beam search's defaults, not posted: the page disabled them
        finally:
            browser.close()
