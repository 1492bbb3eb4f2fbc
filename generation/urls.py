"""Staff-only research pages of generation/ (mounted at /research/)."""

from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)

from . import views_constraints

urlpatterns: list = [
    path("constraints/", views_constraints.constraint_systems, name="constraint_systems"),
    path("corpora/<id:corpus_id>/constraints/", views_constraints.constraint_systems, name="corpus_constraint_systems"),
]
