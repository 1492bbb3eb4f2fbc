"""Issue 37: the slider page on a phone, in headless Chromium. A careful phone worker must not fail the
attention checks the page makes hard: the reference stays in view beside the sentences, an unset slider
shows no thumb (a thumb at 50 is an anchor), a reload keeps the unsent answers, and a copy tapped at 95
passes under the default pass mark."""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from annotation.batch_settings import ATTENTION_PASS_MARK_DEFAULT
from annotation.models import Assignment, Judgment, Reference, Worker
from annotation.quality.workers import worker_quality
from tests.screens import shoot

from .builders import platform_confirms, published_batch, sample_campaign
from .test_browser import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
REFERENCE = (
    "The city council voted on Tuesday evening to expand the old public library and to open it "
    "again next spring."
)  # 20 words
SENTENCES = [
    "On Tuesday evening the council of the city decided that the old public library would grow and open next spring.",
    "The old library of the city will be closed for good after the council vote on Tuesday evening this week.",
    "Council members met on Tuesday and agreed that the public library should be larger and reopen in the spring.",
    "A vote on Tuesday by the city council means the public library gets bigger and opens its doors next spring.",
    "The council of the city voted on Tuesday to build a new sports hall next to the old public library downtown.",
]


def long_hit(*, attention_rate: float = 0):
    """A published MTurk HIT of a 20-word reference and five 20-word sentences (a copy of the reference among
    them when ``attention_rate`` is 1)."""
    real = len(SENTENCES) - (1 if attention_rate else 0)  # a check takes a free place of the five
    campaign = sample_campaign(buckets=(20,), refs_per_bucket=1, candidates=real)
    reference = Reference.objects.get(campaign=campaign)
    reference.text = REFERENCE
    reference.save()
    for candidate, text in zip(reference.candidates.order_by("pk"), SENTENCES):
        candidate.text = text
        candidate.save()
    batch = published_batch(
        campaign, lengths=(20,), attention_rate=attention_rate, degraded_rate=0, settings={"drop_non_words": False}
    )
    return batch.hits.get()


def page_url(live_server, hit, assignment: str = "ASG1", worker: str = "WORKER1") -> str:
    return (
        f"{live_server.url}/hits/{hit.pk}/?assignmentId={assignment}&hitId={hit.external_hit_id or 'H'}"
        f"&workerId={worker}&turkSubmitTo=https://workersandbox.mturk.com"
    )


def rect(page, selector: str) -> dict:
    return page.evaluate(
        "(s) => { const r = document.querySelector(s).getBoundingClientRect(); "
        "return {top: r.top, bottom: r.bottom, left: r.left, width: r.width}; }",
        selector,
    )


def tap_at(page, selector: str, value: int) -> None:
    """Touch the slider's track where ``value`` lies (the thumb's centre runs from half a thumb in from the left
    end to half a thumb in from the right: 1.5rem thumbs, hit.css)."""
    page.locator(selector).scroll_into_view_if_needed()
    box = page.locator(selector).bounding_box()
    half = 12  # half of a 1.5rem thumb
    x = box["x"] + half + (box["width"] - 2 * half) * value / 100
    page.touchscreen.tap(x, box["y"] + box["height"] / 2)


@pytest.fixture
def phone(monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2)
            context.route(
                "https://workersandbox.mturk.com/**",
                lambda route: route.fulfill(status=200, content_type="text/html", body="<p>thanks</p>"),
            )
            yield context
        finally:
            browser.close()


def test_on_a_phone_the_reference_stays_in_view_down_to_the_last_sentence(live_server, phone):
    hit = long_hit()
    page = phone.new_page()
    page.goto(page_url(live_server, hit))
    assert page.evaluate("document.documentElement.scrollHeight") > 2 * PHONE["height"]  # screens to scroll
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    last = rect(page, "#item-5")
    assert last["bottom"] <= PHONE["height"] + 1 and last["top"] < PHONE["height"]  # scrolled to the last one
    reference = rect(page, "#reference")
    assert 0 <= reference["top"] and reference["bottom"] <= PHONE["height"], reference  # still in view
    assert page.locator("#reference").inner_text() == REFERENCE
    # ... and not over the last sentence's slider: the worker can still reach it
    assert rect(page, "#score-5")["top"] >= rect(page, ".reference")["bottom"]
    tap_at(page, "#score-5", 70)  # for the picture: a set slider's thumb beside an unset one
    shoot(page, "mturk-slider-page-phone-scrolled")


