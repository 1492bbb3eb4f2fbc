from django.urls import path

from . import api

urlpatterns = [
    path("jobs/<int:job_id>/", api.job_detail, name="job-detail"),
]
