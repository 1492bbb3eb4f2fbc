"""The job kinds of scoring/: training a similarity regressor, applying it to every pair of a resource, releases."""

from scoring.regressor import job as regressor_job  # noqa: F401  (train_regressor)
from scoring.releases import job as release_job  # noqa: F401  (export_release, started from the admin)
from scoring.scored import job as scoring_job  # noqa: F401  (score_resource)
