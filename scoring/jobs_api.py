"""The researcher's path over HTTP, scoring's part: train a regressor, score a resource, export a release.

Each endpoint takes a JSON object, checks its types with a serializer made from the admin's form
(``form_serializer``: one definition of the fields), then validates it with that very form
(``scoring.forms``: the job's own start checks), and starts the same job the admin starts, answering 202 with
the job's id and where to follow it (``GET /api/jobs/<id>/``). Permissions are the admin's."""

from __future__ import annotations

from django import forms
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from api.forms import AsciiFloatField, AsciiIntegerField
from api.openapi import api_errors
from api.permissions import staff_has_perms, staff_with_perms
from jobs.models import Job
from scoring.forms import (
    EXPORT_PERMS,
    SCORE_PERMS,
    TRAIN_PERMS,
    ExportReleaseForm,
    ScoreResourceForm,
    TrainRegressorForm,
)
from scoring.models import ScoredResource
from scoring.regressor.job import train_regressor_launch
from scoring.releases.checks import LicenseConflictError, ReleaseError
from scoring.releases.filters import FilterError
from scoring.releases.job import export_release_for
from scoring.scored.job import score_resource_launch


def form_serializer(form_class: type[forms.Form], name: str) -> type[serializers.Serializer]:
    """A serializer with the form's fields as JSON types (a model choice is the row's id; a field's initial
    value its default), in the form's order (its ``field_order`` first, as its pages show them), for the API
    description and a first check of the types; the form checks the rest."""
    fields: dict[str, serializers.Field] = {}
    order = [key for key in (form_class.field_order or ()) if key in form_class.base_fields]
    for key in dict.fromkeys([*order, *form_class.base_fields]):
        field = form_class.base_fields[key]
        common = {"required": field.required, "help_text": str(field.help_text or "") or None}
        if field.initial is not None and not isinstance(field, forms.BooleanField):
            common.update(required=False, default=field.initial)  # the form's initial value is the API's default
        if not field.required:
            common["allow_null"] = True
        if isinstance(field, forms.ModelChoiceField):
            fields[key] = StrictIntegerField(min_value=1, **common)
        elif isinstance(
            field, (forms.FloatField, AsciiFloatField)
        ):  # (before IntegerField: Django's FloatField is one)
            fields[key] = StrictFloatField(min_value=field.min_value, max_value=field.max_value, **common)
        elif isinstance(field, (forms.IntegerField, AsciiIntegerField)):
            fields[key] = StrictIntegerField(min_value=field.min_value, max_value=field.max_value, **common)
        elif isinstance(field, forms.BooleanField):
            fields[key] = StrictBooleanField(required=False, default=bool(field.initial), help_text=common["help_text"])
        elif isinstance(field, forms.ChoiceField):
            fields[key] = serializers.ChoiceField(choices=[c for c, _ in field.choices], **common)
        else:
            fields[key] = StrictCharField(
                max_length=getattr(field, "max_length", None), allow_blank=not field.required, **common
            )
    return type(name, (serializers.Serializer,), fields)


TrainInSerializer = form_serializer(TrainRegressorForm, "TrainInSerializer")
ScoreInSerializer = form_serializer(ScoreResourceForm, "ScoreInSerializer")
ExportInSerializer = form_serializer(ExportReleaseForm, "ExportInSerializer")


class JobStartedSerializer(serializers.Serializer):
    """The job that was started, and the URL that follows it."""

    job = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    url = serializers.CharField(help_text="GET it for the job's progress and, once it succeeded, its result.")


def _invalid(errors) -> Response:
    return Response({"detail": "invalid arguments", "code": "invalid", "errors": errors}, status=400)


def _checked(request: Request, serializer_class, form_class, **form_kwargs):
    """(the valid form, None) or (None, the 400 answer): types first, then the form's own rules."""
    if not isinstance(request.data, dict):
        return None, _invalid({"non_field_errors": ["expected a JSON object"]})
    typed = serializer_class(data=request.data)
    if not typed.is_valid():
        return None, _invalid(typed.errors)
    data = {k: v for k, v in typed.validated_data.items() if v is not None}
    form = form_class(data=data, **form_kwargs)
    if not form.is_valid():
        errors = {k: [e["message"] for e in v] for k, v in form.errors.get_json_data().items()}
        return None, _invalid(errors)
    return form, None


def _started(job: Job) -> Response:
    body = {"job": job.pk, "kind": job.kind, "status": job.status, "url": reverse("job-detail", args=[job.pk])}
    return Response(JobStartedSerializer(body).data, status=status.HTTP_202_ACCEPTED)


JOB_STARTED = {202: OpenApiResponse(JobStartedSerializer, description="Started: follow it at `url`.")}


@extend_schema(
    operation_id="regressor_train",
    tags=["scoring"],
    request=TrainInSerializer,
    summary="Train a similarity regressor on a campaign's judgments (staff; as the admin's form).",
    description="A training that cannot succeed (too few judgments, a name taken without `replace`) is refused "
    "with 400 before any job exists.",
    responses={**JOB_STARTED, **api_errors(400, 413, 415)},
)
@api_view(["POST"])
@permission_classes([staff_with_perms(*TRAIN_PERMS)])
def regressor_train_view(request: Request) -> Response:
    """POST /api/regressors/: 202 with the training job."""
    form, refused = _checked(request, TrainInSerializer, TrainRegressorForm)
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
    return _started(job)


@extend_schema(
    operation_id="resource_score",
    tags=["scoring"],
    request=ScoreInSerializer,
    summary="Score a generated resource with a trained regressor (staff; as the admin's form).",
    responses={**JOB_STARTED, **api_errors(400, 413, 415)},
)
@api_view(["POST"])
@permission_classes([staff_with_perms(*SCORE_PERMS)])
def resource_score(request: Request) -> Response:
    """POST /api/scored-resources/: 202 with the scoring job."""
    form, refused = _checked(request, ScoreInSerializer, ScoreResourceForm)
    if refused is not None:
        return refused
    try:
        job = score_resource_launch(**form.score_arguments())
    except ValueError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return _started(job)


@extend_schema(
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
@api_view(["POST"])
@permission_classes([staff_with_perms(*EXPORT_PERMS)])
def release_export_view(request: Request, scored_resource_id: int) -> Response:
    """POST /api/scored-resources/<id>/releases/: 202 with the export job."""
    scored = get_object_or_404(ScoredResource.objects.select_related("resource", "regressor"), pk=scored_resource_id)
    form, refused = _checked(request, ExportInSerializer, ExportReleaseForm)
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
    return _started(job)
