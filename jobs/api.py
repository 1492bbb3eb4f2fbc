from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.listing import ListQuery, listed, page_serializer
from api.openapi import api_errors
from api.permissions import staff_with_perms

from .execution import job_progress
from .models import Job, JobStatus
from .registry import kind_names


class JobProgressSerializer(serializers.Serializer):
    """A job's progress: its chunks, those done, and the fraction of its work done (``job_progress``'s dict)."""

    job = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    chunks = serializers.IntegerField(min_value=0)
    chunks_done = serializers.IntegerField(min_value=0)
    fraction = serializers.FloatField(min_value=0, max_value=1)
    stage = serializers.CharField(
        allow_blank=True,
        help_text='What the running job is doing now, in words ("nested cross-validation: fold 2 of 5"); empty '
        "when its kind names no stage or the job is not running.",
    )
    error = serializers.CharField(allow_blank=True)
    result = serializers.JSONField(help_text="The job kind's result (an object; empty until it succeeds).")


@extend_schema(
    operation_id="job_detail",
    tags=["jobs"],
    summary="A job's progress (staff).",
    responses={200: JobProgressSerializer, **api_errors(404)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms("jobs.view_job")])
def job_detail(request: Request, job_id: int) -> Response:
    """Staff-only progress of a job, polled by the admin's progress bars."""
    return Response(job_progress(get_object_or_404(Job, pk=job_id)))


class JobSerializer(serializers.ModelSerializer):
    """A job in a listing: what it is and where it stands; its progress and result are at ``url``."""

    url = serializers.SerializerMethodField(help_text="GET it for the job's progress and result.")

    class Meta:
        model = Job
        fields = ["id", "kind", "label", "status", "created_at", "started_at", "finished_at", "url"]

    def get_url(self, job: Job) -> str:
        return reverse("job-detail", args=[job.pk])


class JobQuery(ListQuery):
    """A job listing's filters: its status and its kind (a registered kind's name)."""

    status = serializers.ChoiceField(choices=JobStatus.choices, required=False, help_text="Only jobs in this status.")
    kind = serializers.ChoiceField(choices=[], required=False, help_text="Only jobs of this kind.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = kind_names()  # registered as the apps load, after this module


JobPageSerializer = page_serializer(JobSerializer, "JobPageSerializer")


def jobs_listed(request: Request, jobs: QuerySet[Job]) -> Response:
    """A page of ``jobs``, newest first, filtered by the query's status and kind."""
    return listed(request, jobs.order_by("-created_at", "-pk"), JobSerializer, JobQuery)


@extend_schema(
    operation_id="job_list",
    tags=["jobs"],
    summary="Every job, newest first, by status and kind (staff).",
    description="A script that lost a job's id finds it here: `?status=running&kind=generate`.",
    parameters=[JobQuery],
    responses={200: JobPageSerializer, **api_errors(400)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms("jobs.view_job")])
def job_list(request: Request) -> Response:
    """GET /api/jobs/: a page of jobs."""
    return jobs_listed(request, Job.objects.all())
