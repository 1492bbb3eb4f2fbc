"""Batches: publish after a cost preview, sync, approve, export a batch's results CSV, expire (each platform
operation its own permission)."""

import io

from django.contrib import admin, messages
from django.http import HttpResponse
from django.template.response import TemplateResponse

from api.permissions import admin_permission

from ..batches.exports import RESULTS_PERMS, batch_results_csv
from ..batches.making import batch_cost_estimate_usd
from ..models import Batch
from ..providers import get_provider
from ..publishing import batch_publish
from ..web.permissions import BATCH_OPERATION_PERMS
from .base import ReadOnlyAdmin


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "campaign", "provider", "label", "status", "hit_count", "created_at")
    list_filter = ("provider", "status")
    actions = ["publish_batches", "sync_batches", "approve_batches", "export_results", "expire_batches"]

    # each platform operation its own permission (annotation.web.permissions)
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
