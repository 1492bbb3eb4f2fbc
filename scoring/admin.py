"""Admin of scoring/: regressors (read-only: trained by ``train_regressor``), scored resources (with
their job's progress and an "export release" form that starts an ``export_release`` job) and releases
(manifest, file links, who besides staff may download)."""
from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from jobs.widgets import PROGRESS_JS, progress_bar

from .models import Regressor, Release, ScoredResource
from .release_filters import FilterError, parse_filters
from .release_job import export_release_start
from .releases import FORMATS, ReleaseError, next_version, release_files, scoring_for
from .scoring_job import scoring_job_running


@admin.register(Regressor)
class RegressorAdmin(admin.ModelAdmin):
    list_display = ("name", "campaign", "spearman_test", "n_train", "n_test", "created_at")
    search_fields = ("name",)
    readonly_fields = ("name", "campaign", "key", "metrics_json", "signature_json", "created_at")
    exclude = ("metrics", "signature")

    def has_add_permission(self, request):
        return False  # trained with manage.py train_regressor

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
    version = forms.CharField(max_length=64)
    format = forms.ChoiceField(choices=[(f, f) for f in FORMATS], initial="tsv")
    min_score = forms.FloatField(required=False, min_value=0, max_value=100, help_text="predicted similarity 0-100")
    filters = forms.CharField(required=False, help_text="e.g. len=5-40,overlap=0.2-0.8,rerank=dissimilar,top=5",
                              widget=forms.TextInput(attrs={"size": 60}))
    entailment_model = forms.CharField(
        required=False, max_length=500, widget=forms.TextInput(attrs={"size": 60}),
        help_text="for entailment=argmax or entailment=THRESHOLD: a local NLI model folder (Hugging Face "
                  "sequence classifier) that the workers can read")

    def clean(self):
        data = super().clean()
        try:
            parse_filters(data.get("filters") or "", min_score=data.get("min_score"),
                          entailment_model=data.get("entailment_model") or None, load_model=False)
        except FilterError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(ScoredResource)
class ScoredResourceAdmin(admin.ModelAdmin):
    list_display = ("resource", "regressor", "n_pairs", "shard_count", "scoring_progress", "export_link",
                    "created_at")
    list_select_related = ("resource", "regressor", "job")
    readonly_fields = ("resource", "regressor", "job", "scoring_progress", "n_pairs", "shards_table",
                       "export_link", "created_at")
    exclude = ("shards",)
    actions = ["export_default_release"]

    class Media:
        js = [PROGRESS_JS]

    def has_add_permission(self, request):
        return False  # made by manage.py score_resource

    def get_urls(self):
        return [path("<int:scored_id>/export/", self.admin_site.admin_view(self.export_view),
                     name="scoring_scoredresource_export")] + super().get_urls()

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
        return format_html('<a href="{}">export release…</a>',
                           reverse("admin:scoring_scoredresource_export", args=[obj.pk]))

    @admin.display(description="scored shards")
    def shards_table(self, obj: ScoredResource) -> str:
        if not obj.shards:
            return "-"
        return format_html("<pre>{}</pre>", "\n".join(
            f"{e['index']:>5}  {e['n_pairs']:>9} pairs  {e['sha256'][:16]}…  {e['key']}" for e in obj.shards))

    def _start(self, request, scored: ScoredResource, **options) -> None:
        try:
            scoring_for(scored.resource, scored.regressor.name)
            job = export_release_start(resource=scored.resource, regressor=scored.regressor.name, **options)
        except (ReleaseError, FilterError, ValueError) as exc:
            self.message_user(request, f"{scored}: {exc}", messages.ERROR)
            return
        self.message_user(request, format_html('Exporting release {} of {}: <a href="{}">job {}</a>',
                                               job.params["version"], scored.resource.name,
                                               reverse("admin:jobs_job_change", args=[job.pk]), job.pk),
                          messages.SUCCESS)

    @admin.action(description="Export a release (TSV, no filters)")
    def export_default_release(self, request, queryset):
        for scored in queryset.select_related("resource", "regressor"):
            self._start(request, scored)

    def export_view(self, request, scored_id: int):
        scored = get_object_or_404(ScoredResource.objects.select_related("resource", "regressor"), pk=scored_id)
        if request.method == "POST":
            form = ExportReleaseForm(request.POST)
            if form.is_valid():
                d = form.cleaned_data
                if Release.objects.filter(resource=scored.resource, version=d["version"]).exists():
                    form.add_error("version", f"release {d['version']} of this resource already exists")
                else:
                    self._start(request, scored, version=d["version"], fmt=d["format"], filters=d["filters"],
                                min_score=d["min_score"], entailment_model=d["entailment_model"] or None)
                    return HttpResponseRedirect(reverse("admin:scoring_release_changelist"))
        else:
            form = ExportReleaseForm(initial={"version": next_version(scored.resource)})
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
                   "scored": scored, "title": f"Export a release of {scored.resource.name}"}
        return render(request, "scoring/admin_export_release.html", context)


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("resource", "version", "pairs", "regressor", "location", "created_at")
    list_select_related = ("resource",)
    search_fields = ("resource__name", "version")
    readonly_fields = ("resource", "version", "location", "file_links", "manifest_json", "created_at")
    exclude = ("manifest",)
    filter_horizontal = ("allowed_users",)

    def has_add_permission(self, request):
        return False  # made by manage.py export_release or the scored resource's "export release…"

    @admin.display(description="pairs")
    def pairs(self, obj: Release):
        return (obj.manifest.get("counts") or {}).get("pairs")

    @admin.display(description="regressor")
    def regressor(self, obj: Release):
        return (obj.manifest.get("regressor") or {}).get("name")

    @admin.display(description="files")
    def file_links(self, obj: Release) -> str:
        return format_html_join(", ", '<a href="{}">{}</a>', (
            (reverse("release-file", args=[obj.pk, name]), name) for name in release_files(obj.manifest)))

    @admin.display(description="manifest")
    def manifest_json(self, obj: Release) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.manifest, indent=2, sort_keys=True, ensure_ascii=False))
