"""Who may do what with scoring, in one place: the admin, the API, the result pages and the dashboard check the
same tuples (each a staff member's Django permissions, all needed)."""

TRAIN_PERMS = ("scoring.add_regressor", "jobs.view_job")  # train a regressor, and follow its job
SCORE_PERMS = ("scoring.add_scoredresource", "jobs.view_job")  # score a resource with one
EXPORT_PERMS = ("scoring.add_release", "jobs.view_job")  # export a release of a scored resource
RESEARCH_PERMS = ("annotation.view_campaign", "annotation.view_judgment")  # the dashboard: campaigns' judgments
