"""``build_idf CORPUS [--wait] [--name NAME]``: IDF = ln(N/df) over the corpus's English side."""

import json

from django.core.management.base import BaseCommand, CommandError

from generation.constraints.idf_job import BuildIdfParams
from generation.corpus.corpora import corpus_get
from generation.models import CorpusStatus, IdfTable
from jobs.execution import job_launch
from jobs.params import ParamsError, add_arguments, from_values, to_json
from jobs.progress import job_progress_display


class Command(BaseCommand):
    help = (
        "Build the IDF table of a corpus (one Celery task per shard, merged). With --wait, block until "
        "it is done and exit non-zero if it failed (on the embedded default with no worker, run it here)."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus", help="corpus name or id")
        parser.add_argument("--wait", action="store_true")
        add_arguments(parser, BuildIdfParams)

    def handle(self, *args, corpus, wait, **options):
        found = corpus_get(corpus)
        if found is None:
            raise CommandError(f"no corpus named or numbered {corpus!r}")
        if found.status != CorpusStatus.READY:
            raise CommandError(f"corpus {found.name!r} is {found.status}, not ready")
        try:
            params = from_values(BuildIdfParams, options, corpus=found.pk)
        except ParamsError as exc:
            raise CommandError(exc.option_message) from None
        if params.name and IdfTable.objects.filter(name=params.name).exists():
            raise CommandError(f"an IDF table named {params.name!r} already exists")
        with job_progress_display(self.stderr, enabled=wait) as show:
            job = job_launch(
                kind="build_idf", params=to_json(params), label=f"IDF of {found.name}", wait=wait, on_progress=show
            )
        out = {
            "job": job.pk,
            "status": job.status,
            "corpus": found.pk,
            "idf_table": job.result.get("idf_table"),
            "name": job.result.get("name"),
            "documents": job.result.get("documents"),
            "types": job.result.get("types"),
        }
        self.stdout.write(json.dumps(out))
        if wait and job.status != "succeeded":
            raise CommandError(f"IDF job {job.pk} ended {job.status}: {job.error}")
