"""The admin's live progress bar of a job: every app's admin shows its jobs with it (one markup, one script)."""

from __future__ import annotations

from django.utils.html import format_html

from .execution import job_progress
from .models import Job

PROGRESS_JS = "frontend/job-progress.js"


def progress_bar(job: Job | None) -> str:
    """A ``<progress data-job=…>`` element that job-progress.js keeps up to date."""
    if job is None:
        return "-"
    p = job_progress(job)
    percent = round(100 * p["fraction"])
    return format_html(
        '<progress class="job-progress" data-job="{}" max="100" value="{}"></progress> '
        '<span data-job-text="{}">{}</span>',
        job.pk,
        percent,
        job.pk,
        progress_text(p),
    )


def progress_text(p: dict) -> str:
    """``running 40% — nested cross-validation: fold 2 of 5``: the words job-progress.js writes too."""
    text = f"{p['status']} {round(100 * p['fraction'])}%"
    if p.get("stage"):
        text += f" — {p['stage']}"
    if p.get("error"):
        text += f" — {p['error']}"
    return text
