"""The evaluation data as recorded, read only: references, candidates, HITs, page views, assignments and judgments."""

from django.contrib import admin

from ..models import Assignment, Candidate, CandidateSystem, Hit, HitItem, HitView, Judgment, Reference
from .base import ReadOnlyAdmin, ReadOnlyInline


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


class HitItemInline(ReadOnlyInline):
    model = HitItem


@admin.register(Hit)
class HitAdmin(ReadOnlyAdmin):
    list_display = ("id", "batch", "reference", "external_hit_id", "expires_at", "max_assignments")
    search_fields = ("external_hit_id",)
    inlines = [HitItemInline]


@admin.register(HitView)
class HitViewAdmin(ReadOnlyAdmin):
    """Who opened which crowd HIT under which assignment id, from where, how often (``annotation.hits.access``):
    a scrape shows as many assignment ids from one address, each seen once."""

    list_display = ("external_assignment_id", "worker_external_id", "hit", "provider", "address", "views", "first_seen")
    list_filter = ("provider", "hit__batch")
    search_fields = ("external_assignment_id", "worker_external_id", "address")
    list_select_related = ("hit",)


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
