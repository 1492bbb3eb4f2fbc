"""What the slider page needs, fetched cheaply: it is the one page every worker opens for every HIT.

Two parts, because they change at different speeds:

* :func:`hit_page_facts` -- everything that can change between two views (the batch's status, the
  HIT's expiry, whether this assignment was already submitted, whether this worker is disqualified
  or has already judged a sentence of the HIT) in **one** SQL statement. It is written by hand (from
  the models' table and column names) because compiling the equivalent three or four ORM queries
  cost more CPU than everything else the page does (bench/load.py: 200 views/s on two cores).
* :func:`hit_content_html` -- the reference and the candidates as HTML, which never change once a
  batch exists (HIT items are only created with their HIT). Rendered once per HIT per process and
  remembered, keyed by the HIT's id *and* creation time so a reused id (a test database rolled back)
  never shows another HIT's sentences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from django.db import connection
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from annotation.hits.tokens import item_key
from annotation.models import (
    SUBMITTED_STATUSES,
    Assignment,
    Batch,
    Hit,
    HitItem,
    HitView,
    Judgment,
    Verification,
    Worker,
)


@dataclass(frozen=True, slots=True)
class HitPageFacts:
    """The HIT and what is known about this (assignment, worker) pair, as of this request."""

    hit_id: int
    external_hit_id: str
    created_at: datetime
    max_assignments: int
    expires_at: datetime | None
    batch_status: str
    provider: str
    assignment_status: str | None  # of the assignment with the page's assignmentId on this provider
    assignment_hit_id: int | None
    assignment_worker_external_id: str | None
    assignment_worker_user_id: int | None
    view_hit_id: int | None  # the HIT and worker id the page's assignmentId was first opened for (``HitView``)
    view_worker_external_id: str | None
    worker_exists: bool  # a worker with the page's workerId exists on this provider
    worker_disqualified: bool
    worker_has_judged: bool  # ... and has judged one of this HIT's candidates (verified judgments only)
    worker_has_submitted: bool  # ... and has submitted any HIT before (the instructions start open until then)
    batch_settings: dict  # Batch.settings: pay, session length, whether sliders must be moved


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _col(model, field: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(field).column)


@lru_cache(maxsize=4)
def _facts_sql(vendor: str) -> str:
    """The statement (built from the models' names, once per database vendor)."""
    hit, batch, assignment, worker, judgment, item, view = (
        _table(m) for m in (Hit, Batch, Assignment, Worker, Judgment, HitItem, HitView)
    )
    h, b, a, aw, w, v = "h", "b", "a", "aw", "w", "v"
    submitted = ", ".join(f"'{status.value}'" for status in SUBMITTED_STATUSES)
    return (
        f"SELECT {h}.{_col(Hit, 'id')}, {h}.{_col(Hit, 'external_hit_id')}, {h}.{_col(Hit, 'created_at')}, "
        f"{h}.{_col(Hit, 'max_assignments')}, "
        f"{h}.{_col(Hit, 'expires_at')}, {b}.{_col(Batch, 'status')}, {b}.{_col(Batch, 'provider')}, "
        f"{a}.{_col(Assignment, 'status')}, {a}.{_col(Assignment, 'hit')}, {aw}.{_col(Worker, 'external_id')}, "
        f"{aw}.{_col(Worker, 'user')}, {w}.{_col(Worker, 'id')}, {w}.{_col(Worker, 'disqualified')}, "
        f"CASE WHEN {w}.{_col(Worker, 'id')} IS NULL THEN 0 ELSE ("
        f"SELECT COUNT(*) FROM {judgment} j JOIN {item} i ON i.{_col(HitItem, 'candidate')} = "
        f"j.{_col(Judgment, 'candidate')} JOIN {assignment} ja ON ja.{_col(Assignment, 'id')} = "
        f"j.{_col(Judgment, 'assignment')} WHERE i.{_col(HitItem, 'hit')} = {h}.{_col(Hit, 'id')} "
        f"AND j.{_col(Judgment, 'worker')} = {w}.{_col(Worker, 'id')} "
        f"AND ja.{_col(Assignment, 'verification')} = '{Verification.VERIFIED.value}') END, "
        f"CASE WHEN EXISTS (SELECT 1 FROM {assignment} sa WHERE sa.{_col(Assignment, 'worker')} = "
        f"{w}.{_col(Worker, 'id')} AND sa.{_col(Assignment, 'status')} IN ({submitted})) THEN 1 ELSE 0 END, "
        f"{b}.{_col(Batch, 'settings')}, {v}.{_col(HitView, 'hit')}, {v}.{_col(HitView, 'worker_external_id')} "
        f"FROM {hit} {h} JOIN {batch} {b} ON {b}.{_col(Batch, 'id')} = {h}.{_col(Hit, 'batch')} "
        f"LEFT JOIN {assignment} {a} ON {a}.{_col(Assignment, 'provider')} = {b}.{_col(Batch, 'provider')} "
        f"AND {a}.{_col(Assignment, 'external_assignment_id')} = %s "
        f"LEFT JOIN {worker} {aw} ON {aw}.{_col(Worker, 'id')} = {a}.{_col(Assignment, 'worker')} "
        f"LEFT JOIN {view} {v} ON {v}.{_col(HitView, 'provider')} = {b}.{_col(Batch, 'provider')} "
        f"AND {v}.{_col(HitView, 'external_assignment_id')} = %s "
        f"LEFT JOIN {worker} {w} ON {w}.{_col(Worker, 'provider')} = {b}.{_col(Batch, 'provider')} "
        f"AND {w}.{_col(Worker, 'external_id')} = %s "
        f"WHERE {h}.{_col(Hit, 'id')} = %s"
    )


def _datetime(value, field) -> datetime | None:
    """A datetime column as the ORM would give it (SQLite hands raw cursors strings)."""
    if value is None:
        return None
    expression = field.cached_col
    for converter in connection.ops.get_db_converters(expression):
        value = converter(value, expression, connection)
    return value


def hit_page_facts(*, hit_id: int, assignment_id: str, worker_id: str) -> HitPageFacts | None:
    """The page's facts for a HIT (None if there is no such HIT)."""
    with connection.cursor() as cursor:
        cursor.execute(_facts_sql(connection.vendor), [assignment_id, assignment_id, worker_id, hit_id])
        row = cursor.fetchone()
    if row is None:
        return None
    (
        pk,
        external_hit_id,
        created_at,
        max_assignments,
        expires_at,
        batch_status,
        provider,
        a_status,
        a_hit,
        a_worker,
        a_user,
        w_pk,
        w_disqualified,
        judged,
        submitted_before,
        batch_settings,
        v_hit,
        v_worker,
    ) = row
    return HitPageFacts(
        hit_id=pk,
        external_hit_id=external_hit_id,
        created_at=_datetime(created_at, Hit._meta.get_field("created_at")),
        max_assignments=max_assignments,
        expires_at=_datetime(expires_at, Hit._meta.get_field("expires_at")),
        batch_status=batch_status,
        provider=provider,
        assignment_status=a_status,
        assignment_hit_id=a_hit,
        assignment_worker_external_id=a_worker,
        assignment_worker_user_id=a_user,
        view_hit_id=v_hit,
        view_worker_external_id=v_worker,
        worker_exists=w_pk is not None,
        worker_disqualified=bool(w_disqualified),
        worker_has_judged=bool(judged),
        worker_has_submitted=bool(submitted_before),
        batch_settings=(json.loads(batch_settings) if isinstance(batch_settings, str) else batch_settings) or {},
    )


@dataclass(frozen=True, slots=True)
class HitContent:
    html: SafeString  # the reference and the sentences to rate
    sentences: int  # how many sentences the worker rates (the instructions say so)


def hit_content(facts: HitPageFacts) -> HitContent:
    """The reference and candidates of the HIT as HTML (escaped; rendered once per HIT and process)."""
    return _content(facts.hit_id, facts.created_at)


@lru_cache(maxsize=4096)
def _content(hit_id: int, created_at: datetime) -> HitContent:
    hit = Hit.objects.select_related("reference").get(pk=hit_id)
    items = [
        {"key": item_key(hit_id=hit.pk, candidate_id=item.candidate_id), "text": item.candidate.text}
        for item in hit.items.select_related("candidate").order_by("position")
    ]
    html = render_to_string("annotation/hit_content.html", {"hit": hit, "items": items})
    return HitContent(html=SafeString(html), sentences=len(items))


hit_content_cache_clear = _content.cache_clear

# What a preview shows instead of the HIT's own sentences (issue 36.1): anyone can open a published crowd
# HIT's preview before accepting it, so showing its items let a bot study a HIT (and tell its checks from
# the items it sees again once accepted) at leisure. Workers see the task's form on a made-up example.
EXAMPLE_REFERENCE = "The committee approved the new budget on Monday."
EXAMPLE_SENTENCES = (
    "On Monday, the committee passed the new budget.",
    "The committee approve new budget Monday.",
    "The committee rejected the old budget on Friday.",
    "The new budget was approved by the committee on Monday.",
    "Budget Monday the new of approved committee on.",
)


@lru_cache(maxsize=1)
def example_content() -> HitContent:
    """A made-up HIT in the page's own markup (the preview's example): nothing of any real HIT."""
    items = [{"key": f"example-{n}", "text": text} for n, text in enumerate(EXAMPLE_SENTENCES, 1)]
    reference = {"reference": {"text": EXAMPLE_REFERENCE}}
    html = render_to_string("annotation/hit_content.html", {"hit": reference, "items": items})
    return HitContent(html=SafeString(html), sentences=len(items))
