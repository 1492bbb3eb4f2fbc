import re
from datetime import timedelta
from pathlib import Path

import pytest

from annotation.hits.tokens import item_key, submission_token_verify
from annotation.models import Candidate, Hit
from annotation.web.views import external_submit_url

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db
STATIC = Path(__file__).resolve().parents[2] / "frontend" / "static" / "frontend"


@pytest.fixture
def hit():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    return published_batch(campaign, attention_rate=0).hits.get()


def open_page(client, hit, assignment="A1", worker="W1", **extra):
    query = {
        "assignmentId": assignment,
        "hitId": "3HIT",
        "workerId": worker,
        "turkSubmitTo": "https://workersandbox.mturk.com",
        **extra,
    }
    return client.get(f"/hits/{hit.pk}/", query)


def meta_token(html: str) -> str:
    start = html.index('name="submission-token" content="') + len('name="submission-token" content="')
    return html[start : html.index('"', start)]


def test_an_accepted_hit_shows_everything_and_carries_a_bound_token(client, hit):
    response = open_page(client, hit)
    html = response.content.decode()
    assert response.status_code == 200
    assert "X-Frame-Options" not in response and "frame-ancestors" in response["Content-Security-Policy"]
    assert f'<strong id="reference">{hit.reference.text}</strong>' in html
    for n, item in enumerate(hit.items.order_by("position"), 1):
        assert item.candidate.text in html
        assert f'data-item="{item_key(hit_id=hit.pk, candidate_id=item.candidate_id)}" id="item-{n}"' in html
        assert f'id="score-{n}"' in html and 'value="50"' in html
        for value in ("0", "1", "2"):
            assert f'name="fluency-{n}" value="{value}"' in html
    assert html.count('type="range"') == 5 and "<textarea" in html and "worked examples" in html.lower()
    assert submission_token_verify(token=meta_token(html), hit_id=hit.pk, assignment_id="A1", worker_id="W1")
    assert 'data-external-submit="https://workersandbox.mturk.com/mturk/externalSubmit"' in html
    assert "/static/frontend/hit.js" in html and "/static/frontend/hit.css" in html
    # nothing loaded from elsewhere (in src and href: the page's tokens may hold "cdn" by chance)
    assert "http://" not in html.replace("http://www.w3.org", "")
    assert not re.search(r'(?:src|href)="[^"]*cdn', html, re.IGNORECASE)


def test_preview_mode_shows_the_task_but_cannot_submit(client, hit):
    html = open_page(client, hit, assignment="ASSIGNMENT_ID_NOT_AVAILABLE", worker="").content.decode()
    assert "Preview" in html and meta_token(html) == ""
    assert '<button type="submit" id="submit" disabled>' in html
    # an example, never the HIT's own sentences: anyone may preview, and a bot would learn the HIT first
    assert "The committee approved the new budget on Monday." in html and html.count('type="range"') == 5
    assert hit.reference.text not in html
    assert not any(item.candidate.text in html for item in hit.items.all())


def test_sentences_are_escaped(client, hit):
    item = hit.items.first()
    Candidate.objects.filter(pk=item.candidate_id).update(text="<script>alert(1)</script> & <b>bold</b>")
    hit.reference.text = '"><img src=x onerror=alert(2)>'
    hit.reference.save()
    html = open_page(client, hit).content.decode()
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in html


def test_work_is_only_posted_to_mturk_hosts():
    assert external_submit_url("https://www.mturk.com") == "https://www.mturk.com/mturk/externalSubmit"
    assert (
        external_submit_url("https://workersandbox.mturk.com/")
        == "https://workersandbox.mturk.com/mturk/externalSubmit"
    )
    for bad in ("https://evil.example.com", "http://www.mturk.com", "javascript:alert(1)", ""):
        assert external_submit_url(bad) is None