def test_an_unset_slider_shows_no_thumb_until_touched_where_the_touch_puts_it(live_server, phone):
    hit = long_hit()
    page = phone.new_page()
    page.goto(page_url(live_server, hit))
    slider = page.locator("#score-2")
    slider.scroll_into_view_if_needed()
    unset = slider.screenshot()
    # nothing on an unset slider depends on the value it holds: no thumb (nor fill) to anchor on
    page.evaluate("document.getElementById('score-2').value = '90'")
    assert slider.screenshot() == unset
    page.evaluate("document.getElementById('score-2').value = '50'")
    assert page.locator("#score-2-value").inner_text() == "not set"
    track = slider.bounding_box()
    tap_at(page, "#score-2", 30)  # the first touch sets the value where touched
    value = int(page.locator("#score-2-value").inner_text())
    assert abs(value - 30) <= 2 and int(slider.input_value()) == value
    moved = slider.bounding_box()
    assert (moved["x"], moved["width"]) == (track["x"], track["width"])  # the track stayed under the finger
    assert slider.screenshot() != unset  # the thumb now shows where it was put
    # a keyboard user still sets a slider: arrow keys move it from the value it holds
    page.locator("#score-3").focus()
    page.keyboard.press("ArrowLeft")
    assert page.locator("#score-3-value").inner_text() == "49"
    # an unset slider still blocks Submit
    for n in range(1, 6):
        page.locator(f"input[name='fluency-{n}'][value='2']").check()
    page.click("#submit")
    assert "set the slider of sentence 1, 4, 5" in page.locator("#hit-message").inner_text().lower()
    assert not Assignment.objects.exists()


def test_a_reload_keeps_the_unsent_answers_of_this_hit_only_until_they_are_saved(live_server, phone):
    hit = long_hit()
    page = phone.new_page()
    page.goto(page_url(live_server, hit))
    tap_at(page, "#score-1", 80)
    first = page.locator("#score-1-value").inner_text()
    page.locator("#score-2").focus()
    page.keyboard.press("End")
    page.locator("input[name='fluency-1'][value='1']").check()
    page.locator("input[name='fluency-3'][value='0']").check()
    page.fill("#comment", "long sentences")
    page.reload()
    page.wait_for_selector("#hit-form")
    assert page.locator("#score-1-value").inner_text() == first and first != "not set"
    assert page.locator("#score-2-value").inner_text() == "100"
    assert page.locator("#score-3-value").inner_text() == "N/A" and page.locator("#score-3").is_disabled()
    assert page.locator("#score-4-value").inner_text() == "not set"
    assert page.locator("input[name='fluency-1'][value='1']").is_checked()
    assert page.locator("#comment").input_value() == "long sentences"
    assert "answers on this page are back" in page.locator("#hit-message").inner_text()

    # another HIT's page (another assignment) starts empty
    other = long_hit_in_same_campaign(hit)
    second = phone.new_page()
    second.goto(page_url(live_server, other, assignment="ASG2"))
    assert second.locator("#score-1-value").inner_text() == "not set"
    assert second.locator("#comment").input_value() == ""
    assert not second.locator("input[name='fluency-1'][value='1']").is_checked()
    second.close()

    # finished and submitted: what was kept is what is stored, and the page keeps nothing afterwards
    for n in (4, 5):
        tap_at(page, f"#score-{n}", 60)
        page.locator(f"input[name='fluency-{n}'][value='2']").check()
    page.locator("input[name='fluency-2'][value='2']").check()
    with page.expect_request("https://workersandbox.mturk.com/mturk/externalSubmit"):
        page.click("#submit")
    assignment = Assignment.objects.get(external_assignment_id="ASG1")
    place = dict(hit.items.values_list("candidate_id", "position"))
    scores = {
        place[c]: score
        for c, score in Judgment.objects.filter(assignment=assignment).values_list("candidate_id", "score")
    }
    assert scores[0] == int(first) and scores[1] == 100 and scores[2] is None
    assert assignment.comment == "long sentences"
    page.goto(live_server.url + "/")  # back on the site's origin, where the answers were kept
    kept = page.evaluate("Object.keys(localStorage).filter((k) => k.indexOf('paraforge-answers:') === 0).length")
    assert kept == 0


