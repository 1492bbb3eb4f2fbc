"""The job kinds of generation/: corpus import, IDF, constraint selection and decoding."""

from .constraints import (
    constraint_job,  # noqa: F401  (select_constraints)
    idf_job,  # noqa: F401  (build_idf)
)
from .corpus import import_job  # noqa: F401  (import_corpus)
from .generation_job import kind  # noqa: F401  (generate)
