import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_int
from jobs.execution import job_cancel, job_progress, job_resume, job_run_inline, job_wait
from jobs.models import Job
from jobs.progress import job_progress_display


class Command(BaseCommand):
    help = "Show, resume, cancel or wait for a background job: job status|resume|cancel|wait JOB_ID"

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "resume", "cancel", "wait", "run-here"])
        parser.add_argument("job_id", type=cli_int)

    def handle(self, *args, action: str, job_id: int, **options):
        if not Job.objects.filter(pk=job_id).exists():
            raise CommandError(f"no job {job_id}")
        with job_progress_display(self.stderr, enabled=action in {"wait", "run-here"}) as show:
            if action == "resume":
                job = job_resume(job_id=job_id)
            elif action == "cancel":
                job = job_cancel(job_id=job_id)
            elif action == "wait":
                job = job_wait(job_id=job_id, on_progress=show)
            elif action == "run-here":
                show(job_id)
                job = job_run_inline(job_id=job_id, on_progress=show)
            else:
                job = Job.objects.get(pk=job_id)
        self.stdout.write(json.dumps(job_progress(job)))
        if action in {"wait", "run-here"} and job.status != "succeeded":
            raise CommandError(f"job {job_id} ended {job.status}: {job.error}")
