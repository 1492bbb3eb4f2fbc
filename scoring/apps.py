from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"

    def ready(self) -> None:
        from scoring import job_kinds  # noqa: F401  (registers the scoring job kinds)
