"""The submission API (the slider page posts here) and staff-only read APIs of a batch."""

from __future__ import annotations

import io
import json

from django.contrib.auth import get_user
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
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

from annotation.batches.exports import RESULTS_PERMS, batch_results_csv
from annotation.batches.making import batch_cost_estimate_usd, hit_batch_create
from annotation.batches.params import BatchError, BatchParams
from annotation.campaigns.sample import campaign_lookup
from annotation.hits.submissions import JudgmentInput, SubmissionError, assignment_submit
from annotation.models import Batch, Campaign, Hit
from annotation.providers import ProviderError, get_provider
from annotation.publishing import PublishInProgress, batch_publish
from annotation.web.permissions import BATCH_OPERATION_PERMS, CREATE_BATCH_PERMS
from annotation.web.serializers import (
    AssignmentOutSerializer,
    BatchCreatedOutSerializer,
    BatchCreateInSerializer,
    HitOutSerializer,
    ProviderReportOutSerializer,
    SubmissionInSerializer,
)
from annotation.web.throttles import SubmissionIPThrottle, SubmissionThrottle
from api.listing import ListQuery, listed, page_serializer
from api.openapi import api_errors
from api.permissions import staff_with_perms
from jobs.params import from_values


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


# --- the researcher's path over HTTP: batches -----------------------------------------------------------
# The admin's permissions (``annotation.web.permissions``: creating a draft needs add_batch, each platform operation
# its own permission) and the same services as the admin and the ``create_hit_batch`` / ``crowd`` commands, so
# every rule is checked once.

# The example body the API description shows (Swagger UI's "Try it out" starts from it): the batch form's
# defaults on the quick start's demo lengths, a valid body to send as it is.
BATCH_CREATE_EXAMPLE = OpenApiExample(
    "A local pilot batch",
    value={
        "provider": "local",
        "per_length": 100,
        "lengths": [5, 10, 20, 40],
        "assignments": 3,
        "attention_rate": 0.1,
        "degraded_rate": 0.1,
        "seed": 0,
        "label": "pilot",
        "settings": {"assignment_duration_s": 3600},
    },
    request_only=True,
)