def test_no_submit_for_a_worker_who_already_judged_or_a_wrong_hit_id(client, hit):
    from annotation.models import Assignment, Judgment, Worker

    Hit.objects.filter(pk=hit.pk).update(external_hit_id="3HIT")
    assert open_page(client, hit, hitId="3OTHER").status_code == 400
    worker = Worker.objects.create(provider="mturk", external_id="W1")
    a = Assignment.objects.create(
        campaign=hit.batch.campaign, hit=hit, worker=worker, provider="mturk", external_assignment_id="A0"
    )
    Judgment.objects.create(assignment=a, worker=worker, candidate=hit.items.first().candidate, score=1, fluency=2)
    html = open_page(client, hit).content.decode()
    assert "already judged" in html and meta_token(html) == ""


def test_the_static_files_are_the_apps_own():
    for name in ("hit.js", "hit.css"):
        text = (STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "@import" not in text


def test_a_draft_or_expired_hit_offers_no_submit(client, hit):
    from django.utils import timezone

    from annotation.models import Batch

    Batch.objects.filter(pk=hit.batch_id).update(status="draft")
    html = open_page(client, hit).content.decode()
    assert "not open yet" in html and meta_token(html) == ""
    Batch.objects.filter(pk=hit.batch_id).update(status="published")
    Hit.objects.filter(pk=hit.pk).update(expires_at=timezone.now())
    html = open_page(client, hit).content.decode()
    assert "expired" in html and meta_token(html) == ""


def test_a_page_view_costs_two_queries_once_the_hits_sentences_are_rendered(client, hit, django_assert_num_queries):
    """The load budget (bench/load.py: 200 views/s on two cores) rests on this: one statement reads the
    page's facts, one counts the view; a new assignment's first view also counts it against the caps and
    binds it: four in all (issue 46)."""
    open_page(client, hit, assignment="A0", worker="W0")  # renders and remembers the sentences
    with django_assert_num_queries(4):
        open_page(client, hit, assignment="A9", worker="W9")
    with django_assert_num_queries(2):
        response = open_page(client, hit, assignment="A9", worker="W9")
    assert response.status_code == 200 and hit.items.first().candidate.text in response.content.decode()


def test_remembered_sentences_belong_to_that_very_hit(client, hit):
    """A HIT id reused (a database rolled back and filled again) never shows the old HIT's sentences."""
    item = hit.items.first()
    other = sample_campaign("other", buckets=(5,), refs_per_bucket=1, candidates=5)
    other_hit = published_batch(other, attention_rate=0).hits.get()
    assert item.candidate.text in open_page(client, hit).content.decode()
    assert other_hit.items.first().candidate.text in open_page(client, other_hit, assignment="A2").content.decode()
    # the same id, now another HIT (another creation time) with other sentences
    Candidate.objects.filter(pk=item.candidate_id).update(text="an entirely new sentence")
    Hit.objects.filter(pk=hit.pk).update(created_at=hit.created_at + timedelta(seconds=1))
    html = open_page(client, hit, assignment="A3").content.decode()
    assert "an entirely new sentence" in html and item.candidate.text not in html


def test_a_blocked_view_of_a_published_crowd_hit_shows_none_of_its_items(client, hit):
    """Issue 46: a wrong hitId, a missing worker id or a malformed id gave a 400 page that still listed the
    reference and every item, so a scraper read a published HIT's checks before any work was done."""
    Hit.objects.filter(pk=hit.pk).update(external_hit_id="3HIT")
    texts = [hit.reference.text] + [item.candidate.text for item in hit.items.all()]
    for extra in ({"hitId": "3OTHER"}, {"worker": ""}, {"worker": "W1<script>"}):
        response = open_page(client, hit, **extra)
        html = response.content.decode()
        assert response.status_code == 400, extra
        assert not any(text in html for text in texts), extra
    # the worker the platform sent still sees them
    html = open_page(client, hit).content.decode()
    assert all(text in html for text in texts)
