"""Campaigns: a campaign's page links its dashboard, its worker comments and its batch form (*Create a HIT
batch*: a draft, with a power, cost and time preview before anything is made; the changelist's action leads
there too)."""

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from api.permissions import admin_permission

from ..batches.making import hit_batch_create
from ..batches.params import BatchError
from ..campaigns.pages import campaign_comments, campaign_description, campaign_model_name, campaign_settings_rows
from ..models import Batch, Campaign
from ..web.permissions import CREATE_BATCH_PERMS
from .base import ReadOnlyAdmin
from .batch_form import BatchForm


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
        from ..batches.preview import batch_preview
        from ..providers import ProviderError

        try:
            return batch_preview(
                campaign=campaign, params=form.batch_params(), raters_at_once=form.cleaned_data["raters_at_once"]
            )
        except (BatchError, ProviderError, ImportError) as exc:
            form.add_error(None, f"No preview: {exc}")
            return None

    def _create(self, request, form: BatchForm, campaign: Campaign) -> Batch | None:
        from ..batches.preview import prolific_pay
        from ..providers import ProviderError

        try:
            params = form.batch_params()
            batch = hit_batch_create(campaign=campaign, params=params)
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
        if params.provider == "prolific":
            try:
                pay = prolific_pay(params.settings)
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
