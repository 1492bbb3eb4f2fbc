"""Trained similarity regressors and exported releases. Both carry a signature (like sacrebleu's) that
records every setting behind their numbers, so a published figure can be traced and reproduced."""

from django.conf import settings
from django.db import models

from jobs.models import Job


class Regressor(models.Model):
    """A similarity regressor (ParaBank §5.1) trained on a campaign's judgments.

    ``key``: the fitted model in storage. ``signature``: features, estimator and its parameters,
    campaign, seed, test fraction, package versions. ``metrics``: held-out Spearman's rho with its
    bootstrap interval, n_train, n_test.
    """

    name = models.CharField(max_length=200, unique=True)
    campaign = models.ForeignKey(
        "annotation.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="regressors"
    )
    key = models.CharField(max_length=500)
    signature = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class ScoredResource(models.Model):
    """A resource's pairs scored by one regressor (the output of a chunked scoring job).

    Scored shards mirror the resource's candidate shards record for record, each candidate gaining a
    ``"score"`` (0-100); ``shards`` lists ``{"index", "key", "n_pairs", "sha256"}``.
    """

    resource = models.ForeignKey("generation.Resource", on_delete=models.CASCADE, related_name="scorings")
    regressor = models.ForeignKey(Regressor, on_delete=models.PROTECT, related_name="scorings")
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="scored_resource")
    shards = models.JSONField(default=list, blank=True)
    n_pairs = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["resource", "regressor"], name="unique_scoring_per_regressor")]

    def __str__(self) -> str:
        return f"{self.resource} scored by {self.regressor}"


class Release(models.Model):
    """An exported, versioned release: files under ``prefix`` in storage (or a local ``out`` folder) and
    a manifest (version, counts, SHA-256 of each file, regressor and its rho, generation settings,
    filters)."""

    resource = models.ForeignKey("generation.Resource", on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=64)
    location = models.CharField(max_length=1000, help_text="folder, or s3://bucket/prefix")
    manifest = models.JSONField(default=dict, blank=True)
    allowed_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="releases", help_text="besides staff, who may download it"
    )
    job = models.ForeignKey(
        Job,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the export job that made it (empty: manage.py export_release)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["resource", "version"], name="unique_release_version")]

    def __str__(self) -> str:
        return f"{self.resource} {self.version}"
