"""Release listings for the API: what a researcher needs to pick a release and fetch its files."""
from django.urls import reverse
from rest_framework import serializers

from .models import Release
from .releases import MANIFEST_FILE, release_files


class ReleaseSerializer(serializers.ModelSerializer):
    resource = serializers.CharField(source="resource.name")
    counts = serializers.SerializerMethodField()
    regressor = serializers.SerializerMethodField()
    files = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = ["id", "resource", "version", "created_at", "counts", "regressor", "files"]

    def get_counts(self, release: Release) -> dict:
        return release.manifest.get("counts", {})

    def get_regressor(self, release: Release) -> dict:
        r = release.manifest.get("regressor") or {}
        return {"name": r.get("name"), "spearman_test": r.get("spearman_test")}

    def get_files(self, release: Release) -> list[dict]:
        request = self.context.get("request")
        described = release.manifest.get("files") or {}
        out = []
        for name in release_files(release.manifest):
            url = reverse("release-file", args=[release.pk, name])
            out.append({"name": name, "url": request.build_absolute_uri(url) if request else url,
                        "sha256": None if name == MANIFEST_FILE else described[name].get("sha256"),
                        "bytes": None if name == MANIFEST_FILE else described[name].get("bytes")})
        return out
