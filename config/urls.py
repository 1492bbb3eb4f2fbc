from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("jobs.urls")),
    path("api/", include("annotation.urls")),
    path("research/", include("generation.urls")),
    path("", include("scoring.urls")),  # api/releases/… and research/campaigns/… (scoring/urls.py)
    path("", include("frontend.urls")),
]
