"""Read-only admin views of the evaluation data (editing goes through imports, batches and providers).

A campaign's page links its dashboard and its batch form (*Create a HIT batch*: a draft, with a power, cost
and time preview before anything is made; the changelist's action leads there too). Batch actions: publish
after a cost preview, export a batch's results CSV, expire; disqualify or reinstate workers (their quality
figures are listed).
"""

import io
from decimal import Decimal

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from api.permissions import admin_permission
from config.forms import AsciiDecimalField, AsciiFloatField, AsciiIntegerField

from .batch_settings import (
    ATTENTION_PASS_MARK_DEFAULT,
    LABEL_RULE,
    MAX_LABEL,
    BatchSettingsError,
    batch_label_check,
    length_buckets,
)
from .batches import PROVIDER_NAMES, BatchError, batch_cost_estimate_usd, hit_batch_create
from .campaign_pages import campaign_comments, campaign_description, campaign_model_name, campaign_settings_rows
from .exports import RESULTS_PERMS, batch_results_csv
from .models import (
    Assignment,
    Batch,
    Campaign,
    Candidate,
    CandidateSystem,
    Hit,
    HitItem,
    Judgment,
    Reference,
    Worker,
    rater_name,
)
from .permissions import BATCH_OPERATION_PERMS, CREATE_BATCH_PERMS, WORKER_MANAGE_PERMS
from .providers import get_provider
from .publishing import batch_publish
from .quality import worker_disqualify, worker_quality, worker_reinstate, workers_quality


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class BatchForm(forms.Form):
    """The batch the researcher designs; ``FIELDSETS`` group its fields by the provider that reads them (the page
    shows only the chosen provider's, and all of them without JavaScript)."""

    provider = forms.ChoiceField(
        choices=[(p, p) for p in PROVIDER_NAMES], initial=lambda: settings.PARAFORGE_HIT_PROVIDER
    )
    per_length = AsciiIntegerField(min_value=1, initial=100, help_text="references per length bucket")
    lengths = forms.CharField(initial="5,10,20,40", help_text="length buckets, comma-separated")
    assignments = AsciiIntegerField(min_value=1, max_value=100, initial=3, help_text="different workers per HIT")
    attention_rate = AsciiFloatField(min_value=0, max_value=1, initial=0.1)
    attention_pass_mark = AsciiIntegerField(
        min_value=0,
        max_value=100,
        initial=ATTENTION_PASS_MARK_DEFAULT,
        required=False,
        help_text=f"an attention copy passes when its slider reached at least this score (empty: "
        f"{ATTENTION_PASS_MARK_DEFAULT}; 100 passes only an exact 100, as ParaBank, which a tap on a phone misses)",
    )
    degraded_rate = AsciiFloatField(
        min_value=0,
        max_value=1,
        initial=0.1,
        help_text="share of HITs with a degraded check (a damaged copy of a candidate) (rater test)",
    )
    seed = AsciiIntegerField(initial=0)
    reward_usd = AsciiDecimalField(
        min_value=0, decimal_places=2, initial="0.10", required=False, help_text="MTurk: reward per assignment"
    )
    reward_per_session = AsciiDecimalField(
        min_value=0,
        decimal_places=2,
        required=False,
        initial=lambda: settings.PROLIFIC_REWARD_PER_SESSION,
        help_text="Prolific: reward per session (the account's currency)",
    )
    hits_per_session = AsciiIntegerField(
        min_value=1, max_value=1000, required=False, help_text="Prolific: HITs a participant does in one session"
    )
    estimated_minutes = AsciiIntegerField(
        min_value=1, max_value=1440, required=False, help_text="Prolific: a session's estimated time"
    )
    countries = forms.CharField(required=False, help_text="Prolific: countries of residence, comma-separated")
    first_languages = forms.CharField(required=False, help_text="Prolific: first languages, comma-separated")
    label = forms.CharField(required=False, max_length=MAX_LABEL, help_text=LABEL_RULE)
    raters_at_once = AsciiIntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="preview only: people working at the same time, for the time to finish (empty: as many as "
        "have done this campaign's HITs, else the assignments per HIT)",
    )

    # (legend, the providers that read them or "" for every provider, fields)
    FIELDSETS = (
        (
            "The batch",
            "",
            (
                "provider",
                "per_length",
                "lengths",
                "assignments",
                "attention_rate",
                "attention_pass_mark",
                "degraded_rate",
            ),
        ),
        ("", "", ("seed", "label")),
        ("Mechanical Turk", "mturk-sandbox mturk", ("reward_usd",)),
        (
            "Prolific",
            "prolific",
            ("reward_per_session", "hits_per_session", "estimated_minutes", "countries", "first_languages"),
        ),
        ("Preview", "", ("raters_at_once",)),
    )

    def __init__(self, *args, campaign: Campaign | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        from .preview import hourly_pay, pace_seconds_per_hit, prolific_minimum_hourly
        from .providers.prolific.study import suggested_minutes

        per_hit, source = pace_seconds_per_hit(campaign)
        hits = settings.PROLIFIC_HITS_PER_SESSION
        minutes = suggested_minutes(hits_per_session=hits, seconds_per_hit=per_hit)
        self.fields["hits_per_session"].initial = hits
        self.fields["estimated_minutes"].initial = minutes
        currency = settings.PROLIFIC_CURRENCY
        pay = hourly_pay(Decimal(str(settings.PROLIFIC_REWARD_PER_SESSION)), minutes)
        self.fields["estimated_minutes"].help_text = (
            f"Prolific: a session's estimated time; suggested {minutes} min for {hits} HITs from {source}. The "
            f"default reward then pays {pay} {currency} an hour (Prolific's minimum: {prolific_minimum_hourly()} "
            f"{currency}); Preview shows the pay of what you enter"
        )

    def fieldsets(self) -> list[dict]:
        """``FIELDSETS`` with their bound fields, for the template."""
        return [
            {"legend": legend, "providers": providers, "fields": [self[name] for name in names]}
            for legend, providers, names in self.FIELDSETS
        ]

    def provider_settings(self) -> dict:
        """The batch settings from the fields given: the attention pass mark, and those the chosen provider reads."""
        data = self.cleaned_data
        chosen: dict = {}
        if data.get("attention_pass_mark") is not None:
            chosen["attention_pass_mark"] = data["attention_pass_mark"]
        if data["provider"].startswith("mturk") and data.get("reward_usd") is not None:
            chosen["reward_usd"] = str(data["reward_usd"])
        if data["provider"] == "prolific":
            if data.get("reward_per_session") is not None:
                chosen["reward_per_session"] = str(data["reward_per_session"])
            for key in ("hits_per_session", "estimated_minutes", "countries", "first_languages"):
                if data.get(key) not in (None, ""):
                    chosen[key] = data[key]
        return chosen

    def create_arguments(self) -> dict:
        """``hit_batch_create``'s arguments (all but the campaign) from the cleaned form."""
        data = self.cleaned_data
        return {
            "provider": data["provider"],
            "per_length": data["per_length"],
            "lengths": data["lengths"],
            "assignments": data["assignments"],
            "attention_rate": data["attention_rate"],
            "degraded_rate": data["degraded_rate"],
            "seed": data["seed"],
            "label": data["label"],
            "settings": self.provider_settings(),
        }

    def clean_lengths(self):
        try:  # int() takes "١٨٠٠" and "1_800": the one ASCII-number rule
            return length_buckets(self.cleaned_data["lengths"])
        except BatchSettingsError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_label(self):
        try:
            return batch_label_check(self.cleaned_data["label"])
        except BatchSettingsError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
    list_display = ("name", "created_at", "job", "dashboard_link", "create_batch_link")
    search_fields = ("name",)
    actions = ["create_hit_batch"]
    change_form_template = "admin/annotation/campaign/change_form.html"
    # the page shows its settings as a table and its model by name (never the server's path to it)
    fields = ("name", "description_shown", "settings_shown", "model_name", "job", "created_at")
    readonly_fields = fields

    has_create_batch_permission = admin_permission(*CREATE_BATCH_PERMS)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/batch/",
                self.admin_site.admin_view(self.create_batch_view),
                name="annotation_campaign_create_batch",
            ),
            path(
                "<path:object_id>/comments/",
                self.admin_site.admin_view(self.comments_view),
                name="annotation_campaign_comments",
            ),
        ] + super().get_urls()

    @admin.display(description="model")
    def model_name(self, obj: Campaign) -> str:
        return campaign_model_name(obj) or "-"

    @admin.display(description="description")
    def description_shown(self, obj: Campaign) -> str:
        return campaign_description(obj) or "-"

    @admin.display(description="settings")
    def settings_shown(self, obj: Campaign) -> str:
        rows = campaign_settings_rows(obj)
        return format_html(
            '<table class="campaign-settings"><tbody>{}</tbody></table>',
            format_html_join("", '<tr><th scope="row">{}</th><td>{}</td><td class="help">{}</td></tr>', rows),
        )

    def comments_view(self, request, object_id: str):
        """Every worker comment of the campaign on one page (they are otherwise on each assignment's own page)."""
        if not (self.has_view_permission(request) and request.user.has_perm("annotation.view_assignment")):
            raise PermissionDenied
        campaign = self.get_object(request, unquote(object_id))
        if campaign is None:
            raise Http404("no such campaign")
        return TemplateResponse(
            request,
            "admin/annotation/campaign/comments.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "original": campaign,
                "campaign": campaign,
                "comments": campaign_comments(campaign),
                "title": f"Worker comments of {campaign}",
            },
        )

    @admin.display(description="dashboard")
    def dashboard_link(self, obj: Campaign) -> str:
        return format_html('<a href="{}">dashboard</a>', reverse("campaign_dashboard", args=[obj.pk]))

    @admin.display(description="HIT batch")
    def create_batch_link(self, obj: Campaign) -> str:
        return format_html(
            '<a href="{}">create a HIT batch…</a>', reverse("admin:annotation_campaign_create_batch", args=[obj.pk])
        )

    def get_list_display(self, request):
        shown = list(super().get_list_display(request))
        return shown if self.has_create_batch_permission(request) else [f for f in shown if f != "create_batch_link"]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {
            "may_create_batch": self.has_create_batch_permission(request),
            "may_see_comments": request.user.has_perm("annotation.view_assignment"),
        }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    @admin.action(
        description="Create a HIT batch (draft, cost preview before publishing)…", permissions=["create_batch"]
    )
    def create_hit_batch(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one campaign.", messages.ERROR)
            return None
        # the campaign's batch form (it posts to create_batch_view); a post of the form the way this action's
        # page once sent it (``confirm``) is still taken
        return self._batch_form(request, queryset.get(), bound=bool(request.POST.get("confirm")))

    def create_batch_view(self, request, object_id: str):
        """The batch form of one campaign: *Preview* shows its power, cost and time and makes nothing; *Create
        draft batch* makes the draft (publishing, with its cost preview, is the batch list's)."""
        if not (self.has_view_permission(request) and self.has_create_batch_permission(request)):
            raise PermissionDenied
        campaign = self.get_object(request, unquote(object_id))
        if campaign is None:
            raise Http404("no such campaign")
        return self._batch_form(request, campaign, bound=request.method == "POST")

    def _batch_form(self, request, campaign: Campaign, *, bound: bool):
        form = BatchForm(request.POST if bound else None, campaign=campaign)
        preview = None
        if form.is_bound and form.is_valid():
            if "preview" in request.POST:
                preview = self._preview(form, campaign)
            elif self._create(request, form, campaign) is not None:
                return HttpResponseRedirect(reverse("admin:annotation_batch_changelist"))
        return TemplateResponse(
            request,
            "annotation/create_batch.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "original": campaign,
                "campaign": campaign,
                "form": form,
                "form_url": reverse("admin:annotation_campaign_create_batch", args=[campaign.pk]),
                "preview": preview,
                "title": f"Create a HIT batch for {campaign}",
            },
        )

    @staticmethod
    def _preview(form: BatchForm, campaign: Campaign):
        from .preview import batch_preview
        from .providers import ProviderError

        try:
            return batch_preview(
                campaign=campaign, raters_at_once=form.cleaned_data["raters_at_once"], **form.create_arguments()
            )
        except (BatchError, ProviderError, ImportError) as exc:
            form.add_error(None, f"No preview: {exc}")
            return None

    def _create(self, request, form: BatchForm, campaign: Campaign) -> Batch | None:
        from .preview import prolific_pay
        from .providers import ProviderError

        arguments = form.create_arguments()
        try:
            batch = hit_batch_create(campaign=campaign, **arguments)
        except (BatchError, ImportError) as exc:
            form.add_error(None, f"No batch created: {exc}")
            return None
        self.log_addition(request, batch, f"Created a draft batch of campaign {campaign}")  # Recent actions
        self.message_user(
            request,
            f"Draft batch {batch.pk} created with {batch.hits.count()} HITs: "
            "publish it from the batch list (with its cost preview).",
            messages.SUCCESS,
        )
        if arguments["provider"] == "prolific":
            try:
                pay = prolific_pay(arguments["settings"])
            except ProviderError:
                pay = None
            if pay is not None and pay.below_minimum:
                self.message_user(
                    request,
                    f"Batch {batch.pk} pays {pay.per_hour} {pay.currency} an hour, below Prolific's minimum of "
                    f"{pay.minimum} {pay.currency}: raise its reward or estimated time before publishing.",
                    messages.WARNING,
                )
        return batch


