"""The worker's page as a worker meets it (issue 29): where they are, what it pays, instructions that match
the HIT and start open on a first HIT, a saved HIT that says so, a Return that says what it did, error
pages that are pages of the site with a way on, and judgments that record whether the slider was moved."""

from __future__ import annotations

import csv
import io
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model

from annotation.batches.exports import batch_results_csv
from annotation.models import Assignment, Judgment

from .builders import payload, published_batch, sample_campaign
from .prolific_stub import TOKEN, ProlificStub, serve

pytestmark = pytest.mark.django_db


def user(name: str):
    return get_user_model().objects.create_user(name, password="pw")


def token_of(html: str) -> str:
    return re.search(r'name="submission-token" content="([^"]*)"', html).group(1)


def query_of(location: str) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def submit_page(client, location: str, html: str, *, moved=True) -> dict:
    """Post the judgments the page would for every sentence (as its data-item keys name them)."""
    query = query_of(location)
    body = {
        "assignment_id": query["assignmentId"],
        "worker_id": query["workerId"],
        "token": token_of(html),
        "judgments": [
            {"item": key, "score": 80, "fluency": 2, "moved": moved} for key in re.findall(r'data-item="(\w+)"', html)
        ],
    }
    hit_id = int(urlsplit(location).path.strip("/").split("/")[-1])
    saved = client.post(f"/api/hits/{hit_id}/assignments/", json.dumps(body), content_type="application/json")
    assert saved.status_code == 201, saved.content
    return saved.json()


@pytest.fixture
def local_batch():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=5)
    return published_batch(campaign, provider="local", attention_rate=0, degraded_rate=0, assignments=1)


def test_a_local_annotator_sees_what_is_left_is_told_each_save_and_meets_open_instructions_once(client, local_batch):
    client.force_login(user("ann"))
    first = client.post("/annotate/next/")["Location"]
    html = client.get(first).content.decode()
    assert "2 more HITs for you after this one" in html
    assert 'id="instructions" open' in html and "a <strong>reference sentence</strong> and 5 other sentences" in html
    assert 'data-must-move="1"' in html and "Saved:" not in html
    submit_page(client, first, html)
    # the page's next step after a save (hit.js posts its next-form, which carries saved=1)
    second = client.post("/annotate/next/", {"saved": "1"})["Location"]
    html = client.get(second).content.decode()
    assert query_of(second)["saved"] == "1" and "Saved: your answers to the previous HIT were stored" in html
    assert "1 more HIT for you after this one" in html and 'id="instructions" open' not in html
    submit_page(client, second, html)
    third = client.get(client.post("/annotate/next/", {"saved": "1"})["Location"]).content.decode()
    assert "Your last HIT" in third
    assert {j.slider_moved for j in Judgment.objects.all()} == {True}
    out = io.StringIO()  # and the results file says so, per sentence
    batch_results_csv(batch=local_batch, out=out)
    assert {
        row[f"Answer.cand{k}_moved"] for row in csv.DictReader(io.StringIO(out.getvalue())) for k in range(1, 6)
    } == {"1"}


def test_return_is_confirmed_on_the_page_and_says_what_it_did(client, local_batch):
    client.force_login(user("ann"))
    location = client.post("/annotate/next/")["Location"]
    html = client.get(location).content.decode()
    assert 'id="return" class="secondary"' in html and "not offered to you again" in html
    returned = client.post("/annotate/return/", {"assignment": query_of(location)["assignmentId"]})
    page = client.get(returned["Location"]).content.decode()
    assert "You returned the HIT" in page and 'id="take"' in page


def test_an_mturk_worker_sees_the_pay_and_a_hit_with_fewer_sentences_says_how_many(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=3)
    hit = published_batch(campaign, attention_rate=0, degraded_rate=0, settings={"reward_usd": "0.25"}).hits.get()
    html = client.get(f"/hits/{hit.pk}/", {"assignmentId": "A1", "hitId": "", "workerId": "W1"}).content.decode()
    assert "$0.25 for this HIT, about 1 minute" in html
    assert "and 3 other sentences" in html and "five other sentences" not in html
    preview = client.get(f"/hits/{hit.pk}/").content.decode()  # a preview: no pay line for nobody, instructions open
    assert 'id="guide"' not in preview and 'id="instructions" open' in preview


