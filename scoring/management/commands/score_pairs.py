"""``score_pairs --regressor NAME --input PAIRS.tsv --output SCORED.tsv [--batch-size N]``; PAIRS.tsv lines are
reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]] (constraints: a JSON object, optional)."""

import json

from django.core.management.base import BaseCommand, CommandError

from scoring.regressor import PairsFileError, RegressorError, pairs_file_score, regressor_load


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
        parser.add_argument("--batch-size", type=int, default=256, dest="batch_size")

    def handle(self, *args, regressor, input_path, output_path, batch_size, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be >= 1")
        try:
            fitted = regressor_load(regressor)
            summary = pairs_file_score(
                regressor=fitted, input_path=input_path, output_path=output_path, batch_size=batch_size
            )
        except (RegressorError, PairsFileError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(summary))