def _platform_error(provider, exc: Exception) -> Response | None:
    """A platform's refusal (409 ``provider_refused``) or absence (503 ``provider_unavailable``); another request
    publishing the batch at this moment (409 ``publish_in_progress``: nothing was sent)."""
    if isinstance(exc, PublishInProgress):
        return Response({"detail": str(exc), "code": exc.code}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, (ProviderError, BatchError)):
        return Response({"detail": str(exc), "code": "provider_refused"}, status=status.HTTP_409_CONFLICT)
    if provider is not None and isinstance(exc, provider.transport_errors):
        return Response(
            {"detail": provider.error_text(exc), "code": "provider_unavailable"},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    return None


@extend_schema(
    operation_id="batch_create",
    tags=["annotation"],
    request=BatchCreateInSerializer,
    summary="Create a draft HIT batch from a campaign's sample (staff; as create_hit_batch and the admin).",
    description="Nothing is spent: the batch is a draft until published. The campaign is named by its id or by "
    "its name, as `create_hit_batch --campaign NAME` takes it (URL-encoded). `settings` are the batch settings "
    "(a bad value is refused, naming the key); `per_length`, `lengths`, `assignments`, `attention_rate`, "
    "`degraded_rate` and `seed` may be given there instead of at the top level, and a value given in both "
    "places that differs is refused.",
    parameters=[
        OpenApiParameter(
            "campaign",
            OpenApiTypes.STR,
            OpenApiParameter.PATH,
            description="The campaign's id (digits) or its name.",
        )
    ],
    examples=[BATCH_CREATE_EXAMPLE],
    responses={
        201: OpenApiResponse(BatchCreatedOutSerializer, description="The draft batch and its cost estimate."),
        **api_errors(400, 404, 413, 415, said={400: "Invalid arguments or batch settings (`invalid`)."}),
    },
)
@api_view(["POST"])
@permission_classes([staff_with_perms(*CREATE_BATCH_PERMS)])
def campaign_batch_create(request: Request, campaign: str) -> Response:
    """POST /api/campaigns/<id or name>/batches/: 201 with the draft batch."""
    target = campaign_lookup(campaign)
    if target is None:
        raise Http404("no such campaign")
    incoming = BatchCreateInSerializer(data=request.data)
    if not incoming.is_valid():
        return Response(
            {"detail": "invalid batch", "code": "invalid", "errors": incoming.errors},
            status=status.HTTP_400_BAD_REQUEST,
        )
    try:  # absent or null arguments keep BatchParams' defaults
        batch = hit_batch_create(campaign=target, params=from_values(BatchParams, incoming.validated_data))
    except BatchError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    try:
        cost = batch_cost_estimate_usd(batch=batch)
    except ProviderError:
        cost = None  # the estimate needs the platform's settings; publishing checks them again
    return Response(
        BatchCreatedOutSerializer({"batch": batch, "cost_estimate_usd": None if cost is None else str(cost)}).data,
        status=status.HTTP_201_CREATED,
    )


def _batch_operation(operation: str, summary: str):
    """A view running one ``HitProvider`` operation on a batch (``crowd OPERATION BATCH`` over HTTP)."""

    @extend_schema(
        operation_id=f"batch_{operation}",
        tags=["annotation"],
        request=None,
        summary=summary,
        responses={
            200: OpenApiResponse(ProviderReportOutSerializer, description="The platform's report."),
            **api_errors(
                404,
                409,
                503,
                said={
                    409: "The platform refused, or is not set up (`provider_refused`): no credentials, not enough "
                    "balance, a cancelled batch; publish: another request is publishing the batch right now "
                    "(`publish_in_progress`: nothing was sent; it makes the one study or set of HITs).",
                    503: "The platform could not be reached (`provider_unavailable`): try again later.",
                },
            ),
        },
    )
    @api_view(["POST"])
    @permission_classes([staff_with_perms(*BATCH_OPERATION_PERMS[operation])])
    def view(request: Request, batch_id: int) -> Response:
        batch = get_object_or_404(Batch, pk=batch_id)
        provider = None
        try:
            if operation == "publish":
                report = batch_publish(batch=batch)
            else:
                provider = get_provider(batch)
                report = getattr(provider, {"approve": "approve_batch"}.get(operation, operation))(batch=batch)
        except Exception as exc:
            answer = _platform_error(provider, exc)
            if answer is None:
                raise
            return answer
        data = json.loads(json.dumps(report or {}, default=str))
        return Response(
            ProviderReportOutSerializer({"batch": batch.pk, "provider": batch.provider, "report": data}).data
        )

    view.__name__ = view.__qualname__ = f"batch_{operation}"
    return view


batch_publish_view = _batch_operation("publish", "Publish a batch on its platform, balance checked first (staff).")
batch_sync_view = _batch_operation("sync", "Verify a batch's submissions with its platform (staff).")
batch_approve_view = _batch_operation("approve", "Pay a batch's verified work (staff; Prolific: sessions done).")
batch_expire_view = _batch_operation("expire", "No new work on a batch: expire its HITs or stop its study (staff).")


class CampaignSerializer(serializers.ModelSerializer):
    """A campaign in a listing: its id and name (either one names it in ``/api/campaigns/<campaign>/batches/``)."""

    class Meta:
        model = Campaign
        fields = ["id", "name", "description", "created_at"]


CampaignPageSerializer = page_serializer(CampaignSerializer, "CampaignPageSerializer")


@extend_schema(
    operation_id="campaign_list",
    tags=["annotation"],
    summary="Every campaign, newest first (staff).",
    parameters=[ListQuery],
    responses={200: CampaignPageSerializer, **api_errors(400)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms("annotation.view_campaign")])
def campaign_list(request: Request) -> Response:
    """GET /api/campaigns/: a page of campaigns."""
    return listed(request, Campaign.objects.order_by("-created_at", "-pk"), CampaignSerializer)
