"""``train_regressor CAMPAIGN --name NAME [--test-fraction 0.2] [--seed S] [--replace] [--no-embeddings]
[--min-judgments N] [--target raw|zscore]``"""
import json

from django.core.management.base import BaseCommand, CommandError

from scoring.aggregation import ESTIMATES
from scoring.regressor import RegressorError, regressor_train


class Command(BaseCommand):
    help = ("Train the similarity regressor (ParaBank §5.1) on a campaign's judgments, evaluate it on held-out "
            "references (Spearman's rho, bootstrap 95% interval), refit on all and save it under NAME.")

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign name")
        parser.add_argument("--name", required=True, help="name of the regressor to create")
        parser.add_argument("--test-fraction", type=float, default=0.2, dest="test_fraction",
                            help="share of references held out for the test (default 0.2)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--replace", action="store_true", help="overwrite an existing regressor of that name")
        parser.add_argument("--no-embeddings", action="store_false", dest="with_embeddings",
                            help="leave out the sentence-embedding cosine (faster, less accurate)")
        parser.add_argument("--min-judgments", type=int, default=None, dest="min_judgments",
                            help="count only workers with at least N judgments (default: the campaign's minimum)")
        parser.add_argument("--target", choices=list(ESTIMATES), default="raw",
                            help="what to predict: raw = mean similarity (ParaBank's, the default) or zscore = the "
                                 "bias-corrected estimate (worker z-scores mapped back to 0-100)")

    def handle(self, *args, campaign, name, test_fraction, seed, replace, with_embeddings, min_judgments, target,
               **options):
        try:
            row = regressor_train(campaign=campaign, name=name, test_fraction=test_fraction, seed=seed,
                                  with_embeddings=with_embeddings, replace=replace, min_judgments=min_judgments,
                                  target=target)
        except RegressorError as exc:
            raise CommandError(str(exc)) from None
        m = row.metrics
        self.stdout.write(json.dumps({
            "name": row.name, "spearman_test": m["spearman_test"], "n_train": m["n_train"], "n_test": m["n_test"],
            "spearman_test_ci95": m["spearman_test_ci95"], "estimator": row.signature["estimator"],
            "signature": row.signature["string"]}))
