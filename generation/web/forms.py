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
nothing of the server. A prompt template is a built-in's name only (a file would be read on the server).

The models the form takes by name are offered in a picker (:func:`installed_models`: the entries directly under
the model roots that the form's own checks accept; ``manage.py demo_setup`` installs the shipped ones there,
``generation.demo_settings.install_shipped_models``), with a box for another folder or hub id; the API's schema
lists the same names. The page groups the fields (:data:`FIELDSETS`: common; constraint systems and beam search;
diverse mode) and a small script shows the group of the mode the "diverse" box picks and disables the other
(``frontend/static/frontend/generate-form.js``); without the script every group is shown. Settings of the other
mode are refused by the job's own rule (``GenerateParams``: what ``manage.py generate`` refuses)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db.models import Q

from api.numbers import shown
from infra.model_roots import confined_path, model_roots
from jobs.forms import form_fields
from jobs.params import from_values

from ..decode_options import DIVERSE_ONLY
from ..generation_job.params import GenerateParams, GenerationSettingsError, check_model_folder, generation_params
from ..gguf_source import GGUF_SUFFIX
from ..model_source import ModelFolderError, hub_id, model_folder
from ..models import Corpus, IdfTable, Resource
from ..prompts import BUILTINS

# who may start a generation (docs/reference/permissions.md): it reads a corpus and makes a resource, and the
# progress page that follows polls the job API
GENERATE_PERMS = ("generation.view_corpus", "generation.add_resource", "jobs.view_job")
GENERATE_PROGRESS_PERMS = ("jobs.view_job",)
# the form's settings: GenerateParams' own, less the corpus (the page's or the URL's) and the three that name a
# row or a file on the server, offered below as what a web page may name
SERVER_NAMED = ("corpus", "idf_table", "prompt_template")
MODEL_FORM_HELP = (
    "an installed model, by its name in the server's model folders (PARAFORGE_MODEL_ROOTS: the list offers "
    'each one the form can use; demo is the shipped demo model); or, under "another model", a folder in '
    "those model folders (its name there, or its absolute path) or a Hugging Face hub id (ORG/NAME[@REVISION]) "
    "already in the server's cache"
)
# the help the parameters classes give each diverse setting, for a command's --help ("--diverse: ..."), said
# for a form; the six whose class help is only "--diverse" get their meaning here (DiverseOptions' docstring)
DIVERSE_FORM_HELP = {
    "negative_sets": "random negative sets drawn from each reference's words (ParaBank 2: 5); the samples under "
    "each set avoid its words",
    "samples": "outputs sampled under each negative set (ParaBank 2: 30); a reference decodes negative sets x "
    "samples rows",
    "top_k": "each token is sampled from the k most likely ones (top-k sampling; ParaBank 2: 10)",
    "temperature": "the sampling's softmax temperature, above 0: below 1 keeps near the model's best guesses, "
    "above 1 draws more varied (and more broken) outputs",
    "clusters": "k-medoids clusters of a reference's candidates, one pinned on the reference (at least 2); the "
    "best-scored candidate of each other cluster is kept",
    "keep": "paraphrases kept per reference at most, best first: they become the systems r1 .. r<keep>",
    "max_nll": "drop candidates whose score (the model's negative log-likelihood per token, plus the backward "
    "model's when one is given) is above this",
}
# the page's groups, in order: (key, title, what it is for, its fields); a field in none is in "common"
FIELDSETS = (
    ("common", "Model and sample", "What every job needs, in either mode.", ()),
    (
        "constraints",
        "Constraint systems and beam search",
        "ParaBank's constraint systems, decoded by beam search (when diverse is not ticked).",
        ("systems", "idf_table", "ppdb", "beam", "nbest", "stop", "length_penalty", "avoid_copies"),
    ),
    (
        "diverse",
        "Diverse mode",
        "ParaBank 2's diverse mode: sampling under random negative constraints, scoring, clustering (when diverse "
        "is ticked; it takes none of the constraint systems' or beam search's settings).",
        (*DIVERSE_ONLY,),
    ),
)
_OPTION = re.compile(r"--([a-z][a-z-]*)")
NAME_CHARS = Resource._meta.get_field("name").max_length
PATH_CHARS = 1000

OTHER_MODEL = ""  # the picker's "another model" choice: the box beside it says which


