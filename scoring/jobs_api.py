"""The researcher's path over HTTP, scoring's part: train a regressor, score a resource, export a release.

Each endpoint takes a JSON object, checks its types with a serializer made from the admin's form
(``form_serializer``: one definition of the fields), then validates it with that very form
(``scoring.forms``: the job's own start checks), and starts the same job the admin starts, answering 202 with
the job's id and where to follow it (``GET /api/jobs/<id>/``). Permissions are the admin's. ``GET`` on the
regressors, scored-resources and a scored resource's releases URLs lists them (``api.listing``), so a script
finds the ids these take."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.form_api import JOB_STARTED, form_checked, form_serializer, job_started
from api.listing import ListQuery, id_filter, listed, page_serializer
from api.openapi import api_errors
from api.permissions import staff_has_perms, staff_with_perms_by_method
from scoring.forms import ExportReleaseForm, ScoreResourceForm, TrainRegressorForm
from scoring.models import Regressor, Release, ScoredResource
from scoring.permissions import EXPORT_PERMS, SCORE_PERMS, TRAIN_PERMS
from scoring.regressor.job import train_regressor_launch
from scoring.releases.access import RELEASE_VIEW_PERMS
from scoring.releases.checks import LicenseConflictError, ReleaseError
from scoring.releases.filters import FilterError
from scoring.releases.job import export_release_for
from scoring.scored.job import score_resource_launch
from scoring.serializers import RegressorSerializer, ReleaseSerializer, ScoredResourceSerializer

TrainInSerializer = form_serializer(TrainRegressorForm, "TrainInSerializer")
ScoreInSerializer = form_serializer(ScoreResourceForm, "ScoreInSerializer")
ExportInSerializer = form_serializer(ExportReleaseForm, "ExportInSerializer")

REGRESSOR_LIST_PERMS = ("scoring.view_regressor",)
SCORED_LIST_PERMS = ("scoring.view_scoredresource",)
SCORED_RELEASES_PERMS = ("scoring.view_scoredresource", *RELEASE_VIEW_PERMS)


class RegressorQuery(ListQuery):
    """A regressor listing's filter: the campaign it was trained on."""

    campaign = id_filter("Only regressors trained on this campaign (its id).")


class ScoredResourceQuery(ListQuery):
    """A scored-resource listing's filters: the resource, the regressor."""

    resource = id_filter("Only scorings of this resource (its id).")
    regressor = id_filter("Only scorings by this regressor (its id).")


RegressorPageSerializer = page_serializer(RegressorSerializer, "RegressorPageSerializer")
ScoredResourcePageSerializer = page_serializer(ScoredResourceSerializer, "ScoredResourcePageSerializer")
ScoredReleasePageSerializer = page_serializer(ReleaseSerializer, "ScoredReleasePageSerializer")


@extend_schema(
    methods=["GET"],
    operation_id="regressor_list",
    tags=["scoring"],
    summary="Every regressor, newest first, by campaign (staff).",
    parameters=[RegressorQuery],
    responses={200: RegressorPageSerializer, **api_errors(400)},
)
@extend_schema(
    methods=["POST"],
    operation_id="regressor_train",
    tags=["scoring"],
    request=TrainInSerializer,
    summary="Train a similarity regressor on a campaign's judgments (staff; as the admin's form).",
    description="A training that cannot succeed (too few judgments, a name taken without `replace`) is refused "
    "with 400 before any job exists.",
    responses={**JOB_STARTED, **api_errors(400, 413, 415)},
)
@api_view(["GET", "POST"])
@permission_classes([staff_with_perms_by_method({"GET": REGRESSOR_LIST_PERMS, "POST": tuple(TRAIN_PERMS)})])
def regressor_train_view(request: Request) -> Response:
    """GET /api/regressors/: a page of regressors; POST: 202 with the training job."""
    if request.method == "GET":
        return listed(request, Regressor.objects.order_by("-created_at", "-pk"), RegressorSerializer, RegressorQuery)
    form, refused = form_checked(request, TrainInSerializer, TrainRegressorForm)
    if refused is not None:
        return refused
    if form.cleaned_data["replace"] and not staff_has_perms(request.user, ("scoring.change_regressor",)):
        return Response(
            {"detail": "you may not replace a regressor (scoring.change_regressor)", "code": "permission_denied"},
            status=status.HTTP_403_FORBIDDEN,
        )
    try:
        job = train_regressor_launch(**form.train_arguments())
    except ValueError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return job_started(job)


