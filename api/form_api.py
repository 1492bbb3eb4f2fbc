"""A job's HTTP endpoint made from the admin's form that starts it: one definition of the fields for both.

:func:`form_serializer` turns the form's fields into a DRF serializer (the API description and a first check of
the JSON types); :func:`form_checked` runs that serializer, then the form itself (the job's own start checks);
:func:`job_started` is the 202 answer every such endpoint gives. Why here: the researcher's path has endpoints in
several apps (generation's generate, scoring's train, score and export), and their requests read alike."""

from __future__ import annotations

from typing import Any

from django import forms
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from api.forms import AsciiFloatField, AsciiIntegerField


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


class JobStartedSerializer(serializers.Serializer):
    """The job that was started, and the URL that follows it."""

    job = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    url = serializers.CharField(help_text="GET it for the job's progress and, once it succeeded, its result.")


JOB_STARTED = {202: OpenApiResponse(JobStartedSerializer, description="Started: follow it at `url`.")}


def invalid_arguments(errors: Any) -> Response:
    """400 ``invalid``, ``errors`` by field name."""
    return Response({"detail": "invalid arguments", "code": "invalid", "errors": errors}, status=400)


def form_checked(
    request: Request, serializer_class: type[serializers.Serializer], form_class: type[forms.Form], **form_kwargs: Any
) -> tuple[forms.Form | None, Response | None]:
    """(the valid form, None) or (None, the 400 answer): types first, then the form's own rules."""
    if not isinstance(request.data, dict):
        return None, invalid_arguments({"non_field_errors": ["expected a JSON object"]})
    typed = serializer_class(data=request.data)
    if not typed.is_valid():
        return None, invalid_arguments(typed.errors)
    data = {k: v for k, v in typed.validated_data.items() if v is not None}
    form = form_class(data=data, **form_kwargs)
    if not form.is_valid():
        errors = {k: [e["message"] for e in v] for k, v in form.errors.get_json_data().items()}
        return None, invalid_arguments(errors)
    return form, None


def job_started(job: Any) -> Response:
    """202 with the job (a ``jobs.models.Job``) and the URL that follows it (``GET /api/jobs/<id>/``)."""
    body = {"job": job.pk, "kind": job.kind, "status": job.status, "url": reverse("job-detail", args=[job.pk])}
    return Response(JobStartedSerializer(body).data, status=status.HTTP_202_ACCEPTED)
