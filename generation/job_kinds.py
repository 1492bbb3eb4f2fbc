"""The job kinds of generation/: corpus import, IDF, constraint selection and decoding."""
from . import import_job  # noqa: F401,E402  (import_corpus)
from . import idf_job  # noqa: F401,E402  (build_idf)
from . import constraint_job  # noqa: E402,F401  (select_constraints)
from . import generation_job  # noqa: E402,F401  (generate)
