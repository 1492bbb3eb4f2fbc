"""``train_regressor CAMPAIGN --name NAME [--test-fraction 0.2] [--seed S] [--replace] [--no-embeddings]
[--min-judgments N] [--target raw|zscore] [--recipe base|v2|v3|v4] [--cv-folds 5] [--encoder NAME_OR_PATH]
[--wait | --async]``

Without ``--wait`` / ``--async`` it trains here, naming each stage on stderr as it starts, and prints a
readable summary (rounded figures, one per line). ``--async`` starts a ``train_regressor`` job and says so at once;
``--wait`` starts it and blocks until it ends (progress and stage on stderr), then prints the summary, exiting
non-zero if it failed. ``--json`` prints the machine-readable line instead, as before: the result's keys
(``scoring.regressor.job.SUMMARY_KEYS``), with ``job`` and ``status`` for ``--wait``, and
``{"job", "status", "name", "campaign"}`` for ``--async``.

The settings' options are the job's parameters' (``TrainRegressorParams``, ``jobs.params.add_arguments``), with
``--no-embeddings`` for ``with_embeddings``. Its imports are light (no numpy, scikit-learn or encoder): ``--help``,
argument errors and a wrong campaign or name answer at once (issue 37); the training's libraries load once the
names are checked."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from jobs import params
from jobs.progress import job_progress_display
from scoring.regressor import RegressorError, regressor_name_check, regressor_train_check
from scoring.regressor.job import (
    SUMMARY_KEYS,
    TrainRegressorParams,
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
        params.add_arguments(parser, TrainRegressorParams)  # --name, --replace and the settings
        parser.add_argument(  # (the one setting whose flag is not its name: the default is on)
            "--no-embeddings",
            action="store_false",
            default=None,
            dest="with_embeddings",
            help="leave out the sentence-embedding cosine (faster, less accurate)",
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

    def handle(self, *args, wait: bool = False, run_async: bool = False, as_json: bool = False, **options):
        try:
            name = regressor_name_check(options["name"])
            train = params.from_values(TrainRegressorParams, options, name=name)
        except RegressorError as exc:
            raise CommandError(str(exc)) from None
        if wait or run_async:
            return self._as_job(train, wait=wait, as_json=as_json)
        running = training_job_running(name)
        if running is not None:  # the job owns that name's files until it ends (scoring.regressor.job)
            raise CommandError(f"regressor {name!r} is being trained in job {running.pk}; wait for it")
        try:  # before the heavy imports
            regressor_train_check(campaign=train.campaign, name=name, replace=train.replace)
            from scoring.regressor import regressor_train  # numpy, scikit-learn, the encoder: only to train

            progress = StageLines(self.stderr, f"training {name!r} on {train.campaign!r}")
            row = regressor_train(**train.arguments(), progress=progress)
        except RegressorError as exc:
            raise CommandError(str(exc)) from None
        summary = regressor_summary(row)
        if as_json:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write("\n".join(regressor_summary_text(summary, campaign=train.campaign)))

    def _as_job(self, train: TrainRegressorParams, *, wait: bool, as_json: bool) -> None:
        try:
            with job_progress_display(self.stderr, enabled=wait) as show:
                job = train_regressor_launch(wait=wait, on_progress=show, **train.arguments())
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        name, campaign = job.params["train"]["name"], train.campaign
        if not wait:
            if as_json:
                self.stdout.write(json.dumps({"job": job.pk, "status": job.status, "name": name, "campaign": campaign}))
            else:
                self.stdout.write(
                    f"job {job.pk} started ({job.status}): training regressor {name!r} on campaign "
                    f"{campaign!r}; follow it with manage.py job wait {job.pk}, or on the admin's Jobs page"
                )
            return
        result = {**dict.fromkeys(SUMMARY_KEYS), "name": name, **(job.result if job.status == "succeeded" else {})}
        if as_json:
            self.stdout.write(json.dumps({"job": job.pk, "status": job.status, **result}))
        elif job.status == "succeeded":
            self.stdout.write(
                "\n".join([f"job {job.pk} succeeded", *regressor_summary_text(result, campaign=campaign)])
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
