import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float, cli_int
from jobs.execution import job_launch, job_progress
from jobs.progress import job_progress_display


class Command(BaseCommand):
    help = "Run a tiny job through the broker and workers (cpu, or gpu with --queue gpu) to check the set-up."

    def add_arguments(self, parser):
        parser.add_argument("--queue", choices=["cpu", "gpu"], default="cpu")
        parser.add_argument("--n", type=cli_int, default=1000)
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--timeout", type=cli_float, default=None)

    def handle(self, *args, queue: str, n: int, wait: bool, timeout: float | None, **options):
        kind = "selftest" if queue == "cpu" else "selftest-gpu"
        with job_progress_display(self.stderr, enabled=wait) as show:
            job = job_launch(
                kind=kind,
                params={"n": n, "chunks": 4},
                label=f"selftest {queue}",
                wait=wait,
                timeout=timeout,
                on_progress=show,
            )
        self.stdout.write(json.dumps(job_progress(job)))
        if wait and job.status != "succeeded":
            raise CommandError(f"job {job.pk} ended {job.status}: {job.error}")
        if wait and job.result.get("sum") != n * (n - 1) // 2:
            raise CommandError(f"job {job.pk} computed a wrong sum: {job.result}")
