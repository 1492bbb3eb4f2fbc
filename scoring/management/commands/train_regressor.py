"""``train_regressor CAMPAIGN --name NAME [--test-fraction 0.2] [--seed S] [--replace] [--no-embeddings]
[--min-judgments N] [--target raw|zscore] [--recipe base|v2|v3|v4] [--cv-folds 5] [--encoder NAME_OR_PATH]
[--wait | --async]``

Without ``--wait`` / ``--async`` it trains here, naming each stage on stderr as it starts, and prints a
readable summary (rounded figures, one per line). ``--async`` starts a ``train_regressor`` job and says so at once;
``--wait`` starts it and blocks until it ends (progress and stage on stderr), then prints the summary, exiting
non-zero if it failed. ``--json`` prints the machine-readable line instead, as before: the result's keys
(``scoring.regressor_job.SUMMARY_KEYS``), with ``job`` and ``status`` for ``--wait``, and
``{"job", "status", "name", "campaign"}`` for ``--async``.

Its imports are light (no numpy, scikit-learn or encoder): ``--help``, argument errors and a wrong campaign or
name answer at once (issue 37); the training's libraries load once the names are checked."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_float, cli_int
from jobs.progress import job_progress_display
from scoring.aggregation import ESTIMATES
from scoring.embeddings import DEFAULT_ENCODER, ENCODER_HELP
from scoring.regressor import (
    CV_FOLDS,
    DEFAULT_RECIPE,
    RECIPES,
    RegressorError,
    RegressorTrainOptions,
    regressor_name_check,
    regressor_train_check,
)
from scoring.regressor_job import (
    SUMMARY_KEYS,
    regressor_summary,
    regressor_summary_text,
    train_regressor_launch,
    training_job_running,
)


class Command(BaseCommand):
    help = (
        "Train the similarity regressor (ParaBank §5.1) on a campaign's judgments, evaluate it on held-out "
        "references (Spearman's rho, bootstrap 95% interval: a held-out split and a nested grouped "
        "cross-validation), refit on all and save it under NAME."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign name")
        parser.add_argument("--name", required=True, help="name of the regressor to create")
        parser.add_argument(
            "--test-fraction",
            type=cli_float,
            default=0.2,
            dest="test_fraction",
            help="share of references held out for the test (default 0.2)",
        )
        parser.add_argument("--seed", type=cli_int, default=0)
        parser.add_argument("--replace", action="store_true", help="overwrite an existing regressor of that name")
        parser.add_argument(
            "--no-embeddings",
            action="store_false",
            dest="with_embeddings",
            help="leave out the sentence-embedding cosine (faster, less accurate)",
        )
        parser.add_argument(
            "--min-judgments",
            type=cli_int,
            default=None,
            dest="min_judgments",
            help="count only workers with at least N judgments (default: the campaign's minimum)",
        )
        parser.add_argument(
            "--target",
            choices=list(ESTIMATES),
            default="raw",
            help="what to predict: raw = mean similarity (ParaBank's, the default) or zscore = the "
            "bias-corrected estimate (worker z-scores mapped back to 0-100)",
        )
        parser.add_argument(
            "--recipe",
            choices=list(RECIPES),
            default=DEFAULT_RECIPE,
            help=f"features and estimators (default {DEFAULT_RECIPE}, the best that passes honest selection, "
            "docs/performance.md): "
            "base (lexical + embedding features) or v2 "
            "(plus the NLL relative to the reference's other candidates, the systems that "
            "produced the text, group-relative and agreement features, a tuned ridge) or v3 "
            "(v2's features; an RBF-kernel SVR and the mean of ridge, boosting and SVR join the "
            "selection) or v4 (v3 plus the features of the encoder's STS-tuned top layers, "
            "scoring.encoder_head; README 'Similarity regressor')",
        )
        parser.add_argument(
            "--cv-folds",
            type=cli_int,
            default=CV_FOLDS,
            dest="cv_folds",
            help=f"outer folds of the nested grouped cross-validation whose rho and interval are printed "
            f"(spearman_cv, spearman_cv_ci95; default {CV_FOLDS}; 0 skips it: faster, no CV figure)",
        )
        parser.add_argument(
            "--encoder",
            default=DEFAULT_ENCODER,
            metavar="NAME_OR_PATH",
            help=f"{ENCODER_HELP} (default {DEFAULT_ENCODER}); stored with the regressor and used whenever it "
            "scores (docs/how-to/train-regressor.md)",
        )
        as_job = parser.add_mutually_exclusive_group()
        as_job.add_argument(
            "--wait",
            action="store_true",
            help="train as a background job (resumable, cancellable, in the admin) and block until "
            "it ends, with progress on stderr (on the embedded default with no worker, here)",
        )
        as_job.add_argument(
            "--async",
            action="store_true",
            dest="run_async",
            help="start the training as a background job and print its id at once",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help="print the result as one JSON line (the keys of SUMMARY_KEYS; with --wait also job and status; "
            "with --async job, status, name and campaign) instead of the readable summary",
        )

    def handle(
        self,
        *args,
        campaign,
        name,
        test_fraction,
        seed,
        replace,
        with_embeddings,
        min_judgments,
        target,
        wait=False,
        run_async=False,
        recipe=DEFAULT_RECIPE,
        cv_folds=CV_FOLDS,
        as_json=False,
        encoder=DEFAULT_ENCODER,
        **options,
    ):
        try:
            name = regressor_name_check(name)
            options = RegressorTrainOptions(
                test_fraction=test_fraction,
                seed=seed,
                with_embeddings=with_embeddings,
                min_judgments=min_judgments,
                target=target,
                recipe=recipe,
                cv_folds=cv_folds,
                encoder=encoder,
            )
        except RegressorError as exc:
            raise CommandError(str(exc)) from None
        train = {"campaign": campaign, "name": name, "options": options, "replace": replace}
        if wait or run_async:
            return self._as_job(train, wait=wait, as_json=as_json)
        running = training_job_running(name)
        if running is not None:  # the job owns that name's files until it ends (scoring.regressor_job)
            raise CommandError(f"regressor {name!r} is being trained in job {running.pk}; wait for it")
        try:
            regressor_train_check(campaign=campaign, name=name, replace=replace)  # before the heavy imports
            from scoring.regressor import regressor_train  # numpy, scikit-learn, the encoder: only to train

            row = regressor_train(**train, progress=StageLines(self.stderr, f"training {name!r} on {campaign!r}"))
        except RegressorError as exc:
            raise CommandError(str(exc)) from None
        summary = regressor_summary(row)
        if as_json:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write("\n".join(regressor_summary_text(summary, campaign=campaign)))

    def _as_job(self, train: dict, *, wait: bool, as_json: bool) -> None:
        try:
            with job_progress_display(self.stderr, enabled=wait) as show:
                job = train_regressor_launch(wait=wait, on_progress=show, **train)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        name = job.params["train"]["name"]
        if not wait:
            if as_json:
                self.stdout.write(
                    json.dumps({"job": job.pk, "status": job.status, "name": name, "campaign": train["campaign"]})
                )
            else:
                self.stdout.write(
                    f"job {job.pk} started ({job.status}): training regressor {name!r} on campaign "
                    f"{train['campaign']!r}; follow it with manage.py job wait {job.pk}, or on the admin's Jobs page"
                )
            return
        result = {**dict.fromkeys(SUMMARY_KEYS), "name": name, **(job.result if job.status == "succeeded" else {})}
        if as_json:
            self.stdout.write(json.dumps({"job": job.pk, "status": job.status, **result}))
        elif job.status == "succeeded":
            self.stdout.write(
                "\n".join([f"job {job.pk} succeeded", *regressor_summary_text(result, campaign=train["campaign"])])
            )
        if job.status != "succeeded":
            raise CommandError(f"training job {job.pk} ended {job.status}: {job.error}")


class StageLines:
    """``regressor_train``'s progress for a person at a terminal or in a log: one line on stderr per stage,
    ``training 'r' on 'c': [3/10 steps, 12s] choosing the estimator ...``; stdout keeps only the result."""

    def __init__(self, stream, prefix: str, clock=time.monotonic) -> None:
        self.stream, self.prefix, self.clock = stream, prefix, clock
        self.started, self.stage = clock(), None

    def __call__(self, done: int, total: int, stage: str | None = None) -> None:
        if stage is None or stage == self.stage:
            return
        self.stage = stage
        elapsed = round(self.clock() - self.started)
        self.stream.write(f"{self.prefix}: [{done}/{total} steps, {elapsed}s] {stage} ...")