@extend_schema(
    methods=["GET"],
    operation_id="scored_resource_list",
    tags=["scoring"],
    summary="Every scored resource, newest first, by resource and regressor (staff).",
    parameters=[ScoredResourceQuery],
    responses={200: ScoredResourcePageSerializer, **api_errors(400)},
)
@extend_schema(
    methods=["POST"],
    operation_id="resource_score",
    tags=["scoring"],
    request=ScoreInSerializer,
    summary="Score a generated resource with a trained regressor (staff; as the admin's form).",
    responses={**JOB_STARTED, **api_errors(400, 413, 415)},
)
@api_view(["GET", "POST"])
@permission_classes([staff_with_perms_by_method({"GET": SCORED_LIST_PERMS, "POST": tuple(SCORE_PERMS)})])
def resource_score(request: Request) -> Response:
    """GET /api/scored-resources/: a page of scored resources; POST: 202 with the scoring job."""
    if request.method == "GET":
        scored = ScoredResource.objects.select_related("resource", "regressor").order_by("-created_at", "-pk")
        return listed(request, scored, ScoredResourceSerializer, ScoredResourceQuery)
    form, refused = form_checked(request, ScoreInSerializer, ScoreResourceForm)
    if refused is not None:
        return refused
    try:
        job = score_resource_launch(**form.score_arguments())
    except ValueError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return job_started(job)


@extend_schema(
    methods=["GET"],
    operation_id="scored_resource_release_list",
    tags=["releases"],
    summary="The releases exported from a scored resource, newest first (staff).",
    parameters=[ListQuery],
    responses={200: ScoredReleasePageSerializer, **api_errors(400, 404)},
)
@extend_schema(
    methods=["POST"],
    operation_id="release_export",
    tags=["releases"],
    request=ExportInSerializer,
    summary="Export a release of a scored resource (staff; as the admin's export form).",
    description="A version already exported, or being exported, is refused (409).",
    responses={
        **JOB_STARTED,
        **api_errors(400, 404, 409, 413, 415, said={409: "That version exists or is being exported (`conflict`)."}),
    },
)
@api_view(["GET", "POST"])
@permission_classes([staff_with_perms_by_method({"GET": SCORED_RELEASES_PERMS, "POST": tuple(EXPORT_PERMS)})])
def release_export_view(request: Request, scored_resource_id: int) -> Response:
    """GET /api/scored-resources/<id>/releases/: a page of its releases; POST: 202 with the export job."""
    scored = get_object_or_404(ScoredResource.objects.select_related("resource", "regressor"), pk=scored_resource_id)
    if request.method == "GET":  # a release names the regressor that scored it in its manifest
        releases = Release.objects.select_related("resource").filter(
            resource=scored.resource, manifest__regressor__name=scored.regressor.name
        )
        return listed(request, releases.order_by("-created_at", "-pk"), ReleaseSerializer)
    form, refused = form_checked(request, ExportInSerializer, ExportReleaseForm)
    if refused is not None:
        return refused
    try:
        job = export_release_for(scored, **form.export_options())
    except LicenseConflictError as exc:  # the licence asked for, not the state of the releases
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    except ReleaseError as exc:
        return Response({"detail": str(exc), "code": "conflict"}, status=status.HTTP_409_CONFLICT)
    except (FilterError, ValueError) as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return job_started(job)
