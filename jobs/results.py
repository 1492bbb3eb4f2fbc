"""A finished job's result as a page, not a JSON dump: what it made, the figures that matter, the files to download,
where to go next, and the raw result behind a ``<details>`` disclosure.

Each app describes the results of its own kinds (``register_outcome``), so jobs/ knows no kind: the admin's
progress pages of the forms that start jobs and the job's own admin page both render ``job_outcome_html``. The JSON
API (``/api/jobs/<id>/``) keeps serving the raw result as it is.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

from .models import Job, JobStatus


@dataclasses.dataclass(frozen=True)
class Link:
    text: str
    url: str


@dataclasses.dataclass(frozen=True)
class FileLink:
    name: str
    url: str
    bytes: int | None = None
    sha256: str | None = None

    @property
    def size(self) -> str:
        return file_size(self.bytes)


@dataclasses.dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    note: str = ""


@dataclasses.dataclass
class JobOutcome:
    """What a succeeded job made, for people: ``made`` (the headline, a link to it), ``next`` (the next steps),
    ``figures`` ((label, value) pairs), ``warnings``, ``files`` (to download), ``tables``, ``links`` (elsewhere)."""

    made: Link | str
    next: list[Link] = dataclasses.field(default_factory=list)
    figures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    files: list[FileLink] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    links: list[Link] = dataclasses.field(default_factory=list)


OutcomeFn = Callable[[Job, Any], "JobOutcome | None"]
_OUTCOMES: dict[str, OutcomeFn] = {}


def register_outcome(kind: str, describe: OutcomeFn) -> None:
    """``describe(job, user)`` tells what a succeeded job of ``kind`` made (None: nothing left to show, e.g. its
    output was deleted since); ``user`` decides which links to offer (only what they may open)."""
    _OUTCOMES[kind] = describe


def job_outcome(job: Job, user: Any) -> JobOutcome | None:
    """The outcome of a succeeded job whose kind describes its results; None otherwise."""
    describe = _OUTCOMES.get(job.kind)
    if job.status != JobStatus.SUCCEEDED or describe is None:
        return None
    return describe(job, user)


def url_or_none(name: str, *args: Any) -> str | None:
    """``reverse(name, args)``, or None where that page does not exist (an app's URL not installed)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def file_size(n: int | None) -> str:
    """``1.2 MB``, ``840 bytes``."""
    if n is None:
        return ""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:,} bytes"


def job_outcome_html(job: Job, user: Any) -> str:
    """The result section of a job's page: the outcome (when the job succeeded and its kind describes it), then the
    raw result behind a disclosure."""
    return render_to_string(
        "jobs/job_outcome.html",
        {
            "job": job,
            "outcome": job_outcome(job, user),
            "result_json": json.dumps(job.result, indent=2, sort_keys=True, ensure_ascii=False),
        },
    )
