from django.shortcuts import get_object_or_404
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from config.permissions import staff_with_perms

from .execution import job_progress
from .models import Job


@api_view(["GET"])
@permission_classes([staff_with_perms("jobs.view_job")])
def job_detail(request: Request, job_id: int) -> Response:
    """Staff-only progress of a job, polled by the admin's progress bars."""
    return Response(job_progress(get_object_or_404(Job, pk=job_id)))
