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
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from annotation.models import Campaign
from config.forms import AsciiFloatField, AsciiIntegerField
from config.permissions import staff_has_perms
from generation.models import Resource
from jobs.models import Job
from jobs.widgets import PROGRESS_JS, progress_bar

from .aggregation import ESTIMATES
from .models import Regressor, Release, ScoredResource
from .regressor import NAME_MAX_LENGTH, RECIPES, RegressorError, regressor_train_check
from .regressor_job import KIND as TRAIN_KIND, train_regressor_launch
from .release_filters import FilterError, parse_filters
from .release_job import KIND as EXPORT_KIND, export_release_start
from .releases import (
    FORMATS,
    ReleaseError,
    card_license,
    next_version,
    release_files,
    release_version_check,
    scoring_for,
    sees_every_release,
)
from .scoring_job import DEFAULT_BATCH_SIZE, KIND as SCORE_KIND, score_resource_launch, scoring_job_running

TRAIN_PERMS = ("scoring.add_regressor", "jobs.view_job")
SCORE_PERMS = ("scoring.add_scoredresource", "jobs.view_job")
EXPORT_PERMS = ("scoring.add_release", "jobs.view_job")


def may(request, perms: tuple[str, ...]) -> bool:
    return staff_has_perms(request.user, perms)


def require(request, perms: tuple[str, ...]) -> None:
    """403 unless the user is active staff holding every one of ``perms``."""
    if not may(request, perms):
        raise PermissionDenied


def job_progress_page(
    model_admin: admin.ModelAdmin, request, job_id: int, *, kind: str, title: str, done: dict[str, Any] | None = None
):
    """The page a job form leads to: the job's live bar (it reloads itself when the job ends), then what the
    job made (``done``: ``{"text", "url"}`` and optional ``next_text`` / ``next_url``) or why it stopped."""
    require(request, ("jobs.view_job",))
    job = get_object_or_404(Job, pk=job_id, kind=kind)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "job": job,
        "progress": progress_bar(job),
        "title": title,
        "done": done if job.status == "succeeded" else None,
        "result_json": json.dumps(job.result, indent=2, sort_keys=True, ensure_ascii=False),
        "media": model_admin.media,
    }
    return render(request, "scoring/admin_job_progress.html", context)


class TrainRegressorForm(forms.Form):
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"), help_text="its counted judgments are the training data"
    )
    name = forms.CharField(
        max_length=NAME_MAX_LENGTH,
        help_text="the regressor's name (score_resource --regressor NAME): letters, digits, "
        "'.', '_' or '-', starting with a letter or digit",
    )
    test_fraction = AsciiFloatField(initial=0.2, help_text="share of references held out for the test (0-1)")
    seed = AsciiIntegerField(initial=0, min_value=0, max_value=2**32 - 1)
    min_judgments = AsciiIntegerField(
        required=False,
        min_value=0,
        help_text="count only workers with at least N judgments (empty: the campaign's minimum)",
    )
    target = forms.ChoiceField(
        choices=[(e, e) for e in ESTIMATES],
        initial="raw",
        help_text="raw = mean similarity (ParaBank's); zscore = bias-corrected estimate",
    )
    with_embeddings = forms.BooleanField(
        required=False, initial=True, help_text="sentence-embedding features (slower, more accurate)"
    )
    recipe = forms.ChoiceField(
        choices=[(r, r) for r in RECIPES],
        initial="base",
        help_text="base = lexical + embedding features; v2 and v3 add the group, NLL and "
        "systems features, v4 those of the STS-tuned encoder head "
        "(README 'Similarity regressor')",
    )
    replace = forms.BooleanField(required=False, help_text="overwrite the regressor of that name")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            data["name"], _ = regressor_train_check(
                campaign=data["campaign"].name,
                name=data["name"],
                test_fraction=data["test_fraction"],
                replace=data["replace"],
                min_judgments=data["min_judgments"],
                target=data["target"],
                recipe=data["recipe"],
            )
        except RegressorError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def train_arguments(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "campaign": d["campaign"].name,
            "name": d["name"],
            "test_fraction": d["test_fraction"],
            "seed": d["seed"],
            "with_embeddings": d["with_embeddings"],
            "replace": d["replace"],
            "min_judgments": d["min_judgments"],
            "target": d["target"],
            **({"recipe": d["recipe"]} if d["recipe"] != "base" else {}),
        }  # as the command: base stays implicit


