"""Admin of scoring/: the whole path from judgments to a release, each step a form that starts a job and
then shows the job's progress bar. Regressors ("Train a regressor": a ``train_regressor`` job on a
campaign), scored resources ("Score a resource": a ``score_resource`` job with a chosen regressor; each
row's "export release" form: an ``export_release`` job) and releases (manifest, file links, who besides
staff may download).

Each form needs its model's add permission and ``jobs.view_job`` (the progress bar polls the job API);
the progress pages need ``jobs.view_job``. The release pages need ``releases.RELEASE_VIEW_PERMS``, as the
release API does."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from api.permissions import staff_has_perms
from jobs.models import Job
from jobs.widgets import PROGRESS_JS, job_progress_page as widget_job_progress_page, progress_bar
from scoring import job_results  # noqa: F401  (the result pages of the scoring and generation jobs)
from scoring.forms import ExportReleaseForm, ScoreResourceForm, TrainRegressorForm
from scoring.models import Regressor, Release, ScoredResource
from scoring.permissions import EXPORT_PERMS, SCORE_PERMS, TRAIN_PERMS
from scoring.regressor.job import KIND as TRAIN_KIND, train_regressor_launch
from scoring.releases.access import sees_every_release
from scoring.releases.checks import ReleaseError, next_version
from scoring.releases.filters import FilterError
from scoring.releases.job import KIND as EXPORT_KIND, export_release_for
from scoring.releases.manifest import release_files
from scoring.scored.job import (
    KIND as SCORE_KIND,
    score_resource_launch,
    scoring_job_running,
)


def may(request, perms: tuple[str, ...]) -> bool:
    return staff_has_perms(request.user, perms)


def require(request, perms: tuple[str, ...]) -> None:
    """403 unless the user is active staff holding every one of ``perms``."""
    if not may(request, perms):
        raise PermissionDenied


def job_progress_page(model_admin: admin.ModelAdmin, request, job_id: int, *, kind: str, title: str):
    """The page a job form leads to (``jobs.widgets.job_progress_page``), for those who may follow jobs."""
    require(request, ("jobs.view_job",))
    return widget_job_progress_page(model_admin, request, job_id, kind=kind, title=title)


@admin.register(Regressor)
class RegressorAdmin(admin.ModelAdmin):
    list_display = ("name", "campaign", "spearman_test", "n_train", "n_test", "created_at")
    search_fields = ("name",)
    readonly_fields = ("name", "campaign", "key", "metrics_json", "signature_json", "created_at")
    exclude = ("metrics", "signature")

    change_list_template = "scoring/admin_regressor_change_list.html"

    class Media:
        js = [PROGRESS_JS]

    def has_add_permission(self, request):
        return False  # trained by a job: "Train a regressor" (train_view) or manage.py train_regressor

    def get_urls(self):
        return [
            path("train/", self.admin_site.admin_view(self.train_view), name="scoring_regressor_train"),
            path(
                "train/<int:job_id>/",
                self.admin_site.admin_view(self.train_progress_view),
                name="scoring_regressor_train_progress",
            ),
        ] + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "may_train": may(request, TRAIN_PERMS)})

    def get_list_display(self, request):
        shown = list(super().get_list_display(request))
        return shown + ["score_link"] if may(request, SCORE_PERMS) else shown

    @admin.display(description="score")
    def score_link(self, obj: Regressor) -> str:
        return format_html(
            '<a href="{}?regressor={}">score a resource…</a>', reverse("admin:scoring_scoredresource_score"), obj.pk
        )

    def train_view(self, request):
        require(request, TRAIN_PERMS)
        if request.method == "POST":
            form = TrainRegressorForm(request.POST)
            if form.is_valid():
                if form.cleaned_data["replace"] and not request.user.has_perm("scoring.change_regressor"):
                    form.add_error("replace", "you may not replace a regressor (scoring.change_regressor)")
                else:
                    try:
                        job = train_regressor_launch(**form.train_arguments())
                    except ValueError as exc:
                        form.add_error(None, str(exc))
                    else:
                        self.log_addition(request, job, f"Started training: {job.label}")  # Recent actions
                        return HttpResponseRedirect(reverse("admin:scoring_regressor_train_progress", args=[job.pk]))
        else:
            form = TrainRegressorForm(initial={"campaign": request.GET.get("campaign")})
        return render(
            request,
            "admin/job_form.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "form": form,
                "title": "Train a regressor",
                "submit": "Train",
                "intro": "Train the similarity regressor (ParaBank §5.1) on a campaign's counted judgments: held-out "
                "Spearman's rho with a bootstrap interval, then refit on all judgments. The training runs "
                "as a background job; the next page follows it.",
            },
        )

    def train_progress_view(self, request, job_id: int):
        job = Job.objects.filter(pk=job_id, kind=TRAIN_KIND).first()
        name = job.params.get("train", {}).get("name") if job else ""
        return job_progress_page(self, request, job_id, kind=TRAIN_KIND, title=f"Training regressor {name}")

    @admin.display(description="held-out Spearman's rho")
    def spearman_test(self, obj: Regressor):
        return (obj.metrics or {}).get("spearman_test")

    @admin.display(description="train pairs")
    def n_train(self, obj: Regressor):
        return (obj.metrics or {}).get("n_train")

    @admin.display(description="test pairs")
    def n_test(self, obj: Regressor):
        return (obj.metrics or {}).get("n_test")

    @admin.display(description="metrics")
    def metrics_json(self, obj: Regressor) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.metrics, indent=2, sort_keys=True))

    @admin.display(description="signature")
    def signature_json(self, obj: Regressor) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.signature, indent=2, sort_keys=True))


@admin.register(ScoredResource)
class ScoredResourceAdmin(admin.ModelAdmin):
    list_display = ("resource", "regressor", "n_pairs", "shard_count", "scoring_progress", "export_link", "created_at")
    list_select_related = ("resource", "regressor", "job")
    readonly_fields = (
        "resource",
        "regressor",
        "job",
        "scoring_progress",
        "n_pairs",
        "shards_table",
        "export_link",
        "created_at",
    )
    exclude = ("shards",)
    actions = ["export_default_release"]
    change_list_template = "scoring/admin_scoredresource_change_list.html"

    class Media:
        js = [PROGRESS_JS]

    def has_add_permission(self, request):
        return False  # made by a score_resource job: "Score a resource" (score_view) or manage.py score_resource

    def has_export_permission(self, request) -> bool:
        return may(request, EXPORT_PERMS)

    def get_urls(self):
        return [
            path(
                "<int:scored_id>/export/",
                self.admin_site.admin_view(self.export_view),
                name="scoring_scoredresource_export",
            ),
            path(
                "export/<int:job_id>/",
                self.admin_site.admin_view(self.export_progress_view),
                name="scoring_scoredresource_export_progress",
            ),
            path("score/", self.admin_site.admin_view(self.score_view), name="scoring_scoredresource_score"),
            path(
                "score/<int:job_id>/",
                self.admin_site.admin_view(self.score_progress_view),
                name="scoring_scoredresource_score_progress",
            ),
        ] + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "may_score": may(request, SCORE_PERMS)})

    @admin.display(description="shards")
    def shard_count(self, obj: ScoredResource) -> int:
        return len(obj.shards)

    @admin.display(description="scoring")
    def scoring_progress(self, obj: ScoredResource) -> str:
        """A re-scoring under way shows its own bar; the row keeps the last completed one meanwhile."""
        running = scoring_job_running(resource_id=obj.resource_id, regressor_name=obj.regressor.name)
        return progress_bar(running or obj.job)

    @admin.display(description="release")
    def export_link(self, obj: ScoredResource) -> str:
        return format_html(
            '<a href="{}">export release…</a>', reverse("admin:scoring_scoredresource_export", args=[obj.pk])
        )

    @admin.display(description="scored shards")
    def shards_table(self, obj: ScoredResource) -> str:
        if not obj.shards:
            return "-"
        return format_html(
            "<pre>{}</pre>",
            "\n".join(f"{e['index']:>5}  {e['n_pairs']:>9} pairs  {e['sha256'][:16]}…  {e['key']}" for e in obj.shards),
        )

    @staticmethod
    def _launch(scored: ScoredResource, **options) -> Job:
        return export_release_for(scored, **options)

    def _announce(self, request, scored: ScoredResource, job: Job) -> None:
        self.log_addition(request, job, f"Started exporting: {job.label}")  # Recent actions
        self.message_user(
            request,
            format_html(
                'Exporting release {} of {}: <a href="{}">job {}</a>',
                job.params["version"],
                scored.resource.name,
                reverse("admin:scoring_scoredresource_export_progress", args=[job.pk]),
                job.pk,
            ),
            messages.SUCCESS,
        )

    @admin.action(description="Export a release (TSV, no filters)", permissions=["export"])
    def export_default_release(self, request, queryset):
        for scored in queryset.select_related("resource", "regressor"):
            try:
                job = self._launch(scored)
            except (ReleaseError, FilterError, ValueError) as exc:
                self.message_user(request, f"{scored}: {exc}", messages.ERROR)
            else:
                self._announce(request, scored, job)

    def export_view(self, request, scored_id: int):
        require(request, EXPORT_PERMS)
        scored = get_object_or_404(ScoredResource.objects.select_related("resource", "regressor"), pk=scored_id)
        if request.method == "POST":
            form = ExportReleaseForm(request.POST)
            if form.is_valid():
                try:  # the job's start checks the version is free (and not being exported) under a lock
                    job = self._launch(scored, **form.export_options())
                except (ReleaseError, FilterError, ValueError) as exc:
                    form.add_error(None, str(exc))
                else:
                    self._announce(request, scored, job)
                    return HttpResponseRedirect(reverse("admin:scoring_scoredresource_export_progress", args=[job.pk]))
        else:
            form = ExportReleaseForm(initial={"version": next_version(scored.resource)})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "scored": scored,
            "title": f"Export a release of {scored.resource.name}",
        }
        return render(request, "scoring/admin_export_release.html", context)

    def export_progress_view(self, request, job_id: int):
        job = Job.objects.filter(pk=job_id, kind=EXPORT_KIND).first()
        version = job.params.get("version", "") if job else ""
        return job_progress_page(self, request, job_id, kind=EXPORT_KIND, title=f"Exporting release {version}")

    def score_view(self, request):
        require(request, SCORE_PERMS)
        if request.method == "POST":
            form = ScoreResourceForm(request.POST)
            if form.is_valid():
                try:
                    job = score_resource_launch(**form.score_arguments())
                except ValueError as exc:
                    form.add_error(None, str(exc))
                else:
                    self.log_addition(request, job, f"Started scoring: {job.label}")  # Recent actions
                    return HttpResponseRedirect(reverse("admin:scoring_scoredresource_score_progress", args=[job.pk]))
        else:
            form = ScoreResourceForm(initial={k: request.GET.get(k) for k in ("resource", "regressor")})
        return render(
            request,
            "admin/job_form.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "form": form,
                "title": "Score a resource",
                "submit": "Score",
                "intro": "Predict the human similarity of every pair of a generated resource with a trained regressor "
                "(one chunk per candidate shard, resumable). Releases keep using the previous scoring until "
                "this one succeeds. The scoring runs as a background job; the next page follows it.",
            },
        )

    def score_progress_view(self, request, job_id: int):
        job = Job.objects.filter(pk=job_id, kind=SCORE_KIND).first()
        label = job.label if job else ""
        return job_progress_page(self, request, job_id, kind=SCORE_KIND, title=label.capitalize() or "Scoring")


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("resource", "version", "pairs", "regressor", "location", "created_at")
    list_select_related = ("resource",)
    search_fields = ("resource__name", "version")
    readonly_fields = ("resource", "version", "location", "job", "file_links", "manifest_json", "created_at")
    exclude = ("manifest",)
    filter_horizontal = ("allowed_users",)

    def has_add_permission(self, request):
        return False  # made by manage.py export_release or the scored resource's "export release…"

    # the release API's rule (releases.sees_every_release): without it, no release page at all
    def has_view_permission(self, request, obj=None):
        return sees_every_release(request.user)

    def has_change_permission(self, request, obj=None):
        return sees_every_release(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return sees_every_release(request.user) and super().has_delete_permission(request, obj)

    @admin.display(description="pairs")
    def pairs(self, obj: Release):
        return (obj.manifest.get("counts") or {}).get("pairs")

    @admin.display(description="regressor")
    def regressor(self, obj: Release):
        return (obj.manifest.get("regressor") or {}).get("name")

    @admin.display(description="files")
    def file_links(self, obj: Release) -> str:
        return format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            ((reverse("release-file", args=[obj.pk, name]), name) for name in release_files(obj.manifest)),
        )

    @admin.display(description="manifest")
    def manifest_json(self, obj: Release) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.manifest, indent=2, sort_keys=True, ensure_ascii=False))
