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

# Errors outside DRF views: JSON {"detail", "code"} under /api/, Django's pages elsewhere (frontend/errors.py)
handler400 = "frontend.errors.bad_request"
handler403 = "frontend.errors.permission_denied"
handler404 = "frontend.errors.page_not_found"
handler500 = "frontend.errors.server_error"
