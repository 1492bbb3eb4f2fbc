"""The job kinds of scoring/: training a similarity regressor, applying it to every pair of a resource, releases."""

from . import (
    regressor_job,  # noqa: F401  (train_regressor)
    release_job,  # noqa: F401  (export_release, started from the admin)
    scoring_job,  # noqa: F401  (score_resource)
)
