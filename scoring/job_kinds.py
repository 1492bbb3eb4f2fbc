"""The job kinds of scoring/: applying a similarity regressor to every pair of a resource."""
from . import scoring_job  # noqa: F401  (score_resource)
from . import release_job  # noqa: F401  (export_release, started from the admin)
