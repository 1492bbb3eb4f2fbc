from django.contrib.auth import views as auth_views
from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)
from annotation.web import views as annotation_views

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("hits/<id:hit_id>/", annotation_views.hit_page, name="hit-page"),
    path("prolific/<id:batch_id>/start/", annotation_views.prolific_start, name="prolific-start"),
    path("annotate/next/", annotation_views.annotate_next, name="annotate-next"),
    path("annotate/return/", annotation_views.annotate_return, name="annotate-return"),
    path(
        "annotate/login/",
        auth_views.LoginView.as_view(template_name="annotation/login.html", next_page="annotate-next"),
        name="annotate-login",
    ),
    path("annotate/logout/", auth_views.LogoutView.as_view(next_page="annotate-login"), name="annotate-logout"),
]
