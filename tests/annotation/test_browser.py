"""The slider page in headless Chromium: open, move sliders by keyboard, choose fluency, submit."""

import pytest
from playwright.sync_api import sync_playwright

from annotation.models import Assignment, Judgment

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


def test_a_worker_scores_five_candidates_and_the_judgments_are_stored(live_server, monkeypatch):
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
            page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
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
                assert page.locator(f"#score-{n}-value").inner_text() == str(wanted[cid])
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
