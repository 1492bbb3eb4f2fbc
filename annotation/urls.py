"""Mounted under ``api/``."""

from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)

from .web import api

urlpatterns = [
    path("hits/<id:hit_id>/assignments/", api.assignment_create, name="hit-assignments"),
    path("batches/<id:batch_id>/hits/", api.batch_hits, name="batch-hits"),
    path("batches/<id:batch_id>/results.csv", api.batch_results, name="batch-results"),
    path("campaigns/", api.campaign_list, name="campaign-list"),
    # a campaign by id or by name (a name may hold any character, "/" URL-encoded or not)
    path("campaigns/<path:campaign>/batches/", api.campaign_batch_create, name="campaign-batch-create"),
    path("batches/<id:batch_id>/publish/", api.batch_publish_view, name="batch-publish"),
    path("batches/<id:batch_id>/sync/", api.batch_sync_view, name="batch-sync"),
    path("batches/<id:batch_id>/approve/", api.batch_approve_view, name="batch-approve"),
    path("batches/<id:batch_id>/expire/", api.batch_expire_view, name="batch-expire"),
]
