from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.openapi import api_errors
from api.permissions import staff_with_perms

from .execution import job_progress
from .models import Job, JobStatus


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
