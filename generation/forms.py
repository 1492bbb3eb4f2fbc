"""The generate form -- the admin's "Generate" page of a corpus and ``POST /api/corpora/<id>/generations/`` --
and the permissions it needs. Its settings' fields come from :class:`GenerateParams` (``jobs.forms.form_fields``),
both modes included (constraint systems, or ParaBank 2's diverse mode), and ``clean`` runs the job's own start
check (``generation_params``, what ``manage.py generate`` runs), so a job that cannot start is refused before
it is queued, whichever way it is asked for.

What a web page may name differs from the command line in one way: paths. A model, a backward model or a PPDB
file typed here is taken only under the server's model folders (``PARAFORGE_MODEL_ROOTS``,
``infra.model_roots``), and stored as the folder found there; a model may also be a hub id the server's
Hugging Face cache already holds (``generation.model_source``, never fetched during a request: the command
may fetch one), unless it names a local path. Anything else gets one message that names what was typed and
nothing of the server. A prompt template is a built-in's name only (a file would be read on the server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db.models import Q

from api.numbers import shown
from infra.model_roots import confined_path
from jobs.forms import form_fields
from jobs.params import from_values

from .generation_job.params import GenerateParams, generation_params
from .gguf_source import GGUF_SUFFIX
from .model_source import ModelFolderError, hub_id, model_folder
from .models import Corpus, IdfTable, Resource
from .prompts import BUILTINS

# who may start a generation (docs/reference/permissions.md): it reads a corpus and makes a resource, and the
# progress page that follows polls the job API
GENERATE_PERMS = ("generation.view_corpus", "generation.add_resource", "jobs.view_job")
GENERATE_PROGRESS_PERMS = ("jobs.view_job",)
# the form's settings: GenerateParams' own, less the corpus (the page's or the URL's) and the three that name a
# row or a file on the server, offered below as what a web page may name
SERVER_NAMED = ("corpus", "idf_table", "prompt_template")
MODEL_FORM_HELP = (
    "a model folder installed in the server's model folders (PARAFORGE_MODEL_ROOTS; its name there, or its "
    "absolute path), or a Hugging Face hub id (ORG/NAME[@REVISION]) already in the server's cache"
)
NAME_CHARS = Resource._meta.get_field("name").max_length
PATH_CHARS = 1000
# what a message of the settings' checks starts with -> the field it is about (the rest are the form's own)
MESSAGE_FIELDS = (
    ("model folder", "model"),
    ("--model", "model"),
    ("--backward-model", "backward_model"),
    ("PPDB", "ppdb"),
    ("unknown system", "systems"),
    ("give at least one system", "systems"),
    ("length must", "lengths"),
    ("give at least one length", "lengths"),
    ("a resource named", "name"),
    ("prompt_template", "prompt_template"),
)


def _settings_fields() -> dict[str, Any]:
    fields = form_fields(GenerateParams, exclude=SERVER_NAMED)
    fields["model"].help_text = MODEL_FORM_HELP
    fields["backward_model"].help_text += "; as the model, from the server's model folders or its hub cache"
    fields["ppdb"].help_text += ", in the server's model folders"
    for name, longest in (
        ("name", NAME_CHARS),
        ("model", PATH_CHARS),
        ("backward_model", PATH_CHARS),
        ("ppdb", PATH_CHARS),
    ):
        fields[name].max_length = longest  # (the form's and the API's bound: a name is stored in a 200-character row)
        fields[name].validators.append(MaxLengthValidator(longest))
    fields["systems"].initial = None  # (the class's empty tuple: no system)
    fields["lengths"].initial = ",".join(str(n) for n in fields["lengths"].initial)
    for field in fields.values():  # an optional choice may be left to its default (the device's, the class's)
        if isinstance(field, forms.ChoiceField) and not field.required:
            field.choices = [("", "default"), *field.choices]
    return fields


GenerateSettingsFields = type("GenerateSettingsFields", (forms.Form,), _settings_fields())


class ConfinedPathError(ValueError):
    """A path typed on a web page that is not under the server's model folders (or a hub id it cannot use)."""


def _names_a_local_path(typed: str) -> bool:
    """Whether a hub-shaped value is also a path the workers would read instead (``model_folder``'s rule)."""
    try:
        return Path(typed).exists() or (Path(settings.BASE_DIR) / typed).exists()
    except (OSError, ValueError):
        return True


