"""The forms of the researcher's path in scoring/ -- train a regressor, score a resource, export a release --
and the permissions each needs. The admin's pages and the HTTP API (``scoring.api``) validate with the same
forms, and each form's ``clean`` runs the job's own start check, so a job that cannot succeed is refused
before it is queued, whichever way it is asked for."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.models import Campaign
from config.forms import AsciiFloatField, AsciiIntegerField
from generation.models import Resource

from .aggregation import ESTIMATES
from .embeddings import DEFAULT_ENCODER, ENCODER_HELP
from .models import Regressor
from .regressor import NAME_MAX_LENGTH, RECIPES, RegressorError, RegressorTrainOptions, regressor_name_check
from .regressor_job import train_start_check
from .release_card import LICENSE_HELP
from .release_filters import FilterError, parse_filters
from .releases import FORMATS, ReleaseError, card_license, release_version_check
from .scoring_device import DEVICE_HELP, DEVICES
from .scoring_job import DEFAULT_BATCH_SIZE, GPU_BATCH_SIZE, score_start_check, scoring_device

TRAIN_PERMS = ("scoring.add_regressor", "jobs.view_job")
SCORE_PERMS = ("scoring.add_scoredresource", "jobs.view_job")
EXPORT_PERMS = ("scoring.add_release", "jobs.view_job")


class TrainRegressorForm(forms.Form):
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"), help_text="its counted judgments are the training data"
    )
    name = forms.CharField(
        max_length=NAME_MAX_LENGTH,
        help_text="the regressor's name (score_resource --regressor NAME): letters, digits, "
        "'.', '_' or '-', starting with a letter or digit",
    )
    test_fraction = AsciiFloatField(initial=0.2, help_text="share of references held out for the test (0-1)")
    seed = AsciiIntegerField(initial=0, min_value=0, max_value=2**32 - 1)
    min_judgments = AsciiIntegerField(
        required=False,
        min_value=0,
        help_text="count only workers with at least N judgments (empty: the campaign's minimum)",
    )
    target = forms.ChoiceField(
        choices=[(e, e) for e in ESTIMATES],
        initial="raw",
        help_text="raw = mean similarity (ParaBank's); zscore = bias-corrected estimate",
    )
    with_embeddings = forms.BooleanField(
        required=False, initial=True, help_text="sentence-embedding features (slower, more accurate)"
    )
    recipe = forms.ChoiceField(
        choices=[(r, r) for r in RECIPES],
        initial="base",
        help_text="base = lexical + embedding features; v2 and v3 add the group, NLL and "
        "systems features, v4 those of the STS-tuned encoder head "
        "(docs: explanation/similarity-regressor)",
    )
    encoder = forms.CharField(
        required=False,
        max_length=1000,
        initial=DEFAULT_ENCODER,
        help_text=f"{ENCODER_HELP} (empty: {DEFAULT_ENCODER}; docs: how-to/train-regressor)",
    )
    replace = forms.BooleanField(required=False, help_text="overwrite the regressor of that name")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:  # the job's own start check: a training that cannot succeed is refused here, not queued
            name = regressor_name_check(data["name"])  # (a bad name is named first, as the command does)
            data["options"] = RegressorTrainOptions(
                test_fraction=data["test_fraction"],
                seed=data["seed"],
                with_embeddings=data["with_embeddings"],
                min_judgments=data["min_judgments"],
                target=data["target"],
                recipe=data["recipe"],
                encoder=data.get("encoder") or DEFAULT_ENCODER,
            )
            data["name"], _ = train_start_check(
                campaign=data["campaign"].name, name=name, options=data["options"], replace=data["replace"]
            )
        except RegressorError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def train_arguments(self) -> dict[str, Any]:
        """``regressor_job.train_regressor_launch``'s arguments from the cleaned form (the admin's and the API's)."""
        d = self.cleaned_data
        return {"campaign": d["campaign"].name, "name": d["name"], "options": d["options"], "replace": d["replace"]}


