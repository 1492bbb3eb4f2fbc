"""Mounted under ``api/``."""

from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)

from . import api

urlpatterns = [
    path("hits/<id:hit_id>/assignments/", api.assignment_create, name="hit-assignments"),
    path("batches/<id:batch_id>/hits/", api.batch_hits, name="batch-hits"),
    path("batches/<id:batch_id>/results.csv", api.batch_results, name="batch-results"),
]
