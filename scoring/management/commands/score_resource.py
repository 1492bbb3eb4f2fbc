"""``score_resource RESOURCE --regressor NAME [--wait] [--batch-size N] [--throttle S] [--device cpu|cuda|auto]
[--dtype T] [--encode-batch N]``

The settings' options are the job's parameters' (``scoring.scored.params.ScoreResourceParams``,
``jobs.params.add_arguments``), with ``--throttle`` for ``throttle_s``; a setting that cannot work is refused
before any job exists, named as the option."""

import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float
from generation.models import Resource
from generation.named import named_or_numbered
from jobs import params
from jobs.progress import job_progress_display
from scoring.models import Regressor, ScoredResource
from scoring.scored.job import score_resource_launch, scoring_device
from scoring.scored.params import THROTTLE_HELP, ScoreResourceParams


def find_resource(name_or_id: str) -> Resource:
    found = named_or_numbered(Resource, name_or_id)
    if found is None:
        raise CommandError(f"no resource named or numbered {name_or_id!r}")
    return found


class Command(BaseCommand):
    help = (
        "Predict the human similarity of every pair of a resource with a trained regressor (one Celery "
        "task per candidate shard, resumable). With --wait, block until it is done and exit non-zero if "
        "it failed (on the embedded default with no worker, run it here)."
    )

    def add_arguments(self, parser):
        parser.add_argument("resource", help="resource name or id")
        params.add_arguments(parser, ScoreResourceParams)  # --regressor, --batch-size and the device's options
        parser.add_argument(  # (the one setting whose option is not its name, throttle_s)
            "--throttle",
            type=cli_float,
            default=0.0,
            help=THROTTLE_HELP,
        )
        parser.add_argument("--wait", action="store_true")

    def handle(self, *args, resource: str, regressor: str, wait: bool, throttle: float, **options):
        found = find_resource(resource)
        model = Regressor.objects.filter(name=regressor).first()
        if model is None:
            raise CommandError(f"no regressor named {regressor!r} (train one with manage.py train_regressor)")
        try:  # (the settings are checked, ScoreResourceParams, before any job exists)
            chosen = scoring_device(options)  # --device, else the installation's
            with job_progress_display(self.stderr, enabled=wait) as show:
                job = score_resource_launch(
                    resource=found,
                    regressor=model,
                    wait=wait,
                    batch_size=options["batch_size"],
                    throttle_s=throttle,
                    device=chosen,
                    on_progress=show,
                )
        except params.ParamsError as exc:  # (named as this command's options)
            raise CommandError(exc.option_message) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        scored = ScoredResource.objects.filter(resource=found, regressor=model).first()
        out = {
            "job": job.pk,
            "status": job.status,
            "resource": found.name,
            "regressor": model.name,
            "scored_resource": scored.pk if scored else None,
            "n_pairs": job.result.get("n_pairs"),
            "n_skipped": job.result.get("n_skipped"),
        }
        self.stdout.write(json.dumps(out))
        if wait and job.status != "succeeded":
            raise CommandError(f"scoring job {job.pk} ended {job.status}: {job.error}")