class ModelPicker(forms.MultiWidget):
    """The model on the page: a select of the installed models by name (``model``) and, for another one, a
    box (``model_path``, read when the select says "another model"). One value posted as ``model`` (a script,
    the API, a test) is taken as it is."""

    def __init__(self, attrs: dict | None = None) -> None:
        widgets = {
            "": forms.Select(attrs={"class": "model-pick"}),
            "path": forms.TextInput(
                attrs={"class": "model-path vTextField", "placeholder": "a folder in the model folders, or ORG/NAME"}
            ),
        }
        super().__init__(widgets, attrs)

    def set_names(self, names: list[str]) -> None:
        self.widgets[0].choices = [*((n, n) for n in names), (OTHER_MODEL, "another model (type it in the box)")]

    def decompress(self, value: Any) -> list[str]:
        names = [c for c, _ in self.widgets[0].choices if c != OTHER_MODEL]
        if value in names:
            return [value, ""]
        return [OTHER_MODEL, value or ""]

    def value_from_datadict(self, data: Any, files: Any, name: str) -> str | None:
        picked, typed = data.get(name), data.get(f"{name}_path")
        if picked is None and typed is None:
            return None
        return (picked or "").strip() or (typed or "").strip()

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return name not in data and f"{name}_path" not in data


class ModelField(forms.CharField):
    """The model: a name from the picker, or a folder or hub id typed (``confined_model`` checks either)."""

    widget = ModelPicker

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {}  # (no maxlength on the select; the box is optional while the select names a model)


def installed_models() -> list[str]:
    """The models a web form offers by name: the entries directly under the model roots (in the roots' order,
    each name once, as a name resolves to the first root holding it) that the form's own checks take: a folder
    under a root (a symbolic link out of it is not, as ``infra.model_roots`` refuses it) that a generation job
    can load (a Hugging Face checkpoint folder, or a GGUF already converted on the server). What a job cannot
    load yet (an adapter folder: ``check_model_folder`` needs a config.json) is left out."""
    names: list[str] = []
    for root in model_roots():
        try:
            entries = sorted(entry.name for entry in root.iterdir())
        except OSError:
            continue
        for name in entries:
            if name.startswith(".") or name in names:
                continue
            try:
                check_model_folder(confined_model(name))
            except (ConfinedPathError, GenerationSettingsError):
                continue
            names.append(name)
    return names


def form_help(name: str, text: str) -> str:
    """A field's help as a form says it: the class's (a command's words), less the "--diverse" its diverse
    settings start with (the page's group says the mode), with options named as the form's fields."""
    text = DIVERSE_FORM_HELP.get(name) or re.sub(r"^--diverse(: | \(|$)", lambda m: "(" if "(" in m[1] else "", text)
    return _OPTION.sub(lambda m: m[1].replace("-", " "), text).strip()


def _settings_fields() -> dict[str, Any]:
    fields = form_fields(GenerateParams, exclude=SERVER_NAMED)
    for name, field in fields.items():
        field.help_text = form_help(name, str(field.help_text or ""))
    fields["model"] = ModelField(max_length=PATH_CHARS, help_text=MODEL_FORM_HELP)
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
        "model diverse systems sample_per_length lengths name beam nbest stop max_length length_penalty keep_facts "
        "avoid_copies batch_size "
        "device dtype seed idf_table ppdb prompt_template"
    ).split()

    class Media:
        js = ("frontend/generate-form.js",)
        css = {"all": ("frontend/generate-form.css",)}

    def __init__(self, *args: Any, corpus: Corpus, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.corpus = corpus
        names = installed_models()
        self.fields["model"].widget.set_names(names)
        if not self.is_bound and names:
            self.initial.setdefault("model", "demo" if "demo" in names else names[0])
        self.fields["idf_table"].queryset = IdfTable.objects.filter(Q(corpus=corpus) | Q(corpus__isnull=True)).order_by(
            "-created_at", "-pk"
        )

    def fieldsets(self) -> list[tuple[str, str, str, list[forms.BoundField]]]:
        """The page's groups (:data:`FIELDSETS`) with their bound fields, in the form's order."""
        placed = {name for *_, names in FIELDSETS for name in names}
        return [
            (key, title, about, [self[n] for n in self.fields if (n in names if names else n not in placed)])
            for key, title, about, names in FIELDSETS
        ]

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
            field = getattr(exc, "field", None)  # (the setting the check names; a path check's, under its field)
            self.add_error(field if field in self.fields else _message_field(message, self.fields), message)
        return data


def _message_field(message: str, fields: dict[str, forms.Field]) -> str | None:
    """The field a settings error that names none (``ParamsError.field``) is about: the one it says to leave out,
    or its first word when that is a field's name; else None (the form's)."""
    left_out = message.rsplit("leave out ", 1)[-1] if "leave out " in message else ""
    if left_out in fields:
        return left_out
    first = message.split(" ", 1)[0].strip(":'\"")
    return first if first in fields else None
