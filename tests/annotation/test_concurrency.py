"""Concurrent requests never exceed a HIT's cap, and never give one annotator two HITs at once.

Real HTTP requests from real threads to a real server (``live_server``, one connection per request
thread). On PostgreSQL the HIT row lock serialises takes and the partial unique index
``one_open_assignment_per_worker`` refuses a second open assignment; SQLite has one writer at a time
(IMMEDIATE transactions). Either way the outcome must be exact."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.models import Assignment, AssignmentStatus

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db(transaction=True)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _session(user) -> tuple[str, str]:
    """(Cookie header, CSRF token) of a logged-in browser session of ``user``."""
    client = Client()
    client.force_login(user)
    page = client.get("/annotate/next/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    cookies = "; ".join(f"{k}={v.value}" for k, v in client.cookies.items())
    return cookies, token


def _take_all(base_url: str, sessions: list[tuple[str, str]]) -> list[str]:
    """POST /annotate/next/ once per session, all at the same moment; the Location (or status) of each."""
    opener = urllib.request.build_opener(_NoRedirect)
    outcomes: list[str] = []
    start = threading.Barrier(len(sessions))

    def take(cookie: str, token: str) -> None:
        request = urllib.request.Request(
            f"{base_url}/annotate/next/", data=b"", method="POST", headers={"Cookie": cookie, "X-CSRFToken": token}
        )
        start.wait()
        try:
            with opener.open(request, timeout=60) as response:
                outcomes.append(f"{response.status}")
        except urllib.error.HTTPError as exc:
            outcomes.append(exc.headers.get("Location") or f"{exc.code}")

    threads = [threading.Thread(target=take, args=s) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return outcomes


def _local_hit(slots: int, refs: int = 1):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=refs, candidates=5)
    return published_batch(campaign, provider="local", attention_rate=0, assignments=slots)


def test_concurrent_takes_never_exceed_the_cap(live_server):
    batch = _local_hit(slots=2)
    hit = batch.hits.get()
    users = [get_user_model().objects.create_user(f"u{n}", password="pw") for n in range(6)]
    outcomes = _take_all(live_server.url, [_session(u) for u in users])
    taken = Assignment.objects.filter(hit=hit, status=AssignmentStatus.ACCEPTED)
    assert taken.count() == 2
    assert sum(o.startswith(f"/hits/{hit.pk}/") for o in outcomes) == 2
    assert outcomes.count("200") == 4  # "no HIT left" for the others


def test_one_annotator_racing_requests_get_one_assignment(live_server):
    """The double take: quick repeated requests once gave one annotator two HITs (often the same one)."""
    batch = _local_hit(slots=3, refs=4)
    annotator = get_user_model().objects.create_user("ann", password="pw")
    session = _session(annotator)
    outcomes = _take_all(live_server.url, [session] * 8)
    open_ones = Assignment.objects.filter(worker__user=annotator, status=AssignmentStatus.ACCEPTED)
    assert open_ones.count() == 1 and Assignment.objects.count() == 1
    assignment = open_ones.get()
    assert {parse_qs(urlsplit(o).query)["assignmentId"][0] for o in outcomes} == {assignment.external_assignment_id}
    # every other HIT of the batch keeps all its slots
    assert all(h.assignments.count() == 0 for h in batch.hits.exclude(pk=assignment.hit_id))
