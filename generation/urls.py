"""generation/'s URLs, mounted at the site root: the generate API under api/, the staff-only research pages under
research/."""

from django.urls import path

import config.converters  # noqa: F401  (registers <id:...>: a 64-bit id, else 404)

from .web import api, views_constraints

urlpatterns: list = [
    path("api/corpora/", api.corpus_list, name="corpus-list"),
    path("api/corpora/<id:corpus_id>/generations/", api.corpus_generate, name="corpus-generate"),
    path("research/constraints/", views_constraints.constraint_systems, name="constraint_systems"),
    path(
        "research/corpora/<id:corpus_id>/constraints/",
        views_constraints.constraint_systems,
        name="corpus_constraint_systems",
    ),
]
