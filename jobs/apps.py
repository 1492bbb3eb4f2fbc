from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from . import (
            job_kinds,  # noqa: F401  (registers the selftest kind)
            tasks,  # noqa: F401  (registers the chunk tasks that ``execution`` sends by name)
            worker_signals,  # noqa: F401  (a worker's heartbeat starts when it is ready)
        )
