"""The admin's live progress bar of a job: every app's admin shows its jobs with it (one markup, one script)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render
from django.utils.html import format_html

from .execution import job_progress
from .models import Job
from .results import job_outcome_html

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


def state_text(p: dict) -> str:
    """What the job page says of the job in its own words, from its real state (``job_progress``): waiting only
    while no worker has taken it, running with its progress (and stage) once one has, then how it ended. The
    page's script (job-progress.js's ``stateText``) writes the same words as the job moves on."""
    percent = round(100 * (p.get("fraction") or 0))
    status = p.get("status")
    if status == "pending":
        return "Waiting for a worker… this page updates by itself."
    if status == "running":
        stage = f" ({p['stage']})" if p.get("stage") else ""
        return f"Running: {percent}% done{stage}. This page updates by itself."
    if status == "succeeded":
        return "Finished."
    if status == "failed":
        return "The job failed."
    if status == "cancelled":
        return "The job was cancelled."
    return f"{status}."


def job_progress_page(model_admin, request, job_id: int, *, kind: str, title: str | None = None):
    """The admin page a job form leads to (the caller has checked the permissions): the job's live bar (it
    reloads itself when the job ends), then what the job made (``jobs.results``: the kind's outcome) or why it
    stopped. ``title``: the page's, else the job's label."""
    job = get_object_or_404(Job, pk=job_id, kind=kind)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "job": job,
        "progress": progress_bar(job),
        "state_text": state_text(job_progress(job)),
        "title": title or job.label.capitalize() or kind,
        "outcome_html": job_outcome_html(job, request.user),
        "media": model_admin.media,
    }
    return render(request, "admin/job_progress.html", context)
