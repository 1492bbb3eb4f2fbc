"""Job kind ``train_regressor``: the similarity regressor trained in a worker (or inline with ``--wait``), so
the admin can start it and follow it like every other long step.

One chunk; the training itself is ``scoring.regressor.regressor_train``, unchanged (the synchronous
``manage.py train_regressor`` calls it directly). Job params: ``train`` (:class:`TrainRegressorParams` as
``jobs.params.to_json`` stores it, flat: ``campaign`` (name), ``name``, ``replace``, and the settings,
``RegressorTrainOptions``: ``test_fraction``, ``seed``, ``with_embeddings``, ``min_judgments``, ``target``, and
``recipe``, ``cv_folds`` and ``encoder`` when not the default) and ``previous_trained_at`` (the ``trained_at``
of the regressor of that name when the job started, or null). Progress counts training steps (each feature
batch, then model selection, the held-out test, each fold of the nested cross-validation, the refit); a cancel
stops the chunk at its next step and at the latest just before anything is written.

Write-once: the outputs are the model file ``regressors/<name>.joblib`` and its ``Regressor`` row, keyed
by the regressor's name, and only one unfinished training job per name may exist (a second is refused
when it starts). A chunk that runs again (a redelivered message, a resumed job) finds a row of that name
whose ``trained_at`` differs from ``previous_trained_at``: this job's earlier run wrote it, so the chunk
returns it instead of training twice. A run that died before saving left nothing (the file is written
atomically, the row after it), so the chunk trains again from the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from annotation.models import Campaign
from jobs.execution import ProgressListener, job_launch
from jobs.models import TERMINAL_STATUSES, Job, JobChunk
from jobs.params import from_values, param, to_json
from jobs.registry import JobKind, ProgressFn, register
from scoring.models import Regressor
from scoring.regressor import NAME_MAX_LENGTH, NAME_RULE, RegressorError, RegressorTrainOptions, regressor_train_check
from scoring.regressor.held_out import MIN_INTERVAL_REFERENCES

KIND = "train_regressor"


@dataclass(frozen=True)
class TrainRegressorParams:
    """A training job's ``params["train"]``: the campaign (its name), the regressor's name, ``replace`` and the
    settings, flat as every training job has stored them (a key a job stored before its setting existed is the
    default, as it was then). The campaign and the name are checked against the database where a training
    starts (``regressor_train_check``), not here."""

    campaign: str = field(metadata=param(help="campaign name", cli=False, form=False))
    name: str = field(
        metadata=param(
            help=f"name of the regressor to create (score_resource --regressor NAME): {NAME_RULE}",
            form_options={"max_length": NAME_MAX_LENGTH},
        )
    )
    replace: bool = field(default=False, metadata=param(help="overwrite an existing regressor of that name"))
    options: RegressorTrainOptions = field(default_factory=RegressorTrainOptions, metadata=param(flatten=True))

    def arguments(self) -> dict[str, Any]:
        """The keywords of ``regressor_train``, ``train_start_check`` and ``train_regressor_launch``."""
        return {"campaign": self.campaign, "name": self.name, "options": self.options, "replace": self.replace}


def _training(train: dict[str, Any]) -> dict[str, Any]:
    """``regressor_train``'s (and ``train_start_check``'s) arguments from a job's ``params["train"]``."""
    return from_values(TrainRegressorParams, train).arguments()


SUMMARY_KEYS = (
    "name",
    "spearman_test",
    "n_train",
    "n_test",
    "spearman_test_ci95",
    "estimator",
    "signature",
    # added with the nested grouped CV (null when skipped, --cv-folds 0, or for an older regressor)
    "spearman_cv",
    "spearman_cv_ci95",
    "cv_folds",
    "recipe",
)


