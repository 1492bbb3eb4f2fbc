"""Admin of generation/: corpora (import by upload, with a progress bar; IDF action; "Generate": a form that starts
a ``generate`` job on a ready corpus, constraint systems or ParaBank 2's diverse mode, then shows its progress),
shards, IDF tables, generated resources (with their generation job's progress) and their candidate shards."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from api.permissions import admin_permission
from infra.storage import get_storage
from jobs.execution import job_launch, job_progress, job_start
from jobs.models import Job
from jobs.widgets import PROGRESS_JS, job_progress_page, progress_bar, state_text

from .constraints.idf import idf_table_key
from .corpus.corpora import CorpusImportError, corpus_terms
from .generation_job import KIND as GENERATE_KIND
from .hooks import sample_link
from .models import Corpus, CorpusFormat, CorpusShard, CorpusStatus, IdfTable, Resource, ResourceShard
from .web.forms import GENERATE_PERMS, GENERATE_PROGRESS_PERMS, GenerateForm

# who may do what here (docs/reference/permissions.md): importing makes a corpus and starts a job whose
# progress page polls the job API; the progress page shows the job and the corpus it made; an IDF table is
# made by a job too
IMPORT_PERMS = ("generation.view_corpus", "generation.add_corpus", "jobs.view_job")
IMPORT_PROGRESS_PERMS = ("generation.view_corpus", "jobs.view_job")
BUILD_IDF_PERMS = ("generation.view_corpus", "generation.add_idftable", "jobs.view_job")


class CorpusImportForm(forms.Form):
    file = forms.FileField(help_text="plain text or .gz: source<TAB>reference a line, or one English sentence a line")
    name = forms.CharField(max_length=200)
    format = forms.ChoiceField(
        choices=[("", "detect (bitext if the first line has a tab)")] + list(CorpusFormat.choices), required=False
    )
    on_error = forms.ChoiceField(
        choices=[("skip", "skip bad lines (reported)"), ("abort", "abort at the first bad line (keep nothing)")],
        initial="skip",
    )
    source = forms.CharField(
        required=False, max_length=500, help_text="where the sentences come from (a dataset's name, a URL, a citation)"
    )
    license = forms.CharField(
        required=False,
        max_length=100,
        help_text="the sentences' licence as an SPDX id (CC-BY-4.0, CC-BY-SA-4.0, CC-BY-NC-4.0, ...; LicenseRef-NAME "
        "for terms of their own; empty: NOASSERTION); a release may not grant more than it allows",
    )
    terms = forms.CharField(required=False, max_length=500, help_text="the terms in words, for the release card")

    def clean(self):
        data = super().clean()
        try:  # the one check of import_corpus --source --license --terms ("--license: ..." names the field)
            data["terms_checked"] = corpus_terms(data.get("source"), data.get("license"), data.get("terms"))
        except CorpusImportError as exc:
            option, _, message = str(exc).partition(": ")
            self.add_error(
                option.removeprefix("--") if option in ("--source", "--license", "--terms") else None, message
            )
        return data

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if Corpus.objects.filter(name=name).exists():
            raise forms.ValidationError(f"a corpus named {name!r} already exists")
        return name


def save_upload(upload) -> Path:
    """Stream an upload to MEDIA_ROOT/uploads/ under a unique name (the worker reads it from there)."""
    folder = Path(settings.MEDIA_ROOT) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(upload.name).name)[-100:] or "upload"
    target = folder / f"{uuid.uuid4().hex}-{safe}"
    with open(target, "wb") as fh:
        for chunk in upload.chunks():
            fh.write(chunk)
    return target


class CorpusShardInline(admin.TabularInline):
    model = CorpusShard
    extra = 0
    can_delete = False
    fields = ("index", "key", "n_records", "first_record", "bytes", "sha256")
    readonly_fields = fields
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


GENERATE_INTRO = (
    "Decode {name} ({n} references) into a paraphrase resource, as manage.py generate does: under ParaBank's "
    "constraint systems (numbers 1-37, e.g. 17,21,28,31,34; beam search with the options below), or, with diverse, "
    "in ParaBank 2's diverse mode (sampling under random negative constraints, scoring, clustering; each "
    "reference's kept outputs become the systems rank 1 .. rank keep; it takes no systems, IDF table, PPDB file "
    "or beam search's options: the page hides them). With sample per length, only the evaluation sample is "
    "decoded and becomes a campaign. Pick the model from the installed ones (demo: the shipped demo model), or "
    "type another folder in the server's model folders or a hub id in the server's cache. The job runs in the "
    "background on the GPU queue; the next page follows it."
)


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "format",
        "status",
        "n_references",
        "n_bad_lines",
        "shard_count",
        "import_progress",
        "idf_tables_list",
        "created_at",
    )
    list_filter = ("format", "status")
    search_fields = ("name", "source_name")
    readonly_fields = (
        "name",
        "format",
        "status",
        "source_name",
        "source",
        "license",
        "terms",
        "storage_prefix",
        "n_references",
        "n_lines_read",
        "n_bad_lines",
        "bad_lines_report",
        "import_job_link",
        "import_progress",
        "idf_tables_list",
        "constraint_systems",
        "created_at",
    )
    exclude = ("bad_lines", "import_job")
    inlines = [CorpusShardInline]
    actions = ["build_idf"]
    change_list_template = "admin/generation/corpus/change_list.html"

    class Media:
        js = [PROGRESS_JS]

    def has_add_permission(self, request):
        return False  # corpora come from an import (the "Import a corpus" button, has_import_permission)

    has_import_permission = admin_permission(*IMPORT_PERMS)
    has_import_progress_permission = admin_permission(*IMPORT_PROGRESS_PERMS)
    has_build_idf_permission = admin_permission(*BUILD_IDF_PERMS)
    has_generate_permission = admin_permission(*GENERATE_PERMS)
    has_generate_progress_permission = admin_permission(*GENERATE_PROGRESS_PERMS)

    def changelist_view(self, request, extra_context=None):
        extra = {"may_import": self.has_import_permission(request)}
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def get_urls(self):
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="generation_corpus_import"),
            path(
                "import/<int:job_id>/",
                self.admin_site.admin_view(self.import_progress_view),
                name="generation_corpus_import_progress",
            ),
            path(
                "<int:corpus_id>/generate/",
                self.admin_site.admin_view(self.generate_view),
                name="generation_corpus_generate",
            ),
            path(
                "generate/<int:job_id>/",
                self.admin_site.admin_view(self.generate_progress_view),
                name="generation_corpus_generate_progress",
            ),
        ] + super().get_urls()

    def get_list_display(self, request):
        shown = list(super().get_list_display(request))
        return shown + ["generate_link"] if self.has_generate_permission(request) else shown

    @admin.display(description="generate")
    def generate_link(self, corpus: Corpus) -> str:
        if corpus.status != CorpusStatus.READY:
            return "-"
        return format_html('<a href="{}">generate…</a>', reverse("admin:generation_corpus_generate", args=[corpus.pk]))

    @admin.display(description="shards")
    def shard_count(self, corpus: Corpus) -> int:
        return corpus.shards.count()

    @admin.display(description="import")
    def import_progress(self, corpus: Corpus) -> str:
        return progress_bar(corpus.import_job)

    @admin.display(description="import job")
    def import_job_link(self, corpus: Corpus) -> str:
        if corpus.import_job_id is None:
            return "-"
        return format_html(
            '<a href="{}">job {}</a>',
            reverse("admin:jobs_job_change", args=[corpus.import_job_id]),
            corpus.import_job_id,
        )

    @admin.display(description="IDF tables")
    def idf_tables_list(self, corpus: Corpus) -> str:
        tables = list(corpus.idf_tables.all())
        if not tables:
            return "-"
        return format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            ((reverse("admin:generation_idftable_change", args=[t.pk]), t.name) for t in tables),
        )

    @admin.display(description="bad lines (first 100)")
    def bad_lines_report(self, corpus: Corpus) -> str:
        if not corpus.bad_lines:
            return "none"
        lines = "\n".join(f"{e['file']}:{e['line']}: {e['reason']}" for e in corpus.bad_lines)
        more = corpus.n_bad_lines - len(corpus.bad_lines)
        return format_html("<pre>{}</pre>{}", lines, f"… and {more} more" if more > 0 else "")

    @admin.display(description="constraint systems")
    def constraint_systems(self, corpus: Corpus) -> str:
        return format_html(
            '<a href="/research/corpora/{}/constraints/">constraint systems of this corpus</a>', corpus.pk
        )

    @admin.action(description="Build IDF table", permissions=["build_idf"])
    def build_idf(self, request, queryset):
        started = []
        for corpus in queryset:
            if corpus.status != CorpusStatus.READY:
                self.message_user(request, f"{corpus.name}: not ready ({corpus.status}), skipped", messages.WARNING)
                continue
            job = job_start(kind="build_idf", params={"corpus": corpus.pk}, label=f"IDF of {corpus.name}")
            self.log_addition(request, job, f"Started building: {job.label}")  # Recent actions
            started.append((reverse("admin:jobs_job_change", args=[job.pk]), job.pk, corpus.name))
        if started:
            links = format_html_join(", ", '<a href="{}">job {}</a> ({})', started)
            self.message_user(request, format_html("Started building IDF: {}", links), messages.SUCCESS)

    def import_view(self, request):
        if not self.has_import_permission(request):
            raise PermissionDenied  # a refused import saves no upload and starts no job
        if request.method == "POST":
            form = CorpusImportForm(request.POST, request.FILES)
            if form.is_valid():
                upload = form.cleaned_data["file"]
                target = save_upload(upload)
                job = job_start(
                    kind="import_corpus",
                    label=f"import {form.cleaned_data['name']}",
                    params={
                        "name": form.cleaned_data["name"],
                        "path": str(target),
                        "format": form.cleaned_data["format"] or None,
                        "on_error": form.cleaned_data["on_error"],
                        "display_name": Path(upload.name).name,
                        "remove_file": True,
                        **form.cleaned_data["terms_checked"].as_params(),
                    },
                )
                self.log_addition(request, job, f"Started: {job.label}")  # Recent actions
                return HttpResponseRedirect(reverse("admin:generation_corpus_import_progress", args=[job.pk]))
        else:
            form = CorpusImportForm()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "title": "Import a corpus",
            "media": self.media + form.media,
        }
        return render(request, "admin/generation/corpus/import.html", context)

    def import_progress_view(self, request, job_id: int):
        if not self.has_import_progress_permission(request):
            raise PermissionDenied
        job = get_object_or_404(Job, pk=job_id, kind="import_corpus")
        corpus = Corpus.objects.filter(import_job=job).first()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "job": job,
            "progress": progress_bar(job),
            "state_text": state_text(job_progress(job)),
            "corpus": corpus,
            "title": f"Importing {job.params.get('name')}",
            "media": self.media,
        }
        return render(request, "admin/generation/corpus/import_progress.html", context)

    def generate_view(self, request, corpus_id: int):
        """The generate form of a corpus (``generation.web.forms.GenerateForm``: ``manage.py generate``'s settings and
        checks); a valid one starts the job and leads to its progress page."""
        if not self.has_generate_permission(request):
            raise PermissionDenied  # a refused form checks nothing and starts no job
        corpus = get_object_or_404(Corpus, pk=corpus_id)
        if request.method == "POST":
            form = GenerateForm(request.POST, corpus=corpus)
            if form.is_valid():
                try:
                    job = job_launch(
                        kind=GENERATE_KIND, params=form.cleaned_data["params"], label=f"generate {corpus.name}"
                    )
                except ValueError as exc:
                    form.add_error(None, str(exc))
                else:
                    self.log_addition(request, job, f"Started: {job.label}")  # Recent actions
                    return HttpResponseRedirect(reverse("admin:generation_corpus_generate_progress", args=[job.pk]))
        else:
            form = GenerateForm(corpus=corpus)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "corpus": corpus,
            "title": f"Generate paraphrases of {corpus.name}",
            "submit": "Generate",
            "intro": GENERATE_INTRO.format(name=corpus.name, n=corpus.n_references),
            "media": self.media + form.media,
        }
        return render(request, "admin/generation/corpus/generate.html", context)

    def generate_progress_view(self, request, job_id: int):
        """The page the generate form leads to: the job's live bar, then what it made (``jobs.results``)."""
        if not self.has_generate_progress_permission(request):
            raise PermissionDenied
        return job_progress_page(self, request, job_id, kind=GENERATE_KIND, title=None)


