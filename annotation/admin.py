"""Read-only admin views of the evaluation data (editing goes through imports, batches and providers)."""
from django.contrib import admin

from .models import Assignment, Batch, Campaign, Candidate, CandidateSystem, Hit, HitItem, Judgment, Reference, Worker


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


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
    list_display = ("name", "created_at", "job")
    search_fields = ("name",)


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


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "provider", "disqualified", "disqualified_at", "user")
    list_filter = ("provider", "disqualified")
    search_fields = ("external_id",)


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "campaign", "provider", "label", "status", "created_at")
    list_filter = ("provider", "status")


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
    list_display = ("external_assignment_id", "campaign", "worker", "provider", "status", "submitted_at")
    list_filter = ("provider", "status", "campaign")
    search_fields = ("external_assignment_id", "worker__external_id")
    inlines = [JudgmentInline]


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "worker", "candidate", "score", "fluency", "created_at")
    list_filter = ("fluency", "candidate__reference__campaign")
    list_select_related = ("worker", "candidate")