def regressor_summary(row: Regressor) -> dict[str, Any]:
    """What ``train_regressor`` prints and the job's result (``SUMMARY_KEYS``): the held-out rho, the nested
    grouped CV rho, each with its interval, and the signature."""
    m = row.metrics
    return {
        "name": row.name,
        "spearman_test": m["spearman_test"],
        "n_train": m["n_train"],
        "n_test": m["n_test"],
        "spearman_test_ci95": m["spearman_test_ci95"],
        "estimator": row.signature["estimator"],
        "signature": row.signature["string"],
        "spearman_cv": m.get("spearman_cv"),
        "spearman_cv_ci95": m.get("spearman_cv_ci95"),
        "cv_folds": m.get("cv_folds"),
        "recipe": row.signature.get("recipe", "base"),
    }


def _rho_text(rho: float | None, interval: list[float] | None, references: int | None = None) -> str:
    if rho is None:
        return "undefined (a constant side)"
    if not interval or (references is not None and references < MIN_INTERVAL_REFERENCES):
        return f"{rho:.3f} (no interval: too few references)"
    return f"{rho:.3f} (95% CI {interval[0]:.3f} to {interval[1]:.3f})"


def regressor_summary_text(summary: dict[str, Any], *, campaign: str | None = None) -> list[str]:
    """``regressor_summary`` (or a training job's result) for a person: rounded figures with their meaning, one
    per line; ``train_regressor --json`` prints the summary itself."""
    on = f" on campaign {campaign!r}" if campaign else ""
    row = Regressor.objects.filter(name=summary["name"]).only("metrics", "signature").first()
    same = row is not None and (row.signature or {}).get("string") == summary.get("signature")
    metrics = (row.metrics or {}) if same else {}  # the references behind each figure, when still known
    lines = [
        f"regressor {summary['name']!r} trained{on} (recipe {summary.get('recipe') or 'base'}, estimator "
        f"{summary['estimator']})",
        f"  held-out references: Spearman's rho "
        f"{_rho_text(summary['spearman_test'], summary['spearman_test_ci95'], metrics.get('n_references_test'))}"
        f"; {summary['n_train']} judged pairs to train, {summary['n_test']} held out",
    ]
    if summary.get("cv_folds"):
        rho = _rho_text(summary.get("spearman_cv"), summary.get("spearman_cv_ci95"), metrics.get("n_references_cv"))
        lines.append(f"  nested {summary['cv_folds']}-fold grouped cross-validation: Spearman's rho {rho}")
    else:
        lines.append("  nested cross-validation: skipped (--cv-folds 0)")
    lines.append(f"  signature: {summary['signature']}")
    return lines


def training_job_running(name: str, *, exclude_job: int | None = None) -> Job | None:
    """The unfinished training job of the regressor ``name``, if any."""
    jobs = Job.objects.filter(kind=KIND, params__train__name=name).exclude(status__in=TERMINAL_STATUSES)
    if exclude_job is not None:
        jobs = jobs.exclude(pk=exclude_job)
    return jobs.order_by("-pk").first()


def _trained_at(name: str) -> float | None:
    row = Regressor.objects.filter(name=name).only("signature").first()
    return None if row is None else (row.signature or {}).get("trained_at")


def _enough_data(campaign: Campaign, *, min_judgments: int, target: str, test_fraction: float, seed: int) -> None:
    """``regressor.training_data_check`` on the campaign's training data at this minimum of judgments per
    worker (before the features: pairs the encoder skips, references over its subword limit, are still in)."""
    from scoring.regressor import (  # numpy: once a campaign was found, not with the app
        training_data,
        training_data_check,
    )

    data = training_data(campaign, min_judgments=min_judgments, target=target)
    training_data_check(
        data.groups, campaign=campaign.name, minimum=min_judgments, test_fraction=test_fraction, seed=seed
    )


def _largest_minimum_that_works(campaign: Campaign, below: int, **check: Any) -> int | None:
    """The largest minimum of judgments per worker under ``below`` with enough data, or None (fewer workers
    count as the minimum rises, so the answer is found by bisection)."""
    low, high, found = 0, below - 1, None
    while low <= high:
        middle = (low + high) // 2
        try:
            _enough_data(campaign, min_judgments=middle, **check)
        except RegressorError:
            high = middle - 1
        else:
            found, low = middle, middle + 1
    return found


