from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
    verbose_name = "Generation"

    def ready(self) -> None:
        from . import (
            job_kinds,  # noqa: F401  (registers the generation job kinds)
            worker_start,  # noqa: F401  (a Celery worker loads selection's tables before it forks)
        )
