"""``score_pairs --regressor NAME --input PAIRS.tsv --output SCORED.tsv [--batch-size N]``; PAIRS.tsv lines are
reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]] (constraints: a JSON object, optional)."""

import json

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_int
from scoring.models import Regressor
from scoring.regressor import PairsFileError, RegressorError


class Command(BaseCommand):
    help = (
        "Predict the similarity (0-100) of each reference<TAB>paraphrase[<TAB>nll[<TAB>constraints JSON]] line of "
        "PAIRS.tsv; "
        "SCORED.tsv gets each input line plus a TAB and the score, in order (empty score: reference over "
        "100 subword tokens, skipped). Any malformed line aborts before anything is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("--regressor", required=True, help="name of a trained regressor (train_regressor)")
        parser.add_argument("--input", required=True, dest="input_path")
        parser.add_argument("--output", required=True, dest="output_path")
        parser.add_argument("--batch-size", type=cli_int, default=256, dest="batch_size")

    def handle(self, *args, regressor, input_path, output_path, batch_size, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be >= 1")
        if not Regressor.objects.filter(name=regressor).exists():  # said before numpy and the model load
            raise CommandError(f"no regressor named {regressor!r} (train one with manage.py train_regressor)")
        from scoring.regressor import pairs_file_score, regressor_load

        try:
            fitted = regressor_load(regressor)
            summary = pairs_file_score(
                regressor=fitted, input_path=input_path, output_path=output_path, batch_size=batch_size
            )
        except (RegressorError, PairsFileError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(summary))