def train_start_check(
    *, campaign: str, name: str, options: RegressorTrainOptions | None = None, replace: bool = False
) -> tuple[str, Campaign]:
    """Whether a training with ``options`` (None: the defaults) can succeed, checked before any job is queued:
    what is trained (``regressor_train_check``) and enough counted judgments (``regressor.training_data_check``);
    when there are too few, the message names the minimum of judgments per worker that would give enough, if one
    does. Returns (the cleaned name, the campaign); a RegressorError otherwise. The job's plan and the admin's
    form both call it."""
    options = options or RegressorTrainOptions()
    name, found = regressor_train_check(campaign=campaign, name=name, replace=replace)
    from scoring.regressor import training_data  # numpy: once the names were checked, not with the app

    minimum = found.min_judgments_per_worker if options.min_judgments is None else int(options.min_judgments)
    target = options.target
    check = {"target": target, "test_fraction": options.test_fraction, "seed": options.seed}
    try:
        _enough_data(found, min_judgments=minimum, **check)
    except RegressorError as exc:
        works = _largest_minimum_that_works(found, minimum, **check) if minimum > 0 else None
        if works is None:
            everyone = ""
            if minimum > 0:
                data = training_data(found, min_judgments=0, target=target)
                everyone = (
                    f"; counting every worker (min judgments 0) it has {len(data.groups)} judged candidates of "
                    f"{len(set(data.groups.tolist()))} references"
                )
            raise RegressorError(f"{exc}{everyone}: judge more HITs first") from None
        data = training_data(found, min_judgments=works, target=target)
        raise RegressorError(
            f"{exc}. With a minimum of {works} judgments per worker (--min-judgments {works}) it has "
            f"{len(data.groups)} judged candidates of {len(set(data.groups.tolist()))} references: enough"
        ) from None
    return name, found


def _plan(job: Job) -> list[dict]:
    train = job.params["train"]
    try:
        name, _ = train_start_check(**_training(train))
    except RegressorError as exc:
        raise ValueError(str(exc)) from None
    other = training_job_running(name, exclude_job=job.pk)
    if other is not None:
        raise ValueError(
            f"regressor {name!r} is already being trained in job {other.pk}; wait for it, or resume "
            f"it (manage.py job resume {other.pk}) if it stopped"
        )
    job.params = {**job.params, "train": {**train, "name": name}, "previous_trained_at": _trained_at(name)}
    job.save(update_fields=["params"])
    return [{}]


def _run_chunk(job: Job, chunk: JobChunk, progress: ProgressFn) -> dict:
    train = job.params["train"]
    progress(0, 1)
    row = Regressor.objects.filter(name=train["name"]).first()
    if row is not None and (row.signature or {}).get("trained_at") != job.params.get("previous_trained_at"):
        return regressor_summary(row)  # this job's earlier run saved it: not trained twice
    from scoring.regressor import regressor_train  # numpy, scikit-learn and the encoder: in the worker, when it trains

    return regressor_summary(regressor_train(**_training(train), progress=progress))


def _finish(job: Job, chunks: list[JobChunk]) -> dict:
    return dict(chunks[0].result)


def train_regressor_launch(
    *,
    campaign: str,
    name: str,
    options: RegressorTrainOptions | None = None,
    replace: bool = False,
    wait: bool = False,
    on_progress: ProgressListener | None = None,
) -> Job:
    """Start (and with ``wait`` run or wait for) the training of ``regressor_train(campaign=..., name=...,
    options=..., replace=...)``. Bad settings are a ValueError before any job exists."""
    params = TrainRegressorParams(
        campaign=campaign, name=name, replace=replace, options=options or RegressorTrainOptions()
    )
    train = to_json(params)
    label = f"train {name} on {campaign}"
    return job_launch(kind=KIND, params={"train": train}, label=label, wait=wait, on_progress=on_progress)


register(JobKind(name=KIND, plan=_plan, run_chunk=_run_chunk, finish=_finish, queue="cpu", unit="steps"))
