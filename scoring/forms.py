"""The forms of the researcher's path in scoring/ -- train a regressor, score a resource, export a release --
and the permissions each needs. The admin's pages and the HTTP API (``scoring.api``) validate with the same
forms, and each form's ``clean`` runs the job's own start check, so a job that cannot succeed is refused
before it is queued, whichever way it is asked for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django import forms

from annotation.models import Campaign
from generation.models import Resource
from jobs.forms import form_fields
from jobs.params import from_values
from scoring.models import Regressor
from scoring.regressor import RegressorError, regressor_name_check
from scoring.regressor.job import TrainRegressorParams, train_start_check
from scoring.releases.checks import ReleaseError, card_license, release_version_check
from scoring.releases.filters import FilterError
from scoring.releases.params import ReleaseExportParams
from scoring.scored.device import DEVICE_HELP, DEVICES
from scoring.scored.job import score_start_check, scoring_device
from scoring.scored.params import ScoreResourceParams

# the settings' fields come from the job kinds' parameters classes (``jobs.forms.form_fields``), the rest
# (what a model choice is) is said below; ``field_order`` keeps the pages' and the API's order
TrainSettingsFields = type(
    "TrainSettingsFields", (forms.Form,), form_fields(TrainRegressorParams, exclude=("cv_folds",))
)
ScoreSettingsFields = type("ScoreSettingsFields", (forms.Form,), form_fields(ScoreResourceParams, only=("batch_size",)))


def preselect_only_choices(form: forms.Form, names: tuple[str, ...]) -> None:
    """An unbound form's model choice that has exactly one option and no initial value starts on that option
    (issue 48: the score form left the only resource unselected, and the browser's "select an item" popup
    was the first thing the researcher saw)."""
    if form.is_bound:
        return
    for name in names:
        field = form.fields[name]
        if form.initial.get(name) not in (None, ""):
            continue
        only = list(field.queryset.values_list("pk", flat=True)[:2])
        if len(only) == 1:
            form.initial[name] = only[0]


class TrainRegressorForm(TrainSettingsFields):
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"), help_text="its counted judgments are the training data"
    )
    field_order = "campaign name test_fraction seed min_judgments target with_embeddings recipe encoder replace".split()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        preselect_only_choices(self, ("campaign",))

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:  # the job's own start check: a training that cannot succeed is refused here, not queued
            name = regressor_name_check(data["name"])  # (a bad name is named first, as the command does)
            given = {key: value for key, value in data.items() if value != ""}  # empty: the default (encoder)
            params = from_values(TrainRegressorParams, given, campaign=data["campaign"].name, name=name)
            data["name"], _ = train_start_check(**params.arguments())
        except RegressorError as exc:
            raise forms.ValidationError(str(exc)) from None
        data["params"] = replace(params, name=data["name"])
        return data

    def train_arguments(self) -> dict[str, Any]:
        """``scoring.regressor.job.train_regressor_launch``'s arguments from the cleaned form (the admin's and the
        API's)."""
        return self.cleaned_data["params"].arguments()


class ScoreResourceForm(ScoreSettingsFields):
    resource = forms.ModelChoiceField(
        queryset=Resource.objects.filter(shards__isnull=False).distinct().order_by("name"),
        help_text="a generated resource with candidate shards",
    )
    regressor = forms.ModelChoiceField(queryset=Regressor.objects.order_by("name"))
    # (not from ScoringDevice's field: empty here means the installation's device, not the class's default cpu)
    device = forms.ChoiceField(
        required=False,
        choices=[("", "the installation's (PARAFORGE_SCORING_DEVICE)"), *((d, d) for d in DEVICES)],
        help_text=DEVICE_HELP.replace("default: PARAFORGE_SCORING_DEVICE", "empty: PARAFORGE_SCORING_DEVICE"),
    )
    field_order = ("resource", "regressor", "batch_size", "device")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field, missing in (
            ("resource", "no generated resource has candidate shards yet: generate one first"),
            ("regressor", "no regressor has been trained yet: train one first (Regressors > Train a regressor)"),
        ):
            if not self.fields[field].queryset.exists():
                self.fields[field].help_text = missing
                self.fields[field].error_messages["required"] = missing
        preselect_only_choices(self, ("resource", "regressor"))

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:  # the job's own start check: a scoring that cannot succeed is refused here, not queued
            score_start_check(resource=data["resource"], regressor=data["regressor"])
            data["device"] = scoring_device({"device": data.get("device") or None})
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def score_arguments(self) -> dict[str, Any]:
        """``scoring.scored.job.score_resource_launch``'s arguments from the cleaned form (the admin's and the
        API's)."""
        d = self.cleaned_data
        return {
            "resource": d["resource"],
            "regressor": d["regressor"],
            "batch_size": d["batch_size"],
            "device": d["device"],
        }


ExportSettingsFields = type("ExportSettingsFields", (forms.Form,), form_fields(ReleaseExportParams))
# what the two boxes ask for travels as the filters text (copies=keep, non_words=keep), as jobs have stored it
FOLDED_INTO_FILTERS = ("keep_copies", "keep_non_words")


class ExportReleaseForm(ExportSettingsFields):
    field_order = ("version", "format", "layout", "min_score")  # then the rest, as ReleaseExportParams declares them

    def clean_version(self):
        try:
            return release_version_check(self.cleaned_data["version"])
        except ReleaseError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        try:  # the job's own start check of its settings (the resource's come when the export starts)
            asked = from_values(ReleaseExportParams, data)
            asked.release_filters(load_model=False, confined=True)
            if data.get("format"):
                card_license(asked.format, asked.license)
        except (FilterError, ReleaseError) as exc:
            raise forms.ValidationError(str(exc)) from None
        if data.get("keep_copies") and "copies=" not in (data.get("filters") or "").lower():
            # the job reads its filters text: the box travels as the filter it stands for
            data["filters"] = ",".join(f for f in ((data.get("filters") or "").strip(), "copies=keep") if f)
        if data.get("keep_non_words") and "non_words=" not in (data.get("filters") or "").lower():
            data["filters"] = ",".join(f for f in ((data.get("filters") or "").strip(), "non_words=keep") if f)
        return data

    def export_options(self) -> dict[str, Any]:
        """``scoring.releases.job.export_release_for``'s options from the cleaned form (the admin's and the API's):
        the ``ReleaseExportParams`` settings by name, less the boxes folded into the filters text."""
        return {name: value for name, value in self.cleaned_data.items() if name not in FOLDED_INTO_FILTERS}
