"""Generation over HTTP: ``POST /api/corpora/<id>/generations/`` starts a ``generate`` job on a corpus, as the
admin's "Generate" page and ``manage.py generate`` do (plain mode: constraint systems; ``"diverse": true``:
ParaBank 2's diverse mode).

The JSON object's types are checked by a serializer made from the admin's form (``api.form_api``), then the form
itself validates it (``generation.web.forms``: the job's own start check, the model paths confined to the server's
model folders), and the same job starts, answered with 202, its id and where to follow it
(``GET /api/jobs/<id>/``). The permissions are the admin page's.

``GET /api/corpora/`` lists the corpora (their ids, for that URL) and ``GET`` on the generations URL lists the
corpus's generation jobs (``api.listing``: paged, filtered by status)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import StrictCharField
from api.form_api import JOB_STARTED, form_checked, form_serializer, job_started
from api.listing import ListQuery, listed, page_serializer
from api.openapi import api_errors
from api.permissions import staff_with_perms, staff_with_perms_by_method
from jobs.api import JobPageSerializer, JobQuery, jobs_listed
from jobs.execution import job_launch
from jobs.models import Job

from ..generation_job import KIND
from ..models import Corpus, CorpusStatus
from .forms import GENERATE_PERMS, MODEL_FORM_HELP, PATH_CHARS, GenerateForm, installed_models

CORPUS_LIST_PERMS = ("generation.view_corpus",)
GENERATIONS_LIST_PERMS = ("generation.view_corpus", "jobs.view_job")


class InstalledModelField(StrictCharField):
    """The ``model`` of a generation: an installed model's name (the schema's enum: ``installed_models``, read
    when the schema is asked for, so it lists what the server holds now), or a folder or hub id typed as on the
    admin's form (``generation.web.forms.confined_model`` checks either)."""


class InstalledModelFieldSchema(OpenApiSerializerFieldExtension):
    """The schema of :class:`InstalledModelField`: one of the installed models' names, or another string."""

    target_class = InstalledModelField

    def map_serializer_field(self, auto_schema, direction):
        typed = {"type": "string", "minLength": 1, "maxLength": PATH_CHARS}
        names = installed_models()
        if not names:
            return typed
        return {
            "anyOf": [
                {"type": "string", "enum": names, "title": "an installed model"},
                {**typed, "title": "another model"},
            ]
        }


GenerateInSerializer = form_serializer(GenerateForm, "GenerateInSerializer")
# (in place, to keep the form's order of fields)
GenerateInSerializer._declared_fields["model"] = InstalledModelField(max_length=PATH_CHARS, help_text=MODEL_FORM_HELP)


class CorpusSerializer(serializers.ModelSerializer):
    """A corpus in a listing: its id (what ``/api/corpora/<id>/generations/`` takes) and whether it is ready."""

    class Meta:
        model = Corpus
        fields = ["id", "name", "format", "status", "n_references", "source", "license", "created_at"]


class CorpusQuery(ListQuery):
    """A corpus listing's filter: its status (``ready`` ones can be generated from)."""

    status = serializers.ChoiceField(
        choices=CorpusStatus.choices, required=False, help_text="Only corpora in this status."
    )


CorpusPageSerializer = page_serializer(CorpusSerializer, "CorpusPageSerializer")


@extend_schema(
    operation_id="corpus_list",
    tags=["generation"],
    summary="Every corpus, newest first, by status (staff).",
    parameters=[CorpusQuery],
    responses={200: CorpusPageSerializer, **api_errors(400)},
)
@api_view(["GET"])
@permission_classes([staff_with_perms(*CORPUS_LIST_PERMS)])
def corpus_list(request: Request) -> Response:
    """GET /api/corpora/: a page of corpora."""
    return listed(request, Corpus.objects.order_by("-created_at", "-pk"), CorpusSerializer, CorpusQuery)


@extend_schema(
    methods=["GET"],
    operation_id="corpus_generation_list",
    tags=["generation"],
    summary="A corpus's generation jobs, newest first, by status (staff).",
    parameters=[JobQuery],
    responses={200: JobPageSerializer, **api_errors(400, 404)},
)
@extend_schema(
    methods=["POST"],
    operation_id="corpus_generate",
    tags=["generation"],
    request=GenerateInSerializer,
    summary="Generate paraphrases of a corpus: constraint systems, or ParaBank 2's diverse mode (staff; as the "
    "admin's generate page).",
    description="The settings of `manage.py generate`, by their names (`systems` and `lengths` comma-separated, "
    "as the command takes them). `model` is an installed model by its name (the enum lists the server's: "
    "`demo`, the shipped demo model, after `manage.py demo_setup`), or another folder in the server's model "
    "folders (`PARAFORGE_MODEL_ROOTS`) or a hub id already in the server's Hugging Face cache; a backward model "
    "or PPDB file is named in the model folders too. Anything else is refused with 400, as are the settings of "
    "the other mode (with `diverse`: constraint systems, IDF table, PPDB file, beam search's `beam`, "
    "`nbest`, `stop`, `length_penalty`, `avoid_copies` other than their defaults; without it, the diverse "
    "settings), and a job that cannot start (a corpus that is not ready, a name taken), before any job exists.",
    responses={**JOB_STARTED, **api_errors(400, 404, 413, 415)},
)
@api_view(["GET", "POST"])
@permission_classes([staff_with_perms_by_method({"GET": GENERATIONS_LIST_PERMS, "POST": tuple(GENERATE_PERMS)})])
def corpus_generate(request: Request, corpus_id: int) -> Response:
    """GET /api/corpora/<id>/generations/: a page of the corpus's generation jobs; POST: 202 with a new one."""
    corpus = get_object_or_404(Corpus, pk=corpus_id)
    if request.method == "GET":
        return jobs_listed(request, Job.objects.filter(kind=KIND, params__corpus=corpus.pk))
    form, refused = form_checked(request, GenerateInSerializer, GenerateForm, corpus=corpus)
    if refused is not None:
        return refused
    try:
        job = job_launch(kind=KIND, params=form.cleaned_data["params"], label=f"generate {corpus.name}")
    except ValueError as exc:
        return Response({"detail": str(exc), "code": "invalid"}, status=status.HTTP_400_BAD_REQUEST)
    return job_started(job)
