"""scoring/'s URLs, mounted at the site root: the release API under api/, the dashboard under research/."""

from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)
from scoring import api, jobs_api
from scoring.dashboard import views

urlpatterns = [
    path("api/releases/", api.release_list, name="release-list"),
    path("api/releases/<id:release_id>/", api.release_detail, name="release-detail"),
    path("api/releases/<id:release_id>/files/<str:name>", api.release_file, name="release-file"),
    path("api/regressors/", jobs_api.regressor_train_view, name="regressor-train"),
    path("api/scored-resources/", jobs_api.resource_score, name="resource-score"),
    path("api/scored-resources/<id:scored_resource_id>/releases/", jobs_api.release_export_view, name="release-export"),
    path("research/campaigns/", views.campaign_list, name="campaign_list"),
    path("research/campaigns/<id:campaign_id>/", views.campaign_dashboard, name="campaign_dashboard"),
    path(
        "research/campaigns/<id:campaign_id>/tables/<str:table>.<str:fmt>", views.campaign_table, name="campaign_table"
    ),
    path("research/campaigns/<id:campaign_id>/plots/<str:plot>.png", views.campaign_plot, name="campaign_plot"),
]
