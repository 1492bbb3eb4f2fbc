"""API shapes: the submission coming in, the saved assignment going out, a batch's HITs for staff."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.batch_settings import (
    LABEL_RULE,
    MAX_BUCKET_LENGTH,
    MAX_BUCKETS,
    MAX_LABEL,
    BatchSettingsError,
    batch_label_check,
)
from annotation.batches.params import PROVIDER_NAMES
from annotation.hits.submissions import MAX_COMMENT
from annotation.hits.tokens import item_key
from annotation.models import Assignment, Batch, Hit, judgment_value_error
from api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField


class JudgmentInSerializer(serializers.Serializer):
    """One sentence's judgment. The sentence is named by the key its page shows (its fieldset's
    ``data-item``), never by candidate id: ids tell quality-check copies from real candidates."""

    item = serializers.CharField(max_length=64, help_text="The sentence's key on the HIT page (data-item).")
    score = StrictIntegerField(min_value=0, max_value=100, allow_null=True)
    fluency = StrictIntegerField(min_value=0, max_value=2)
    moved = StrictBooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The worker moved the slider (false: clicked it to keep its starting value; null: not recorded).",
    )
    # judgment_value_error's rule in the API description (api.openapi.AutoSchema): a null score (N/A)
    # only with fluency 0 (nonsensical)
    openapi_request_rule = {
        "anyOf": [
            {"properties": {"score": {"type": "integer"}}},
            {"properties": {"fluency": {"type": "integer", "maximum": 0}}},
        ]
    }

    def validate(self, attrs):
        problem = judgment_value_error(attrs["score"], attrs["fluency"])
        if problem:
            raise serializers.ValidationError(problem)
        return attrs


class SubmissionInSerializer(serializers.Serializer):
    assignment_id = serializers.CharField(max_length=200)
    worker_id = serializers.CharField(max_length=200)
    token = serializers.CharField(max_length=2000)
    judgments = JudgmentInSerializer(many=True, allow_empty=False, max_length=50)
    comment = serializers.CharField(max_length=MAX_COMMENT, allow_blank=True, required=False, default="")


class JudgmentOutSerializer(serializers.Serializer):
    """A stored judgment: the sentence's key on the HIT page, its 0-100 score (null: N/A) and its fluency
    (0, 1 or 2). Candidate ids are not given back: a worker must not learn them (``tokens.item_key``)."""

    item = serializers.CharField()
    score = serializers.IntegerField(min_value=0, max_value=100, allow_null=True)
    fluency = serializers.IntegerField(min_value=0, max_value=2)


class HitCandidateOutSerializer(serializers.Serializer):
    """A candidate sentence of a HIT."""

    id = serializers.IntegerField()
    text = serializers.CharField()


class AssignmentOutSerializer(serializers.ModelSerializer):
    assignment_id = serializers.CharField(source="external_assignment_id")
    worker_id = serializers.CharField(source="worker.external_id")
    judgments = serializers.SerializerMethodField()

    class Meta:
        model = Assignment
        fields = [
            "id",
            "assignment_id",
            "hit",
            "worker_id",
            "status",
            "accepted_at",
            "submitted_at",
            "comment",
            "judgments",
        ]

    @extend_schema_field(JudgmentOutSerializer(many=True))
    def get_judgments(self, obj: Assignment) -> list[dict]:
        return [
            {"item": item_key(hit_id=obj.hit_id, candidate_id=j.candidate_id), "score": j.score, "fluency": j.fluency}
            for j in obj.judgments.order_by("id")
        ]


class HitOutSerializer(serializers.ModelSerializer):
    reference = serializers.CharField(source="reference.text")
    candidates = serializers.SerializerMethodField()

    class Meta:
        model = Hit
        fields = ["id", "reference", "candidates"]

    @extend_schema_field(HitCandidateOutSerializer(many=True))
    def get_candidates(self, obj: Hit) -> list[dict]:
        return [{"id": item.candidate_id, "text": item.candidate.text} for item in obj.items.all()]


class BatchCreateInSerializer(serializers.Serializer):
    """``hit_batch_create``'s arguments, as ``create_hit_batch`` and the admin's batch form take them."""

    provider = serializers.ChoiceField(choices=PROVIDER_NAMES)
    per_length = StrictIntegerField(min_value=1, max_value=100_000, default=100)
    lengths = serializers.ListField(
        child=StrictIntegerField(min_value=1, max_value=MAX_BUCKET_LENGTH),
        min_length=1,
        max_length=MAX_BUCKETS,
        required=False,
    )
    assignments = StrictIntegerField(min_value=1, max_value=100, default=3)
    attention_rate = StrictFloatField(min_value=0, max_value=1, default=0.1)
    degraded_rate = StrictFloatField(min_value=0, max_value=1, required=False, allow_null=True, default=None)
    seed = StrictIntegerField(min_value=0, max_value=2**31 - 1, default=0)
    label = StrictCharField(max_length=MAX_LABEL, allow_blank=True, default="", help_text=LABEL_RULE)
    settings = serializers.DictField(
        required=False,
        default=dict,
        help_text="the batch settings (reference: batch settings); per_length, lengths, assignments, "
        "attention_rate, degraded_rate and seed may be given here instead of at the top level",
    )

    # arguments hit_batch_create records in the batch's settings, so a client may give them in either place
    BOTH_PLACES = ("per_length", "lengths", "assignments", "attention_rate", "degraded_rate", "seed")

    def validate(self, attrs):
        """A value given in ``settings`` for a top-level argument is that argument (checked by the same field);
        given in both places with different values, it is refused: never silently overridden."""
        given = self.initial_data if isinstance(self.initial_data, dict) else {}
        settings = dict(attrs.get("settings") or {})
        errors = {}
        for key in self.BOTH_PLACES:
            if settings.get(key) is None:
                continue
            try:
                value = self.fields[key].run_validation(settings[key])
            except serializers.ValidationError as exc:
                errors[key] = [f"settings.{key}: {message}" for message in exc.detail]
                continue
            if key in given and given[key] is not None and attrs.get(key) != value:
                errors[key] = [
                    f"settings.{key} {settings[key]!r} and {key} {given[key]!r} disagree: give one (the top-level "
                    "argument, or the setting)"
                ]
                continue
            attrs[key] = value
            settings.pop(key)
        if errors:
            raise serializers.ValidationError(errors)
        attrs["settings"] = settings
        return attrs

    def validate_label(self, value: str) -> str:
        try:
            return batch_label_check(value)
        except BatchSettingsError as exc:
            raise serializers.ValidationError(str(exc)) from None


class BatchOutSerializer(serializers.ModelSerializer):
    """A batch: its provider, status, settings and how many HITs it has."""

    hits = serializers.SerializerMethodField()

    class Meta:
        model = Batch
        fields = ["id", "campaign", "provider", "label", "status", "settings", "hits", "created_at"]

    def get_hits(self, obj: Batch) -> int:
        return obj.hits.count()


class BatchCreatedOutSerializer(serializers.Serializer):
    """The new draft batch and what publishing it would cost (null for local annotators)."""

    batch = BatchOutSerializer()
    cost_estimate_usd = serializers.CharField(allow_null=True)


class ProviderReportOutSerializer(serializers.Serializer):
    """What the batch's platform did (the ``crowd`` command's JSON report; its keys depend on the platform)."""

    batch = serializers.IntegerField()
    provider = serializers.CharField()
    report = serializers.JSONField()