@admin.register(IdfTable)
class IdfTableAdmin(admin.ModelAdmin):
    list_display = ("name", "corpus", "n_documents", "n_types", "tokenizer", "download", "created_at")
    search_fields = ("name",)
    readonly_fields = ("name", "corpus", "key", "n_documents", "n_types", "tokenizer", "job", "download", "created_at")

    def has_add_permission(self, request):
        return False  # built by the "Build IDF table" action or imported with manage.py import_idf

    def get_urls(self):
        return [
            path(
                "<int:table_id>/download/",
                self.admin_site.admin_view(self.download_view),
                name="generation_idftable_download",
            ),
        ] + super().get_urls()

    @admin.display(description="TSV")
    def download(self, table: IdfTable) -> str:
        if not table.key:
            return "-"
        return format_html(
            '<a href="{}">download TSV</a>', reverse("admin:generation_idftable_download", args=[table.pk])
        )

    def download_view(self, request, table_id: int):
        if not request.user.is_staff or not self.has_view_permission(request):
            raise PermissionDenied
        table = get_object_or_404(IdfTable, pk=table_id)
        if not table.key:
            raise Http404("this IDF table has no file")
        try:
            stream = get_storage().open_read(table.key or idf_table_key(table.pk))
        except FileNotFoundError:
            raise Http404("the IDF table's file is missing from storage") from None
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", table.name) or f"idf-{table.pk}"
        return FileResponse(
            stream,
            as_attachment=True,
            filename=f"{safe}.idf.tsv",
            content_type="text/tab-separated-values; charset=utf-8",
        )


