"""Staff-only research pages of generation/ (mounted at /research/)."""
from django.urls import path

from . import views_constraints

urlpatterns: list = [
    path("constraints/", views_constraints.constraint_systems, name="constraint_systems"),
    path("corpora/<int:corpus_id>/constraints/", views_constraints.constraint_systems,
         name="corpus_constraint_systems"),
]
