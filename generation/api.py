"""Generation over HTTP: ``POST /api/corpora/<id>/generations/`` starts a ``generate`` job on a corpus, as the
admin's "Generate" page and ``manage.py generate`` do (plain mode: constraint systems; ``"diverse": true``:
ParaBank 2's diverse mode).

The JSON object's types are checked by a serializer made from the admin's form (``api.form_api``), then the form
itself validates it (``generation.forms``: the job's own start check, the model paths confined to the server's
model folders), and the same job starts, answered with 202, its id and where to follow it
(``GET /api/jobs/<id>/``). The permissions are the admin page's."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.form_api import JOB_STARTED, form_checked, form_serializer, job_started
from api.openapi import api_errors
from api.permissions import staff_with_perms
from jobs.execution import job_launch

from .forms import GENERATE_PERMS, GenerateForm
from .generation_job import KIND
from .models import Corpus

GenerateInSerializer = form_serializer(GenerateForm, "GenerateInSerializer")


@extend_schema(
    operation_id="corpus_generate",
    tags=["generation"],
    request=GenerateInSerializer,
    summary="Generate paraphrases of a corpus: constraint systems, or ParaBank 2's diverse mode (staff; as the "
    "admin's generate page).",
    description="The settings of `manage.py generate`, by their names (`systems` and `lengths` comma-separated, "
    "as the command takes them). A model, backward model or PPDB file is named in the server's model folders "
    "(`PARAFORGE_MODEL_ROOTS`), or a model by a hub id already in the server's Hugging Face cache; anything "
    "else is refused with 400, as is a job that "
    "cannot start (a corpus that is not ready, a name taken), before any job exists.",
    responses={**JOB_STARTED, **api_errors(400, 404, 413, 415)},
)
@api_view(["POST"])
@permission_classes([staff_with_perms(*GENERATE_PERMS)])
def corpus_generate(request: Request, corpus_id: int) -> Response:
    """POST /api/corpora/<id>/generations/: 202 with the generation job."""
    corpus = get_object_or_404(Corpus, pk=corpus_id)
    form, refused = form_checked(request, GenerateInSerializer, GenerateForm, corpus=corpus)
    if refused is not None:
        return refused
    try:
        job = job_launch(kind=KIND, params=form.cleaned_data["params"], label=f"generate {corpus.name}")
    except ValueError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return job_started(job)