def long_hit_in_same_campaign(hit):
    """A second published HIT with the same sentences as ``hit`` but its own keys (a batch of its own)."""
    campaign = hit.batch.campaign
    batch = published_batch(
        campaign, lengths=(20,), attention_rate=0, degraded_rate=0, settings={"drop_non_words": False}
    )
    return batch.hits.get()


def test_a_copy_tapped_at_95_on_a_phone_passes_the_attention_check_by_default(live_server, phone):
    hit = long_hit(attention_rate=1)
    copy = hit.items.get(is_attention_check=True).position + 1  # the page names sentences by their place
    assert hit.batch.settings["attention_pass_mark"] == ATTENTION_PASS_MARK_DEFAULT
    page = phone.new_page()
    page.goto(page_url(live_server, hit))
    sentences = page.locator("fieldset.candidate").count()
    for n in range(1, sentences + 1):
        tap_at(page, f"#score-{n}", 95 if n == copy else 40)
        page.locator(f"input[name='fluency-{n}'][value='2']").check()
    tapped = int(page.locator(f"#score-{copy}-value").inner_text())
    assert 93 <= tapped <= 97  # a careful tap near the right end: not exactly 100
    with page.expect_request("https://workersandbox.mturk.com/mturk/externalSubmit"):
        page.click("#submit")
    platform_confirms("ASG1")  # the rules count what MTurk confirmed
    worker = Worker.objects.get(external_id="WORKER1")
    quality = worker_quality(worker=worker, campaign=hit.batch.campaign)
    assert (quality.attention_passed, quality.attention_failed) == (1, 0)


def test_a_refused_submit_on_a_phone_says_why_on_screen_beside_the_sentence_it_shows(live_server, phone):
    """Issue 48: Submit with a sentence unanswered scrolls to that sentence; the reason must be on screen with it
    (not left by the Submit button, screens below), must not cover it, and goes once it is answered."""
    hit = long_hit()
    page = phone.new_page()
    page.goto(page_url(live_server, hit))
    for n in range(1, 4):
        tap_at(page, f"#score-{n}", 60)
        page.locator(f"input[name='fluency-{n}'][value='2']").check()
    page.locator("#submit").scroll_into_view_if_needed()
    page.click("#submit")  # sentences 4 and 5 unanswered
    assert "2 left" in page.locator("#hit-message").inner_text()
    page.locator("input[name='fluency-5'][value='2']").check()
    page.locator("#item-1").scroll_into_view_if_needed()  # the worker scrolled up again: the page shows sentence 4
    page.click("#submit")
    assert "1 left" in page.locator("#hit-message").inner_text()
    shown, said = rect(page, "#item-4"), rect(page, "#hit-message")
    assert 0 <= shown["top"] and shown["bottom"] <= PHONE["height"], shown  # the sentence asked about
    assert 0 <= said["top"] and said["bottom"] <= PHONE["height"], said  # and why, both on screen
    assert said["top"] >= rect(page, "#item-4 .fluency")["bottom"]  # not over the answers it asks for
    shoot(page, "mturk-slider-page-phone-refused")
    page.locator("input[name='fluency-4'][value='2']").check()
    page.click("#submit")
    assert "set the slider of sentence 4, 5" in page.locator("#hit-message").inner_text().lower()
    said = rect(page, "#hit-message")
    assert 0 <= said["top"] and said["bottom"] <= PHONE["height"], said
    assert said["top"] >= rect(page, "#score-4")["bottom"]
    tap_at(page, "#score-4", 60)
    assert "set the slider" in page.locator("#hit-message").inner_text()  # sentence 5 still waits
    tap_at(page, "#score-5", 60)
    assert page.locator("#hit-message").inner_text() == ""  # every sentence it named answered: the reason goes
    page.click("#submit")
    page.wait_for_url("https://workersandbox.mturk.com/**")
    assert Judgment.objects.count() == 5