class ScoreResourceForm(forms.Form):
    resource = forms.ModelChoiceField(
        queryset=Resource.objects.filter(shards__isnull=False).distinct().order_by("name"),
        help_text="a generated resource with candidate shards",
    )
    regressor = forms.ModelChoiceField(queryset=Regressor.objects.order_by("name"))
    batch_size = AsciiIntegerField(
        initial=DEFAULT_BATCH_SIZE, min_value=1, max_value=100_000, help_text="pairs per prediction batch"
    )


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
                        return HttpResponseRedirect(reverse("admin:scoring_regressor_train_progress", args=[job.pk]))
        else:
            form = TrainRegressorForm(initial={"campaign": request.GET.get("campaign")})
        return render(
            request,
            "scoring/admin_job_form.html",
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
        row = Regressor.objects.filter(name=(job.result or {}).get("name")).first() if job else None
        done = (
            None
            if row is None
            else {
                "text": f"regressor {row.name}",
                "url": reverse("admin:scoring_regressor_change", args=[row.pk]),
                "next_text": "score a resource with it…",
                "next_url": f"{reverse('admin:scoring_scoredresource_score')}?regressor={row.pk}",
            }
        )
        name = job.params.get("train", {}).get("name") if job else ""
        return job_progress_page(self, request, job_id, kind=TRAIN_KIND, title=f"Training regressor {name}", done=done)

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


class ExportReleaseForm(forms.Form):
    version = forms.CharField(
        max_length=64, help_text="letters, digits, '.', '_' or '-', starting with a letter or digit"
    )
    format = forms.ChoiceField(choices=[(f, f) for f in FORMATS], initial="tsv")
    min_score = AsciiFloatField(required=False, min_value=0, max_value=100, help_text="predicted similarity 0-100")
    filters = forms.CharField(
        required=False,
        help_text="e.g. len=5-40,overlap=0.2-0.8,rerank=dissimilar,top=5",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    entailment_model = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="for entailment=argmax or entailment=THRESHOLD: a local NLI model folder (Hugging Face "
        "sequence classifier) that the workers can read, under the model folders "
        "(PARAFORGE_MODEL_ROOTS; a path relative to one, or absolute)",
    )
    license = forms.CharField(
        required=False,
        max_length=100,
        help_text="parquet: the dataset card's licence, a Hugging Face id such as cc-by-4.0 (default unknown)",
    )

    def clean_version(self):
        try:
            return release_version_check(self.cleaned_data["version"])
        except ReleaseError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        try:
            parse_filters(
                data.get("filters") or "",
                min_score=data.get("min_score"),
                entailment_model=data.get("entailment_model") or None,
                load_model=False,
                confined=True,
            )
            if data.get("format"):
                card_license(data["format"], data.get("license") or None)
        except (FilterError, ReleaseError) as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


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
        """Start the export job; ReleaseError, FilterError or ValueError if it cannot start (nothing queued)."""
        scoring_for(scored.resource, scored.regressor.name)
        return export_release_start(resource=scored.resource, regressor=scored.regressor.name, **options)

    def _announce(self, request, scored: ScoredResource, job: Job) -> None:
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
                d = form.cleaned_data
                try:  # the job's start checks the version is free (and not being exported) under a lock
                    job = self._launch(
                        scored,
                        version=d["version"],
                        fmt=d["format"],
                        filters=d["filters"],
                        min_score=d["min_score"],
                        entailment_model=d["entailment_model"] or None,
                        license=d["license"] or None,
                    )
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
        release = Release.objects.filter(pk=(job.result or {}).get("release")).first() if job else None
        done = (
            None
            if release is None
            else {
                "text": f"release {release.version} of {release.resource.name}",
                "url": reverse("admin:scoring_release_change", args=[release.pk]),
            }
        )
        version = job.params.get("version", "") if job else ""
        return job_progress_page(
            self, request, job_id, kind=EXPORT_KIND, title=f"Exporting release {version}", done=done
        )

    def score_view(self, request):
        require(request, SCORE_PERMS)
        if request.method == "POST":
            form = ScoreResourceForm(request.POST)
            if form.is_valid():
                d = form.cleaned_data
                try:
                    job = score_resource_launch(
                        resource=d["resource"], regressor=d["regressor"], batch_size=d["batch_size"]
                    )
                except ValueError as exc:
                    form.add_error(None, str(exc))
                else:
                    return HttpResponseRedirect(reverse("admin:scoring_scoredresource_score_progress", args=[job.pk]))
        else:
            form = ScoreResourceForm(initial={k: request.GET.get(k) for k in ("resource", "regressor")})
        return render(
            request,
            "scoring/admin_job_form.html",
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
        scored = (
            ScoredResource.objects.filter(pk=(job.result or {}).get("scored_resource"))
            .select_related("resource")
            .first()
            if job
            else None
        )
        done = (
            None
            if scored is None
            else {
                "text": f"{scored.resource.name} scored ({scored.n_pairs} pairs)",
                "url": reverse("admin:scoring_scoredresource_change", args=[scored.pk]),
                "next_text": "export a release…",
                "next_url": reverse("admin:scoring_scoredresource_export", args=[scored.pk]),
            }
        )
        label = job.label if job else ""
        return job_progress_page(
            self, request, job_id, kind=SCORE_KIND, title=label.capitalize() or "Scoring", done=done
        )


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
