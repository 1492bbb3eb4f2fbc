"""Release listings for the API: what a researcher needs to pick a release and fetch its files."""

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scoring.models import Regressor, Release, ScoredResource
from scoring.releases.columns import MANIFEST_FILE
from scoring.releases.manifest import release_files


class ReleaseRegressorSerializer(serializers.Serializer):
    """The similarity regressor that scored the release, and its held-out Spearman correlation."""

    name = serializers.CharField(allow_null=True)
    spearman_test = serializers.FloatField(allow_null=True)


class ReleaseFileSerializer(serializers.Serializer):
    """A file of the release (manifest.json has no hash or size)."""

    name = serializers.CharField()
    url = serializers.CharField(help_text="Absolute URL of GET /api/releases/{id}/files/{name}.")
    sha256 = serializers.CharField(allow_null=True)
    bytes = serializers.IntegerField(allow_null=True, min_value=0)


class ReleaseSerializer(serializers.ModelSerializer):
    resource = serializers.CharField(source="resource.name")
    counts = serializers.SerializerMethodField()
    regressor = serializers.SerializerMethodField()
    files = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = ["id", "resource", "version", "created_at", "counts", "regressor", "files"]

    @extend_schema_field(
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "references, pairs, judgments, campaigns, ... in the release",
        }
    )
    def get_counts(self, release: Release) -> dict:
        return release.manifest.get("counts", {})

    @extend_schema_field(ReleaseRegressorSerializer)
    def get_regressor(self, release: Release) -> dict:
        r = release.manifest.get("regressor") or {}
        return {"name": r.get("name"), "spearman_test": r.get("spearman_test")}

    @extend_schema_field(ReleaseFileSerializer(many=True))
    def get_files(self, release: Release) -> list[dict]:
        request = self.context.get("request")
        described = release.manifest.get("files") or {}
        out = []
        for name in release_files(release.manifest):
            url = reverse("release-file", args=[release.pk, name])
            out.append(
                {
                    "name": name,
                    "url": request.build_absolute_uri(url) if request else url,
                    "sha256": None if name == MANIFEST_FILE else described[name].get("sha256"),
                    "bytes": None if name == MANIFEST_FILE else described[name].get("bytes"),
                }
            )
        return out


class ReleaseDetailSerializer(ReleaseSerializer):
    """One release: the listing's fields and its whole manifest."""

    manifest = serializers.JSONField(read_only=True, help_text="manifest.json as stored.")

    class Meta(ReleaseSerializer.Meta):
        fields = [*ReleaseSerializer.Meta.fields, "manifest"]


class RegressorSerializer(serializers.ModelSerializer):
    """A regressor in a listing: its id (what ``POST /api/scored-resources/`` takes), its campaign and what its
    held-out part says (``metrics``: Spearman's rho, its interval, n_train, n_test)."""

    metrics = serializers.JSONField(help_text="Held-out Spearman's rho with its bootstrap interval, n_train, n_test.")

    class Meta:
        model = Regressor
        fields = ["id", "name", "campaign", "metrics", "created_at"]


class ScoredResourceSerializer(serializers.ModelSerializer):
    """A scored resource in a listing: its id (what ``POST /api/scored-resources/<id>/releases/`` takes), the
    resource and the regressor that scored it, by id and name."""

    resource_name = serializers.CharField(source="resource.name")
    regressor_name = serializers.CharField(source="regressor.name")

    class Meta:
        model = ScoredResource
        fields = ["id", "resource", "resource_name", "regressor", "regressor_name", "n_pairs", "job", "created_at"]