@admin.register(Reference)
class ReferenceAdmin(ReadOnlyAdmin):
    list_display = ("ref_id", "campaign", "length_bucket", "text")
    list_filter = ("campaign", "length_bucket")
    search_fields = ("ref_id", "text")


class CandidateSystemInline(ReadOnlyInline):
    model = CandidateSystem


@admin.register(Candidate)
class CandidateAdmin(ReadOnlyAdmin):
    list_display = ("id", "reference", "text", "nll")
    list_filter = ("reference__campaign", "reference__length_bucket")
    search_fields = ("text",)
    list_select_related = ("reference",)
    inlines = [CandidateSystemInline]


def _quality(worker):
    """The worker's figures, computed once per row."""
    if not hasattr(worker, "_quality_cache"):
        worker._quality_cache = worker_quality(worker=worker)
    return worker._quality_cache


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "provider",
        "judgments",
        "checks_passed",
        "checks_failed",
        "failure_rate",
        "degraded_checks",
        "degraded_p",
        "seconds_per_hit",
        "agreement",
        "disqualified",
        "disqualified_reason",
        "user",
    )
    list_filter = ("provider", "disqualified")
    search_fields = ("external_id", "user__username")
    list_select_related = ("user",)
    list_per_page = 50
    actions = ["disqualify", "reinstate"]

    has_manage_permission = admin_permission(*WORKER_MANAGE_PERMS)

    def get_changelist(self, request, **kwargs):
        """A list whose page of workers gets its quality figures in one pass (``workers_quality``), not a few
        queries per row and column."""
        from django.contrib.admin.views.main import ChangeList

        class WorkerChangeList(ChangeList):
            def get_results(self, request):
                super().get_results(request)
                figures = workers_quality(self.result_list)
                for worker in self.result_list:
                    worker._quality_cache = figures[worker.pk]

        return WorkerChangeList

    @admin.display(description="rater", ordering="external_id")
    def name(self, obj):
        # the name the dashboard and ``report`` use; platform ids stored before ids were checked read as escapes
        return rater_name(
            provider=obj.provider, external_id=obj.external_id, username=obj.user.username if obj.user else None
        )

    @admin.display(description="judgments")
    def judgments(self, obj):
        return _quality(obj).judgments

    @admin.display(description="checks passed")
    def checks_passed(self, obj):
        return _quality(obj).attention_passed

    @admin.display(description="checks failed")
    def checks_failed(self, obj):
        return _quality(obj).attention_failed

    @admin.display(description="failure rate")
    def failure_rate(self, obj):
        rate = _quality(obj).failure_rate
        return "-" if rate is None else f"{rate:.0%}"

    @admin.display(description="degraded checks")
    def degraded_checks(self, obj):
        quality = _quality(obj)
        return f"{quality.degraded_checks} (vs {quality.real_judged} real)"

    @admin.display(description="degraded test p (Mann-Whitney)")
    def degraded_p(self, obj):
        quality = _quality(obj)
        if quality.degraded_p is None:
            if quality.degraded_checks >= quality.min_degraded_checks:
                return "not yet tested (no real candidate judged)"
            return f"not yet tested ({quality.degraded_checks} of {quality.min_degraded_checks} checks)"
        return f"{quality.degraded_p:.3g}"

    @admin.display(description="s / HIT (median)")
    def seconds_per_hit(self, obj):
        value = _quality(obj).seconds_per_hit
        return "-" if value is None else f"{value:.0f}"

    @admin.display(description="agreement (r)")
    def agreement(self, obj):
        value = _quality(obj).agreement
        return "-" if value is None else f"{value:.2f}"

    @admin.action(description="Disqualify (exclude their judgments, bar them from HITs)", permissions=["manage"])
    def disqualify(self, request, queryset):
        for worker in queryset:
            # the worker sees the reason: who did it goes to the admin's log, not to them
            worker_disqualify(worker=worker, reason="disqualified by the project's staff")
            self.log_change(request, worker, "disqualified")
        self.message_user(request, f"{queryset.count()} worker(s) disqualified.", messages.SUCCESS)

    @admin.action(description="Reinstate", permissions=["manage"])
    def reinstate(self, request, queryset):
        done = 0
        for worker in queryset:
            try:
                worker_reinstate(worker=worker)
                done += 1
                self.log_change(request, worker, "reinstated")
            except Exception as exc:  # noqa: BLE001 - shown to the researcher; the DB flag is already cleared
                self.message_user(request, f"{worker}: the provider could not reinstate: {exc}", messages.WARNING)
        self.message_user(request, f"{done} worker(s) reinstated.", messages.SUCCESS)


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "campaign", "provider", "label", "status", "hit_count", "created_at")
    list_filter = ("provider", "status")
    actions = ["publish_batches", "sync_batches", "approve_batches", "export_results", "expire_batches"]

    # each platform operation its own permission (annotation.permissions)
    has_publish_permission = admin_permission(*BATCH_OPERATION_PERMS["publish"])
    has_sync_permission = admin_permission(*BATCH_OPERATION_PERMS["sync"])
    has_approve_permission = admin_permission(*BATCH_OPERATION_PERMS["approve"])
    has_expire_permission = admin_permission(*BATCH_OPERATION_PERMS["expire"])

    @admin.display(description="HITs")
    def hit_count(self, obj):
        return obj.hits.count()

    @admin.action(description="Publish… (cost preview first)", permissions=["publish"])
    def publish_batches(self, request, queryset):
        batches = list(queryset.order_by("id"))
        if request.POST.get("confirm") == "yes":
            for batch in batches:
                try:
                    batch_publish(batch=batch)
                except Exception as exc:  # noqa: BLE001 - a provider error is shown, the other batches go on
                    self.message_user(request, f"batch {batch.pk}: not published: {exc}", messages.ERROR)
                else:
                    self.log_change(request, batch, "published")  # Recent actions
                    self.message_user(request, f"batch {batch.pk} published.", messages.SUCCESS)
            return None
        rows, total = [], None
        for batch in batches:
            try:
                cost = batch_cost_estimate_usd(batch=batch)
            except Exception as exc:  # noqa: BLE001 - no preview, no publishing
                self.message_user(
                    request, f"batch {batch.pk}: no cost estimate ({exc}); nothing published.", messages.ERROR
                )
                return None
            if cost is not None:
                total = (total or 0) + cost
            provider = get_provider(batch)
            places = provider.places(batch=batch) if hasattr(provider, "places") else None
            rows.append(
                {
                    "batch": batch,
                    "provider": batch.provider + (" (sandbox)" if (batch.settings or {}).get("sandbox") else ""),
                    "hits": batch.hits.count(),
                    "assignments": (batch.settings or {}).get("assignments", "-"),
                    "places": places,
                    "cost": cost,
                    "currency": provider.currency,
                }
            )
        return TemplateResponse(
            request,
            "annotation/publish_preview.html",
            {
                **self.admin_site.each_context(request),
                "batches": batches,
                "rows": rows,
                "total": total,
                "title": "Publish batches",
                "cancel_url": request.get_full_path(),
            },
        )

    has_export_results_permission = admin_permission(*RESULTS_PERMS)

    @admin.action(description="Export results CSV (MTurk style)", permissions=["export_results"])
    def export_results(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one batch to export.", messages.ERROR)
            return None
        batch = queryset.get()
        buffer = io.StringIO()
        batch_results_csv(batch=batch, out=buffer)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="batch-{batch.pk}-results.csv"'
        return response

    def _each(self, request, queryset, operation: str, done: str) -> None:
        """Run one ``HitProvider`` operation on each batch; its report, or its error, is shown per batch."""
        for batch in queryset.order_by("id"):
            provider = get_provider(batch)
            try:
                report = getattr(provider, operation)(batch=batch)
            except Exception as exc:  # noqa: BLE001 - a platform error is shown, the other batches go on
                self.message_user(request, f"batch {batch.pk}: {exc}", messages.ERROR)
                continue
            shown = {k: v for k, v in (report or {}).items() if not isinstance(v, (dict, list))}
            self.log_change(request, batch, done)  # Recent actions
            self.message_user(request, f"batch {batch.pk} {done}: {shown}", messages.SUCCESS)

    @admin.action(description="Sync (verify submissions with the platform)", permissions=["sync"])
    def sync_batches(self, request, queryset):
        self._each(request, queryset, "sync", "synced")

    @admin.action(description="Approve verified submissions (pays)", permissions=["approve"])
    def approve_batches(self, request, queryset):
        self._each(request, queryset, "approve_batch", "approved")

    @admin.action(description="Expire / stop (no new work)", permissions=["expire"])
    def expire_batches(self, request, queryset):
        self._each(request, queryset, "expire", "expired")


class HitItemInline(ReadOnlyInline):
    model = HitItem


@admin.register(Hit)
class HitAdmin(ReadOnlyAdmin):
    list_display = ("id", "batch", "reference", "external_hit_id", "expires_at", "max_assignments")
    search_fields = ("external_hit_id",)
    inlines = [HitItemInline]


class JudgmentInline(ReadOnlyInline):
    model = Judgment
    fields = ("candidate", "score", "fluency", "created_at")
    readonly_fields = fields


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = (
        "external_assignment_id",
        "campaign",
        "worker",
        "provider",
        "status",
        "verification",
        "submitted_at",
    )
    list_filter = ("provider", "status", "verification", "campaign")
    list_select_related = ("campaign", "worker__user")
    search_fields = ("external_assignment_id", "worker__external_id")
    inlines = [JudgmentInline]


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "worker", "candidate", "score", "fluency", "created_at")
    list_filter = ("fluency", "candidate__reference__campaign")
    list_select_related = ("worker__user", "candidate")
