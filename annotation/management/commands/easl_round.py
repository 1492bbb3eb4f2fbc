"""Create the next EASL round of a batch; prints JSON.

``python manage.py easl_round BATCH [--seed S] [--force]`` prints
``{"batch": id, "round": r, "hits": n, "hit_ids": [...], "items": n, "judgments": n, "max_variance": x,
"stopped": false}``, or ``{"batch": id, "stopped": true, "reason": "...", ...}`` when the stopping rule
says the batch is done.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.batches.easl_rounds import EaslError, easl_round_create, easl_status
from annotation.models import Batch
from api.numbers import cli_int


class Command(BaseCommand):
    help = "Create the next EASL round (HITs) of an EASL-mode batch, or report that its stopping rule is met."

    def add_arguments(self, parser):
        parser.add_argument("batch", type=cli_int)
        parser.add_argument("--seed", type=cli_int, default=None, help="default: the round number")
        parser.add_argument("--force", action="store_true", help="even if the last round has open HITs")

    def handle(self, *args, batch, seed, force, **options):
        try:
            found = Batch.objects.get(pk=batch)
        except Batch.DoesNotExist as exc:
            raise CommandError(f"no batch {batch}") from exc
        try:
            created = easl_round_create(batch=found, seed=seed, force=force)
        except EaslError as exc:
            raise CommandError(str(exc)) from exc
        if created is None:
            status = easl_status(batch=found)
            result = {
                "batch": found.pk,
                "stopped": True,
                "reason": status["stop_reason"],
                "rounds": status["rounds"],
                "judgments": status["judgments"],
                "max_variance": status["max_variance"],
            }
        else:
            result = {**created, "stopped": False}
        self.stdout.write(json.dumps(result))