class ScoreResourceForm(forms.Form):
    resource = forms.ModelChoiceField(
        queryset=Resource.objects.filter(shards__isnull=False).distinct().order_by("name"),
        help_text="a generated resource with candidate shards",
    )
    regressor = forms.ModelChoiceField(queryset=Regressor.objects.order_by("name"))
    batch_size = AsciiIntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        help_text=f"pairs per prediction batch (empty: {DEFAULT_BATCH_SIZE} on the CPU, {GPU_BATCH_SIZE} on a GPU)",
    )
    device = forms.ChoiceField(
        required=False,
        choices=[("", "the installation's (PARAFORGE_SCORING_DEVICE)"), *((d, d) for d in DEVICES)],
        help_text=DEVICE_HELP.replace("default: PARAFORGE_SCORING_DEVICE", "empty: PARAFORGE_SCORING_DEVICE"),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field, missing in (
            ("resource", "no generated resource has candidate shards yet: generate one first"),
            ("regressor", "no regressor has been trained yet: train one first (Regressors > Train a regressor)"),
        ):
            if not self.fields[field].queryset.exists():
                self.fields[field].help_text = missing
                self.fields[field].error_messages["required"] = missing

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:  # the job's own start check: a scoring that cannot succeed is refused here, not queued
            score_start_check(resource=data["resource"], regressor=data["regressor"])
            data["device"] = scoring_device(data.get("device") or None)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def score_arguments(self) -> dict[str, Any]:
        """``scoring_job.score_resource_launch``'s arguments from the cleaned form (the admin's and the API's)."""
        d = self.cleaned_data
        return {
            "resource": d["resource"],
            "regressor": d["regressor"],
            "batch_size": d["batch_size"],
            "device": d["device"],
        }


class ExportReleaseForm(forms.Form):
    version = forms.CharField(
        max_length=64, help_text="letters, digits, '.', '_' or '-', starting with a letter or digit"
    )
    format = forms.ChoiceField(choices=[(f, f) for f in FORMATS], initial="tsv")
    min_score = AsciiFloatField(required=False, min_value=0, max_value=100, help_text="predicted similarity 0-100")
    filters = forms.CharField(
        required=False,
        help_text="e.g. len=5-40,overlap=0.2-0.8,rerank=dissimilar,top=5",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    entailment_model = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="for entailment=argmax or entailment=THRESHOLD: a local NLI model folder (Hugging Face "
        "sequence classifier) that the workers can read, under the model folders "
        "(PARAFORGE_MODEL_ROOTS; a path relative to one, or absolute)",
    )
    license = forms.CharField(required=False, max_length=100, help_text=LICENSE_HELP)
    keep_copies = forms.BooleanField(
        required=False,
        help_text="keep paraphrases identical to their reference (same text after case folding and whitespace "
        "collapsing), which a release leaves out by default (the filter copies=keep)",
    )
    keep_non_words = forms.BooleanField(
        required=False,
        help_text="keep paraphrases holding a non-word (what a HIT batch leaves out), each with an empty score and "
        "the caveat non_words; a release leaves them out by default (the filter non_words=keep)",
    )

    def clean_version(self):
        try:
            return release_version_check(self.cleaned_data["version"])
        except ReleaseError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        try:
            parse_filters(
                data.get("filters") or "",
                min_score=data.get("min_score"),
                entailment_model=data.get("entailment_model") or None,
                load_model=False,
                confined=True,
                keep_copies=bool(data.get("keep_copies")),
                keep_non_words=bool(data.get("keep_non_words")),
            )
            if data.get("format"):
                card_license(data["format"], data.get("license") or None)
        except (FilterError, ReleaseError) as exc:
            raise forms.ValidationError(str(exc)) from None
        if data.get("keep_copies") and "copies=" not in (data.get("filters") or "").lower():
            # the job reads its filters text: the box travels as the filter it stands for
            data["filters"] = ",".join(f for f in ((data.get("filters") or "").strip(), "copies=keep") if f)
        if data.get("keep_non_words") and "non_words=" not in (data.get("filters") or "").lower():
            data["filters"] = ",".join(f for f in ((data.get("filters") or "").strip(), "non_words=keep") if f)
        return data

    def export_options(self) -> dict[str, Any]:
        """``release_job.export_release_for``'s options from the cleaned form (the admin's and the API's)."""
        d = self.cleaned_data
        return {
            "version": d["version"],
            "fmt": d["format"],
            "filters": d["filters"],
            "min_score": d["min_score"],
            "entailment_model": d["entailment_model"] or None,
            "license": d["license"] or None,
        }
