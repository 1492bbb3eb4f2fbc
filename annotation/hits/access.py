"""Who may read a published crowd HIT's items: the rules the slider page applies before it shows the
reference and candidates of an accepted assignment (issue 46).

A crowd page learns its worker and assignment ids from its URL, which anyone can write, and the platform
confirms them only after a submission (``annotation.quality.verification``). Showing the items to any well-formed
pair of ids let a scraper read every published HIT -- and so study its checks -- before doing any work.

* **Prolific**: Paraforge itself issues every assignment, through the study's start URL
  (``providers.prolific.sessions``: after Prolific confirmed the session, an id ending in a random
  nonce). The items show only for that assignment, on its HIT, to its participant.
* **MTurk** hands out its own assignments, which Paraforge learns of only when one is submitted. So the
  first view of an assignment id binds it to the (HIT, worker id) it was opened with (``HitView``); a
  view of the same assignment id under another worker id or on another HIT sees nothing (403). New
  assignment ids are capped per client address (``ANNOTATION_HIT_VIEW_ADDRESS_RATE``, default 20 an
  hour) and per HIT (its ``max_assignments`` plus ``ANNOTATION_HIT_VIEW_SPARE``, default 3, for the
  returned and abandoned assignments MTurk reissues under new ids); beyond either the page shows the
  preview's made-up example and says why (429).
* Every admitted view is counted on its binding (``views``, ``last_seen``), MTurk and Prolific alike:
  the admin lists them, so that a researcher sees who read what.

Both caps are counted by ``limits.counters`` (one atomic upsert), so they hold across processes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import F

from annotation.hits.page import HitPageFacts
from annotation.models import HitView, Provider
from limits.counters import hit_count, over_limit

# how long a HIT's count of assignment ids lasts: longer than any HIT stays open
HIT_WINDOW_S = 60 * 86400
NOT_YOURS = "This assignment was opened by another worker or for another HIT: return it."
NOT_ISSUED = "This page was not opened from your Prolific study: open the study from Prolific."
TOO_MANY_FROM_ADDRESS = (
    "Too many new assignments were opened from this address: this page shows only an example. "
    "Wait a while, then reload."
)
TOO_MANY_ON_HIT = (
    "This HIT was opened under more assignments than it has: this page shows only an example. Return the HIT."
)


@dataclass(frozen=True, slots=True)
class Access:
    """What the page may show: the items (``allowed``), the preview's example (``example``) or nothing."""

    allowed: bool
    reason: str = ""  # shown instead of the items
    status: int = 200
    example: bool = False
    retry_after: int | None = None


ALLOWED = Access(allowed=True)


def crowd_access(*, facts: HitPageFacts, assignment_id: str, worker_id: str, address: str, now: dt.datetime) -> Access:
    """Whether the accepted assignment ``assignment_id`` of ``worker_id`` may read the published crowd HIT
    of ``facts`` (the module's rules); an admitted view is recorded."""
    prolific = facts.provider == Provider.PROLIFIC
    if prolific and (facts.assignment_hit_id, facts.assignment_worker_external_id) != (facts.hit_id, worker_id):
        return Access(allowed=False, reason=NOT_ISSUED, status=403)
    # (an MTurk assignment Paraforge has stored is submitted: the page refuses it before asking here)
    if facts.view_hit_id is not None:  # a view of a bound assignment: the facts' statement read its binding
        if (facts.view_hit_id, facts.view_worker_external_id) != (facts.hit_id, worker_id):
            return Access(allowed=False, reason=NOT_YOURS, status=403)
        _view_count(facts.provider, assignment_id, now)
        return ALLOWED
    if prolific:  # issued by the start URL: no cap on it, only its first view recorded
        _view_record(facts, assignment_id=assignment_id, worker_id=worker_id, address=address, now=now)
        return ALLOWED
    wait = over_limit(f"hit-view-address:{address}", settings.ANNOTATION_HIT_VIEW_ADDRESS_RATE)
    if wait is not None:
        return Access(allowed=False, reason=TOO_MANY_FROM_ADDRESS, status=429, example=True, retry_after=wait)
    if (
        hit_count(f"hit-view-hit:{facts.hit_id}", HIT_WINDOW_S)
        > facts.max_assignments + settings.ANNOTATION_HIT_VIEW_SPARE
    ):
        return Access(allowed=False, reason=TOO_MANY_ON_HIT, status=429, example=True)
    if not _view_record(facts, assignment_id=assignment_id, worker_id=worker_id, address=address, now=now):
        return Access(allowed=False, reason=NOT_YOURS, status=403)
    return ALLOWED


def _view_record(facts: HitPageFacts, *, assignment_id: str, worker_id: str, address: str, now: dt.datetime) -> bool:
    """Bind ``assignment_id`` to (HIT, worker) at its first view, or count a view of that binding; False when
    a concurrent first view bound it to another HIT or worker. (One ``INSERT ... ON CONFLICT DO NOTHING``, no
    savepoint: the page is the one every worker opens for every HIT, bench/load.py.)"""
    if _view_insert(facts, assignment_id=assignment_id, worker_id=worker_id, address=address, now=now):
        return True
    bound = (
        HitView.objects.filter(provider=facts.provider, external_assignment_id=assignment_id)
        .values_list("hit_id", "worker_external_id")
        .first()
    )
    if bound != (facts.hit_id, worker_id):
        return False
    _view_count(facts.provider, assignment_id, now)
    return True


def _view_insert(facts: HitPageFacts, *, assignment_id: str, worker_id: str, address: str, now: dt.datetime) -> bool:
    """Insert the binding unless the assignment id has one; whether this call made it (PostgreSQL, SQLite >= 3.35:
    ``ON CONFLICT DO NOTHING RETURNING``, as ``limits.counters``; Django's ``ignore_conflicts`` cannot tell)."""
    quote = connection.ops.quote_name
    fields = (
        "hit",
        "provider",
        "external_assignment_id",
        "worker_external_id",
        "address",
        "views",
        "first_seen",
        "last_seen",
    )
    columns = ", ".join(quote(HitView._meta.get_field(f).column) for f in fields)
    conflict = ", ".join(quote(HitView._meta.get_field(f).column) for f in ("provider", "external_assignment_id"))
    stamp = HitView._meta.get_field("first_seen").get_db_prep_value(now, connection)
    sql = (
        f"INSERT INTO {quote(HitView._meta.db_table)} ({columns}) VALUES (%s, %s, %s, %s, %s, 1, %s, %s) "
        f"ON CONFLICT ({conflict}) DO NOTHING RETURNING {quote(HitView._meta.pk.column)}"
    )
    values = [facts.hit_id, facts.provider, assignment_id, worker_id, address[:64], stamp, stamp]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.fetchone() is not None


def _view_count(provider: str, assignment_id: str, now: dt.datetime) -> None:
    HitView.objects.filter(provider=provider, external_assignment_id=assignment_id).update(
        views=F("views") + 1, last_seen=now
    )
