"""``score_resource RESOURCE --regressor NAME [--wait] [--batch-size N] [--throttle S] [--device cpu|cuda|auto]
[--dtype T] [--encode-batch N]``"""

import json
import math

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float, cli_int
from generation.models import Resource
from generation.named import named_or_numbered
from jobs.progress import job_progress_display
from scoring.models import Regressor, ScoredResource
from scoring.scoring_device import DEVICE_HELP, DEVICES, DTYPE_HELP, DTYPES, ENCODE_BATCH_HELP
from scoring.scoring_job import DEFAULT_BATCH_SIZE, GPU_BATCH_SIZE, score_resource_launch, scoring_device


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
        parser.add_argument("--regressor", required=True, help="name of a trained regressor (train_regressor)")
        parser.add_argument("--wait", action="store_true")
        parser.add_argument(
            "--batch-size",
            type=cli_int,
            default=None,
            dest="batch_size",
            help=f"pairs per prediction batch (default {DEFAULT_BATCH_SIZE} on the CPU, {GPU_BATCH_SIZE} for cuda "
            "and auto)",
        )
        parser.add_argument(
            "--throttle",
            type=cli_float,
            default=0.0,
            help="seconds to sleep after each batch (demos and fault drills; default 0)",
        )
        parser.add_argument("--device", choices=DEVICES, default=None, help=DEVICE_HELP)
        parser.add_argument("--dtype", choices=DTYPES, default=None, help=DTYPE_HELP)
        parser.add_argument("--encode-batch", type=cli_int, default=None, dest="encode_batch", help=ENCODE_BATCH_HELP)

    def handle(self, *args, resource, regressor, wait, batch_size, throttle, device, dtype, encode_batch, **options):
        found = find_resource(resource)
        model = Regressor.objects.filter(name=regressor).first()
        if model is None:
            raise CommandError(f"no regressor named {regressor!r} (train one with manage.py train_regressor)")
        if (batch_size is not None and batch_size < 1) or not 0 <= throttle < math.inf:  # NaN fails too
            raise CommandError("--batch-size must be >= 1 and --throttle a finite number >= 0")
        try:
            chosen = scoring_device(device, dtype=dtype, encode_batch=encode_batch)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        try:
            with job_progress_display(self.stderr, enabled=wait) as show:
                job = score_resource_launch(
                    resource=found,
                    regressor=model,
                    wait=wait,
                    batch_size=batch_size,
                    throttle_s=throttle,
                    device=chosen,
                    on_progress=show,
                )
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
