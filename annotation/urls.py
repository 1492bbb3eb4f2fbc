"""Mounted under ``api/``."""
from django.urls import path

from . import api

urlpatterns = [
    path("hits/<int:hit_id>/assignments/", api.assignment_create, name="hit-assignments"),
    path("batches/<int:batch_id>/hits/", api.batch_hits, name="batch-hits"),
    path("batches/<int:batch_id>/results.csv", api.batch_results, name="batch-results"),
]
