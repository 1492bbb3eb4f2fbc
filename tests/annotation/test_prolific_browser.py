"""Prolific participants in headless Chromium: from the study's start URL through their HITs on the slider
page to Prolific's completion URL; one who fails the attention checks is sent back with the other code."""

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import sync_playwright

from annotation.models import Assignment, Batch, HitItem, Judgment
from tests.screens import shoot

from .builders import published_batch, sample_campaign
from .prolific_stub import TOKEN, ProlificStub, serve
from .test_browser import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CAREFUL, CARELESS = "60aa00000000000000000001", "60aa00000000000000000002"


def _answer_hit(page, *, copy_score: str) -> int:
    """Rate every sentence of the open slider page (the copy of the reference gets ``copy_score``: the End or
    Home key) and submit; returns the HIT's id."""
    hit_id = int(urlsplit(page.url).path.strip("/").split("/")[-1])
    shoot(page, "prolific-slider-page" + ("-phone" if page.viewport_size["width"] < 600 else ""))
    copies = {
        p + 1 for p in HitItem.objects.filter(hit_id=hit_id, is_attention_check=True).values_list("position", flat=True)
    }  # the page names sentences by their place (1, 2, ...)
    for slider in page.locator("input[type=range]").all():
        place = int(slider.get_attribute("id").removeprefix("score-"))
        slider.focus()
        page.keyboard.press(copy_score if place in copies else "PageUp")
        page.locator(f"input[name='fluency-{place}'][value='2']").check()
    page.click("#submit")
    return hit_id


def _to_prolific(page) -> list[str]:
    """The start URL's redirects to Prolific, recorded and answered here (the test has no network, and
    Playwright does not route a redirect's target)."""
    sent_back: list[str] = []

    def handle(route):
        response = route.fetch(max_redirects=0)
        location = response.headers.get("location", "")
        if location.startswith("https://app.prolific.com/"):
            sent_back.append(location)
            route.fulfill(status=200, content_type="text/html", body="<p>Back on Prolific</p>")
        else:
            route.fulfill(response=response)

    page.route("**/prolific/*/start/*", handle)
    return sent_back


def _walk(page, start: str, *, copy_score: str, max_pages: int = 10) -> str:
    """Open the start URL and answer slider pages until the page is sent back to Prolific; returns where."""
    sent_back = _to_prolific(page)
    page.goto(start)
    for _ in range(max_pages):
        if sent_back:
            return sent_back[0]
        hit_id = _answer_hit(page, copy_score=copy_score)
        page.wait_for_url(lambda url, hit_id=hit_id: f"/hits/{hit_id}/" not in url, timeout=15000)
        page.wait_for_load_state()
    raise AssertionError(f"still on {page.url} after {max_pages} pages")


@pytest.mark.parametrize("viewport", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_participants_walk_from_the_start_url_to_their_completion_codes(live_server, monkeypatch, settings, viewport):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    stub = ProlificStub()  # Prolific's API, which confirms each session the start URL is opened with
    server = serve(stub)
    settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = stub.url, TOKEN
    for who in (CAREFUL, CARELESS):
        stub.add_submission(study="STUDY1", session=f"SESSION-{who[-1]}", participant=who, status="ACTIVE")
    campaign = sample_campaign(
        buckets=(5,),
        refs_per_bucket=4,
        candidates=4,
        settings={"min_attention_checks": 2, "max_attention_failure_rate": 0.4},
    )
    batch = published_batch(
        campaign,
        provider="prolific",
        assignments=2,
        attention_rate=1.0,
        degraded_rate=0.0,
        settings={"hits_per_session": 3},
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            ends = {}
            for who, copy_score in ((CAREFUL, "End"), (CARELESS, "Home")):
                page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
                start = (
                    f"{live_server.url}/prolific/{batch.pk}/start/?PROLIFIC_PID={who}&STUDY_ID=STUDY1"
                    f"&SESSION_ID=SESSION-{who[-1]}"
                )
                ends[who] = _walk(page, start, copy_score=copy_score)
                assert page.locator("body").inner_text() == "Back on Prolific"
                page.close()
        finally:
            browser.close()
            server.shutdown()
            server.server_close()
    assert stub.errors == []

    state = Batch.objects.get(pk=batch.pk).provider_state
    assert parse_qs(urlsplit(ends[CAREFUL]).query)["cc"] == [state["completion_code"]]
    assert parse_qs(urlsplit(ends[CARELESS]).query)["cc"] == [state["failed_code"]]
    careful = Assignment.objects.filter(worker__external_id=CAREFUL)
    assert careful.filter(status="submitted").count() == 3  # hits_per_session HITs, all different
    assert len(set(careful.values_list("hit_id", flat=True))) == 3
    assert Assignment.objects.filter(worker__external_id=CARELESS, status="submitted").count() == 2
    copies = Judgment.objects.filter(worker__external_id=CAREFUL, candidate__hit_items__is_attention_check=True)
    assert set(copies.values_list("score", flat=True)) == {100}