class ResourceShardInline(admin.TabularInline):
    model = ResourceShard
    extra = 0
    can_delete = False
    fields = ("index", "key", "n_references", "n_pairs", "sha256")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Resource)
class ResourceAdmin(admin.ModelAdmin):
    """Resources are made by ``manage.py generate``; here one follows the job and reads the settings."""

    list_display = ("name", "corpus", "n_references", "n_pairs", "shard_count", "generation_progress", "created_at")
    list_filter = ("corpus",)
    search_fields = ("name",)
    readonly_fields = (
        "name",
        "corpus",
        "job_link",
        "generation_progress",
        "n_references",
        "n_pairs",
        "campaign_link",
        "settings_table",
        "created_at",
    )
    exclude = ("job", "settings")
    inlines = [ResourceShardInline]

    class Media:
        js = [PROGRESS_JS]

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("corpus", "job")

    @admin.display(description="shards")
    def shard_count(self, resource: Resource) -> int:
        return resource.shards.count()

    @admin.display(description="generation")
    def generation_progress(self, resource: Resource) -> str:
        return progress_bar(resource.job)

    @admin.display(description="generation job")
    def job_link(self, resource: Resource) -> str:
        if resource.job_id is None:
            return "-"
        return format_html(
            '<a href="{}">job {}</a>', reverse("admin:jobs_job_change", args=[resource.job_id]), resource.job_id
        )

    @admin.display(description="evaluation sample")
    def campaign_link(self, resource: Resource) -> str:
        return sample_link(resource)  # annotation registers the link to its campaign (generation/hooks.py)

    @admin.display(description="settings")
    def settings_table(self, resource: Resource) -> str:
        if not resource.settings:
            return "- (filled in when the job finishes)"
        return format_html(
            "<table>{}</table>",
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", ((k, v) for k, v in resource.settings.items())),
        )
