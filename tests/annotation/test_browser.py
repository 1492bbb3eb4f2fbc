"""The slider page in headless Chromium: open, move sliders by keyboard, choose fluency, submit."""

import pytest
from playwright.sync_api import sync_playwright

from annotation.models import Assignment, Judgment
from tests.screens import shoot

from .builders import published_batch, sample_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
HIT_SCRIPT = "**/frontend/hit.js"


def wait_until_ready(page) -> None:
    """Wait for hit.js to have attached its handlers (it marks the form): a click that navigates does not wait
    for the next page's load, and a page driven before its script runs loses touches and submits natively."""
    page.wait_for_selector("#hit-form[data-ready='1']", state="attached")


@pytest.mark.parametrize("viewport", [(390, 844), (1280, 900)], ids=["phone", "desktop"])
def test_a_worker_scores_five_candidates_and_the_judgments_are_stored(live_server, monkeypatch, viewport):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    hit = published_batch(campaign, attention_rate=0).hits.get()
    items = list(hit.items.order_by("position").select_related("candidate"))
    url = (
        f"{live_server.url}/hits/{hit.pk}/?assignmentId=ASG1&hitId=3HIT&workerId=WORKER1"
        "&turkSubmitTo=https://workersandbox.mturk.com"
    )
    external = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.route(
                "https://workersandbox.mturk.com/**",
                lambda route: (
                    external.append(route.request.post_data or ""),
                    route.fulfill(status=200, content_type="text/html", body="<p>thanks</p>"),
                ),
            )
            page.goto(url)
            assert page.locator("#reference").inner_text() == hit.reference.text
            assert page.locator("input[type=range]").count() == 5
            shoot(page, "mturk-slider-page-" + ("phone" if viewport[0] < 600 else "desktop"))

            # submitting before every fluency is chosen is refused in the page
            page.click("#submit")
            assert "5 left" in page.locator("#hit-message").inner_text()
            assert not Assignment.objects.exists()

            wanted = {}
            for k, item in enumerate(items):
                cid, n = item.candidate_id, k + 1  # the page names sentences by their place
                slider = page.locator(f"#score-{n}")
                slider.focus()
                for _ in range(k * 5):
                    page.keyboard.press("ArrowRight")
                if k == 4:
                    page.keyboard.press("End")
                wanted[cid] = 100 if k == 4 else 50 + k * 5
                shown = str(wanted[cid]) if k else "not set"  # a slider nobody moved reads unset, not 50
                assert page.locator(f"#score-{n}-value").inner_text() == shown
                page.locator(f"input[name='fluency-{n}'][value='{1 if k == 1 else 2}']").check()
            # the first sentence is nonsensical: its slider is disabled and reads N/A
            page.locator("input[name='fluency-1'][value='0']").check()
            assert page.locator("#score-1").is_disabled()
            assert page.locator("#score-1-value").inner_text() == "N/A"
            page.fill("#comment", "clear task")

            with page.expect_request("https://workersandbox.mturk.com/mturk/externalSubmit"):
                page.click("#submit")
        finally:
            browser.close()

    assignment = Assignment.objects.get(external_assignment_id="ASG1")
    assert assignment.worker.external_id == "WORKER1" and assignment.comment == "clear task"
    stored = {j.candidate_id: (j.score, j.fluency) for j in Judgment.objects.filter(assignment=assignment)}
    expected = {cid: (score, 1 if k == 1 else 2) for k, (cid, score) in enumerate(wanted.items())}
    expected[items[0].candidate_id] = (None, 0)  # the first sentence, marked nonsensical
    assert stored == expected
    assert external and "assignmentId=ASG1" in external[0]


@pytest.mark.parametrize("viewport", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_a_local_annotator_must_set_every_slider_sees_the_save_and_can_return_a_hit(live_server, monkeypatch, viewport):
    """Issue 29: an untouched slider is no judgment; the next page says the HIT was saved; Return asks first and
    says what it did. Issue 37: a click on an unset slider (no thumb shown) puts it where clicked, as moved.
    Issue 46: before the page's script runs (held back here, as on a slow phone) the sliders read unset, not 50."""
    from django.conf import settings as django_settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    ann = get_user_model().objects.create_user("ann", password="pw-ann-123456")
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=5)
    published_batch(campaign, provider="local", attention_rate=0, degraded_rate=0, assignments=1)
    session = Client()
    session.force_login(ann)
    cookie = session.cookies[django_settings.SESSION_COOKIE_NAME].value
    name = "desktop" if viewport[0] > 600 else "phone"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
            context.add_cookies(
                [{"name": django_settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
            )
            page = context.new_page()
            page.goto(f"{live_server.url}/annotate/next/")
            held = []
            page.route(HIT_SCRIPT, lambda route: held.append(route))  # the HIT page's script waits until released
            page.click("#take")
            page.wait_for_selector("#hit-form")
            assert page.locator("#score-1-value").inner_text() == "not set"  # not "50", even with no script yet
            assert "thumbless" in page.locator("#item-1").get_attribute("class")  # and no thumb at 50
            held[0].continue_()
            page.unroute(HIT_SCRIPT)
            wait_until_ready(page)
            assert "2 more HITs for you after this one" in page.locator("#guide").inner_text()
            assert page.locator("#instructions").get_attribute("open") is not None  # a first HIT
            assert page.locator("#score-1-value").inner_text() == "not set"  # not "50"
            for n in range(1, 6):
                page.locator(f"input[name='fluency-{n}'][value='2']").check()
            page.evaluate("window.scrollTo(0, 0)")
            shoot(page, f"local-slider-page-{name}")
            page.click("#submit")
            message = page.locator("#hit-message").inner_text()
            assert "set the slider of sentence 1, 2, 3, 4, 5" in message.lower()
            assert not Assignment.objects.filter(status="submitted").exists()
            for n in range(1, 5):  # four moved by keyboard
                page.locator(f"#score-{n}").focus()
                page.keyboard.press("ArrowRight")
            page.locator("#score-5").scroll_into_view_if_needed()
            box = page.locator("#score-5").bounding_box()  # the fifth clicked at its middle: set to 50
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            assert page.locator("#score-5-value").inner_text() == "50"
            page.click("#submit")
            page.wait_for_selector("#saved-notice")
            wait_until_ready(page)  # Return asks first only once the script runs
            assert "Saved" in page.locator("#saved-notice").inner_text()
            stored = sorted(Judgment.objects.values_list("score", "slider_moved"))
            assert stored == [(50, True)] + [(51, True)] * 4  # placed by the click: the worker chose 50
            # Return: asked first (dismissed: nothing happens), then accepted
            page.once("dialog", lambda dialog: dialog.dismiss())
            page.click("#return")
            assert page.locator("#hit-form").count() == 1
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("#return")
            page.wait_for_selector("#returned-notice")
            assert Assignment.objects.filter(status="returned").count() == 1
        finally:
            browser.close()
