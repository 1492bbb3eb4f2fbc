"""Workers with their quality figures (attention checks, degraded-check test, pace, agreement); disqualify
or reinstate them."""

from django.contrib import admin, messages

from api.permissions import admin_permission

from ..models import Worker, rater_name
from ..quality.workers import worker_disqualify, worker_quality, worker_reinstate, workers_quality
from ..web.permissions import WORKER_MANAGE_PERMS
from .base import ReadOnlyAdmin


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
