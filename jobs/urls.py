from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)

from . import api

urlpatterns = [
    path("jobs/", api.job_list, name="job-list"),
    path("jobs/<id:job_id>/", api.job_detail, name="job-detail"),
]
