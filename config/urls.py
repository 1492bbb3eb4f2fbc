from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    # the OpenAPI 3 description (JSON or YAML by Accept) and Swagger UI on it; the UI's script is a file
    # (?script), not inline, so it runs under the pages' Content-Security-Policy (frontend/middleware.py)
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/schema/ui/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="schema-ui"),
    path("api/", include("jobs.urls")),
    path("api/", include("annotation.urls")),
    path("", include("generation.urls")),  # api/corpora/…/generations/ and research/… (generation/urls.py)
    path("", include("scoring.urls")),  # api/releases/… and research/campaigns/… (scoring/urls.py)
    path("", include("frontend.urls")),
]

# Errors outside DRF views: JSON {"detail", "code"} under /api/, Django's pages elsewhere (frontend/errors.py)
handler400 = "frontend.errors.bad_request"
handler403 = "frontend.errors.permission_denied"
handler404 = "frontend.errors.page_not_found"
handler500 = "frontend.errors.server_error"