def confined_model(typed: str, *, option: str = "model") -> str:
    """The model a web form names, as the job stores it: a folder under the model roots (resolved), or a hub id
    that names no local path and that the server's Hugging Face cache already holds (a request never makes the
    server download a model: ``manage.py generate`` may). ConfinedPathError otherwise: one message, whatever
    the reason (outside the roots, missing, not cached)."""
    found = confined_path(typed, folder=True) or (
        confined_path(typed, folder=False) if typed.lower().endswith(GGUF_SUFFIX) else None
    )
    if found is not None:
        try:  # a GGUF file (or a folder holding one) converted on the server beforehand: never here
            model_folder(found, cache_only=True)
        except ModelFolderError as exc:
            raise ConfinedPathError(f"{option} {shown(typed)}: {exc}") from None
        return str(found)
    if hub_id(typed) is not None and not _names_a_local_path(typed):
        try:
            model_folder(typed, cache_only=True)
        except ModelFolderError:
            pass
        else:
            return typed
    raise ConfinedPathError(
        f"{option} {shown(typed)}: not a model folder in the server's model folders (PARAFORGE_MODEL_ROOTS), nor a "
        "hub model in its cache: give the name of an installed model folder or a hub id (ORG/NAME), or "
        "ask the server's administrator which models are installed"
    )


def confined_file(typed: str, *, option: str) -> str:
    """A file a web form names (the PPDB file), as the job stores it: under the model roots, resolved."""
    found = confined_path(typed, folder=False)
    if found is None:
        raise ConfinedPathError(
            f"{option} {shown(typed)}: not a file in the server's model folders (PARAFORGE_MODEL_ROOTS): give its name "
            "there, or ask the server's administrator which files are installed"
        )
    return str(found)


class GenerateForm(GenerateSettingsFields):
    """A generation job of ``corpus`` (the page's, the URL's). ``cleaned_data["params"]``: the job's params, as
    ``manage.py generate`` makes them for the same settings."""

    idf_table = forms.ModelChoiceField(
        queryset=IdfTable.objects.none(),
        required=False,
        help_text="the IDF table of the constraint systems (default: the corpus's latest); not with diverse",
    )
    prompt_template = forms.ChoiceField(
        choices=[("", "the model's default"), *((name, name) for name in BUILTINS)],
        required=False,
        help_text="a decoder-only model's prompt: paraphrase-chat (its chat template) or paraphrase-plain",
    )
    field_order = (
        "model diverse systems sample_per_length lengths name beam nbest stop max_length length_penalty batch_size "
        "device dtype seed idf_table ppdb prompt_template"
    ).split()

    def __init__(self, *args: Any, corpus: Corpus, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.corpus = corpus
        self.fields["idf_table"].queryset = IdfTable.objects.filter(Q(corpus=corpus) | Q(corpus__isnull=True)).order_by(
            "-created_at", "-pk"
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        given = {key: value for key, value in data.items() if value not in ("", None)}  # empty: the default
        shown: dict[str, str] = {}  # a folder found under the roots -> what was typed (messages say the latter)
        try:
            for key in ("model", "backward_model", "ppdb"):
                if key in given:
                    typed = given[key].strip()
                    if key == "ppdb":
                        given[key] = confined_file(typed, option=key)
                    else:
                        given[key] = confined_model(typed, option=key)
                    shown[given[key]] = typed
        except ConfinedPathError as exc:
            self.add_error(key, str(exc))
            return data
        if given.get("idf_table") is not None:
            given["idf_table"] = given["idf_table"].pk
        try:  # the job's own start check (manage.py generate's): a job that cannot start is refused here
            data["params"] = generation_params(from_values(GenerateParams, given, corpus=self.corpus.pk))
        except ValueError as exc:  # (GenerationSettingsError, DecodeOptionsError: the settings' own words)
            message = " ".join(str(exc).split())
            for found, typed in sorted(shown.items(), key=lambda item: -len(item[0])):
                message = message.replace(found, typed)
            self.add_error(_message_field(message, self.fields), message)
        return data


def _message_field(message: str, fields: dict[str, forms.Field]) -> str | None:
    """The field a settings error is about (the one it says to leave out, or its first word when that is a field's
    name), else None (the form's)."""
    left_out = message.rsplit("leave out ", 1)[-1] if "leave out " in message else ""
    if left_out in fields:
        return left_out
    first = message.split(" ", 1)[0].strip(":'\"")
    if first in fields:
        return first
    return next((field for start, field in MESSAGE_FIELDS if message.startswith(start)), None)
