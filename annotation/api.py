"""The submission API (the slider page posts here) and staff-only read APIs of a batch."""

from __future__ import annotations

import io

from django.contrib.auth import get_user
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    permission_classes,
    renderer_classes,
    throttle_classes,
)
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from config.openapi import api_errors
from config.permissions import staff_with_perms

from .exports import RESULTS_PERMS, batch_results_csv
from .models import Batch, Hit
from .serializers import AssignmentOutSerializer, HitOutSerializer, SubmissionInSerializer
from .submissions import JudgmentInput, SubmissionError, assignment_submit
from .throttles import SubmissionIPThrottle, SubmissionThrottle


class CSVRenderer(BaseRenderer):
    """Lets clients ask for text/csv (errors still come as JSON text)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data) if not isinstance(data, (str, bytes)) else data


def _session_user(request: Request):
    """The logged-in user of the browser session, if any: a local assignment is submitted only by its
    annotator. (The API authenticates no one itself -- the signed token is the credential -- so this
    reads Django's session user, which no request body can set.)"""
    user = get_user(request._request)
    return user if user.is_authenticated else None


@extend_schema(
    operation_id="assignment_create",
    tags=["annotation"],
    request=SubmissionInSerializer,
    summary="Submit the judgments of one assignment of a HIT (the slider page posts here).",
    description="No session: the signed token of the HIT page is the credential. A refused submission saves "
    "nothing; 400 covers bad values (a score outside 0-100, null with fluency other than 0, a "
    "candidate not in the HIT, missing or repeated).",
    responses={
        201: OpenApiResponse(AssignmentOutSerializer, description="Saved."),
        200: OpenApiResponse(
            AssignmentOutSerializer, description="The same assignment with the same judgments again: the stored one."
        ),
        **api_errors(
            400,
            404,
            409,
            410,
            413,
            415,
            429,
            said={
                403: "A bad, forged, expired or foreign token (`bad_token`), an assignment of another worker "
                "or annotator, a disqualified worker (`disqualified`).",
                409: "Another HIT's assignment, a draft batch, a full HIT, a candidate already judged, the "
                "same assignment again with other judgments (`conflicting_replay`).",
            },
        ),
    },
)
@api_view(["POST"])
@authentication_classes([])  # the signed token in the body is the credential (no session, no CSRF)
@permission_classes([AllowAny])
@throttle_classes([SubmissionIPThrottle, SubmissionThrottle])
def assignment_create(request: Request, hit_id: int) -> Response:
    """POST /api/hits/<hit_id>/assignments/: 201 with the saved assignment, 200 when already saved."""
    hit = get_object_or_404(Hit, pk=hit_id)
    incoming = SubmissionInSerializer(data=request.data)
    if not incoming.is_valid():
        return Response(
            {"detail": "invalid submission", "code": "invalid", "errors": incoming.errors},
            status=status.HTTP_400_BAD_REQUEST,
        )
    data = incoming.validated_data
    try:
        result = assignment_submit(
            hit=hit,
            assignment_id=data["assignment_id"],
            worker_id=data["worker_id"],
            token=data["token"],
            judgments=[JudgmentInput(**j) for j in data["judgments"]],
            comment=data.get("comment", ""),
            user=_session_user(request),
        )
    except SubmissionError as exc:
        return Response({"detail": exc.message, "code": exc.code}, status=exc.status)
    return Response(
        AssignmentOutSerializer(result.assignment).data,
        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
    )


@extend_schema(
    operation_id="batch_hits",
    tags=["annotation"],
    summary="A batch's HITs (staff).",
    responses={200: HitOutSerializer(many=True), **api_errors(404)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms("annotation.view_batch", "annotation.view_hit")])
def batch_hits(request: Request, batch_id: int) -> Response:
    """Staff: the batch's HITs as [{"id", "reference", "candidates": [{"id", "text"}]}]."""
    batch = get_object_or_404(Batch, pk=batch_id)
    hits = Hit.objects.filter(batch=batch).select_related("reference").prefetch_related("items__candidate")
    return Response(HitOutSerializer(hits, many=True).data)


@extend_schema(
    operation_id="batch_results",
    tags=["annotation"],
    summary="A batch's raw judgments as an MTurk-style results CSV (staff).",
    responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The CSV file."), **api_errors(404)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms(*RESULTS_PERMS)])
@renderer_classes([JSONRenderer, CSVRenderer])
def batch_results(request: Request, batch_id: int) -> HttpResponse:
    """Staff: the batch's raw judgments as an MTurk-style results CSV."""
    batch = get_object_or_404(Batch, pk=batch_id)
    buffer = io.StringIO()
    batch_results_csv(batch=batch, out=buffer)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.pk}-results.csv"'
    return response
