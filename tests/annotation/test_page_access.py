"""Issue 46: a published MTurk HIT's items only for an assignment the page may admit (``annotation.hits.access``).

The scrape these tests reproduce: ``GET /hits/<id>/?assignmentId=<made up>&workerId=<made up>`` on every
published HIT read the reference and every item, with nothing recorded."""

from __future__ import annotations

import pytest

from annotation.hits.page import EXAMPLE_REFERENCE
from annotation.models import HitView

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db


def open_page(client, hit, assignment, worker, address="203.0.113.7"):
    query = {"assignmentId": assignment, "hitId": hit.external_hit_id, "workerId": worker}
    return client.get(f"/hits/{hit.pk}/", query, REMOTE_ADDR=address)


def shows_items(response, hit) -> bool:
    html = response.content.decode()
    return hit.reference.text in html and all(item.candidate.text in html for item in hit.items.all())


def hits_of(n: int, *, assignments: int = 3):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=n, candidates=5)
    return list(published_batch(campaign, attention_rate=0, assignments=assignments).hits.all()[:n])


def test_a_scrape_with_made_up_ids_reads_no_more_hits_than_the_address_may_open(client, settings):
    settings.ANNOTATION_HIT_VIEW_ADDRESS_RATE = "4/h"
    hits = hits_of(8)
    pages = [open_page(client, hit, f"3SCRAPE{n:04d}", f"AFAKE{n:04d}") for n, hit in enumerate(hits)]
    read = [shows_items(page, hit) for page, hit in zip(pages, hits)]
    assert read == [True] * 4 + [False] * 4
    for page in pages[4:]:  # the rest: the preview's example and why, nothing of the HIT
        html = page.content.decode()
        assert page.status_code == 429 and int(page["Retry-After"]) > 0
        assert EXAMPLE_REFERENCE in html and "Too many new assignments" in html
        assert 'name="submission-token" content=""' in html
    # every admitted view is on record: which assignment, worker and address read which HIT
    assert sorted(HitView.objects.values_list("hit_id", "external_assignment_id", "address")) == [
        (hit.pk, f"3SCRAPE{n:04d}", "203.0.113.7") for n, hit in enumerate(hits[:4])
    ]
    # another address is counted on its own
    assert shows_items(open_page(client, hits[5], "3OTHER0001", "AOTHER", address="198.51.100.2"), hits[5])


def test_an_assignment_id_is_bound_to_the_worker_and_hit_of_its_first_view(client):
    first, second = hits_of(2)
    assert shows_items(open_page(client, first, "3ASSIGN1", "AWORKER1"), first)
    for page in (open_page(client, first, "3ASSIGN1", "AWORKER2"), open_page(client, second, "3ASSIGN1", "AWORKER1")):
        html = page.content.decode()
        assert page.status_code == 403 and "opened by another worker" in html
        assert not any(text in html for text in (first.reference.text, second.reference.text))
    again = open_page(client, first, "3ASSIGN1", "AWORKER1")  # a reload
    assert again.status_code == 200 and shows_items(again, first)
    view = HitView.objects.get(external_assignment_id="3ASSIGN1")
    assert (view.hit_id, view.worker_external_id, view.views) == (first.pk, "AWORKER1", 2)
    assert view.last_seen >= view.first_seen


def test_a_hit_admits_as_many_assignment_ids_as_it_has_assignments_plus_the_spare(client, settings):
    settings.ANNOTATION_HIT_VIEW_SPARE = 1
    (hit,) = hits_of(1, assignments=2)
    admitted = [
        shows_items(open_page(client, hit, f"3ID{n}", f"AW{n}", address=f"198.51.100.{n}"), hit) for n in range(5)
    ]
    assert admitted == [True, True, True, False, False]
    page = open_page(client, hit, "3ID9", "AW9", address="198.51.100.9")
    assert page.status_code == 429 and "more assignments than it has" in page.content.decode()
    # the ones admitted keep their page
    assert shows_items(open_page(client, hit, "3ID0", "AW0", address="198.51.100.0"), hit)
