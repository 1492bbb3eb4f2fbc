"""The jobs' admin: every job with its progress, chunks and result; a finished job's result shows as a page
(``jobs.results``: what it made, its figures and links, the raw result behind a disclosure)."""

from django.contrib import admin, messages
from django.utils.html import format_html

from api.permissions import admin_permission

from .execution import job_cancel, job_progress, job_resume
from .models import Job, JobChunk
from .results import job_outcome_html


class JobChunkInline(admin.TabularInline):
    model = JobChunk
    extra = 0
    can_delete = False
    fields = (
        "index",
        "status",
        "done_units",
        "total_units",
        "attempts",
        "ran_on",
        "error",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "label", "status", "progress_bar", "created_at", "finished_at")
    list_filter = ("kind", "status")
    search_fields = ("label",)
    readonly_fields = (
        "kind",
        "label",
        "params",
        "status",
        "error",
        "total_chunks",
        "created_at",
        "started_at",
        "finished_at",
        "progress_bar",
    )
    exclude = ("result",)  # shown as the result page above the fields (change_form.html), raw JSON in it too
    inlines = [JobChunkInline]
    actions = ["resume_jobs", "cancel_jobs"]
    change_form_template = "admin/jobs/job/change_form.html"

    def has_add_permission(self, request) -> bool:
        """Jobs are started by the commands, the API and the admin's own forms (train, score, export...): a job
        added here would have no kind's parameters and stay pending forever."""
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        extra = {"outcome_html": job_outcome_html(job, request.user)} if job is not None else {}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    @admin.display(description="progress")
    def progress_bar(self, job: Job) -> str:
        p = job_progress(job)
        return format_html(
            '<progress class="job-progress" data-job="{}" max="100" value="{}"></progress> {}%',
            job.pk,
            round(100 * p["fraction"]),
            round(100 * p["fraction"]),
        )

    # each action its own permission (jobs.view_job only shows jobs): docs/reference/permissions.md
    has_resume_permission = admin_permission("jobs.resume_job")
    has_cancel_permission = admin_permission("jobs.cancel_job")

    @admin.action(description="Resume selected jobs (re-run unfinished chunks)", permissions=["resume"])
    def resume_jobs(self, request, queryset):
        for job in queryset:
            job_resume(job_id=job.pk)
        self.message_user(request, f"Resumed {queryset.count()} job(s).", messages.SUCCESS)

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request, queryset):
        for job in queryset:
            job_cancel(job_id=job.pk)
        self.message_user(request, f"Cancelled {queryset.count()} job(s).", messages.SUCCESS)