def test_a_prolific_participant_sees_their_place_in_the_session_and_the_sessions_pay(client, settings):
    stub = ProlificStub()
    server = serve(stub)
    try:
        settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = stub.url, TOKEN
        campaign = sample_campaign(buckets=(5,), refs_per_bucket=3, candidates=5)
        batch = published_batch(
            campaign,
            provider="prolific",
            attention_rate=0,
            degraded_rate=0,
            settings={"hits_per_session": 2, "reward_per_session": "1.20", "estimated_minutes": 6},
        )
        stub.add_submission(study="S1", session="SESS", participant="P1", status="ACTIVE")
        start = f"/prolific/{batch.pk}/start/?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=SESS"
        location = client.get(start)["Location"]
        html = client.get(location).content.decode()
        assert "HIT 1 of 2 in this session" in html and "$1.20 for the session of 2 HITs, about 6 minutes" in html
        submit_page(client, location, html, moved=False)
        continue_url = re.search(r'data-continue="([^"]+)"', html).group(1).replace("&amp;", "&")
        second = client.get(continue_url)["Location"]
        html = client.get(second).content.decode()
        assert "HIT 2 of 2 in this session" in html and "Saved: your answers" in html
        assert {j.slider_moved for j in Judgment.objects.all()} == {False}
    finally:
        server.shutdown()
        server.server_close()


def test_the_papers_slider_behaviour_is_a_batch_setting(client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    hit = published_batch(campaign, attention_rate=0, settings={"slider_must_move": False}).hits.get()
    html = client.get(f"/hits/{hit.pk}/", {"assignmentId": "A1", "hitId": "", "workerId": "W1"}).content.decode()
    assert 'data-must-move="0"' in html and "Every slider" not in html
    body = payload(hit)  # an API client that says nothing of the slider: recorded as unknown
    assert (
        client.post(f"/api/hits/{hit.pk}/assignments/", json.dumps(body), content_type="application/json").status_code
        == 201
    )
    assert {j.slider_moved for j in Judgment.objects.all()} == {None}


@pytest.mark.parametrize(
    "url,status",
    [("/hits/999999/", 404), ("/no/such/page/", 404), ("/hits/{local}/", 404), ("/hits/{local}/?assignmentId=X", 302)],
)
def test_error_pages_are_pages_of_the_site_with_a_way_on(client, local_batch, url, status):
    response = client.get(url.format(local=local_batch.hits.first().pk))
    assert response.status_code == status
    if status == 404:
        html = response.content.decode()
        assert '<header class="site">' in html and 'href="/annotate/next/"' in html and "Nothing here" in html
    assert client.get("/api/no/such/").json()["code"] == "not_found"  # the API keeps its JSON


def test_someone_elses_assignment_says_so_and_offers_their_own_next_hit(client, local_batch):
    client.force_login(user("owner"))
    location = client.post("/annotate/next/")["Location"]
    client.force_login(user("intruder"))
    page = client.get(location)
    html = page.content.decode()
    assert page.status_code == 403 and "not yours" in html
    assert re.search(r'<a href="/annotate/next/" id="way-on">Go to your next HIT</a>', html)
    assert not Assignment.objects.filter(worker__user__username="intruder").exists()


@pytest.mark.parametrize("field", ["workerId", "assignmentId"])
def test_an_id_no_platform_gives_is_a_page_not_a_server_error(client, local_batch, field):
    hit = local_batch.hits.first()
    query = {"assignmentId": "A1", "workerId": "W1", field: "W\x00\u200b1"}
    client.force_login(user("ann"))
    page = client.get(f"/hits/{hit.pk}/", query)
    assert page.status_code in (400, 403) and '<header class="site">' in page.content.decode()
    assert client.post("/annotate/return/", {"assignment": "A\x001"}).status_code == 302
