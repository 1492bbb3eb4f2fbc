"""``train_regressor`` as a job: the same training and output, progress, cancel, resume, write-once."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from infra.storage import get_storage
from jobs.execution import job_cancel, job_launch, job_resume, job_run_inline
from jobs.models import Job, JobChunk, JobStatus
from jobs.params import from_values, to_json
from jobs.registry import get_kind
from scoring.models import Regressor
from scoring.regressor import RegressorError, RegressorTrainOptions, storage_key, train as training
from scoring.regressor.job import KIND, SUMMARY_KEYS, TrainRegressorParams

from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(tmp_path, storage_dir):
    return build_campaign(tmp_path, n_refs=20)


def train(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("train_regressor", *args, "--json", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_wait_trains_as_a_job_with_progress_and_the_synchronous_output_is_unchanged(campaign):
    out, err = train("synthetic", "--name", "sync", "--no-embeddings", "--seed", "3")
    assert not Job.objects.exists()  # the default still trains here, not as a job
    # naming its stages on stderr as they start (issue 37: it was silent for a minute)
    assert "choosing the estimator" in err and "nested cross-validation: fold 5 of 5" in err and "saving" in err
    sync = json.loads(out)
    assert list(sync) == list(SUMMARY_KEYS)  # the keys of before, in the same order, then the added ones
    assert list(SUMMARY_KEYS)[:7] == ["name", "spearman_test", "n_train", "n_test", "spearman_test_ci95"] + [
        "estimator",
        "signature",
    ]
    row = Regressor.objects.get(name="sync")
    assert sync == {
        "name": "sync",
        "spearman_test": row.metrics["spearman_test"],
        "n_train": row.metrics["n_train"],
        "n_test": row.metrics["n_test"],
        "spearman_test_ci95": row.metrics["spearman_test_ci95"],
        "estimator": row.signature["estimator"],
        "signature": row.signature["string"],
        "spearman_cv": row.metrics["spearman_cv"],
        "spearman_cv_ci95": row.metrics["spearman_cv_ci95"],
        "cv_folds": 5,
        "recipe": "base",
    }

    out, err = train("synthetic", "--name", "job", "--no-embeddings", "--seed", "3", "--wait")
    waited = json.loads(out)
    job = Job.objects.get(kind=KIND)
    assert waited == {"job": job.pk, "status": "succeeded", **sync, "name": "job"}  # the same recipe, same figures
    assert job.result == {k: v for k, v in waited.items() if k not in ("job", "status")}
    assert job.params["train"] == {
        "campaign": "synthetic",
        "name": "job",
        "test_fraction": 0.2,
        "seed": 3,
        "with_embeddings": False,
        "replace": False,
        "min_judgments": None,
        "target": "raw",
    }
    assert get_storage().exists(storage_key("job"))
    # progress on stderr, counting training steps: the feature batch, then selection, test, 5 CV folds and refit
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"job {job.pk} train_regressor succeeded: 1/1 chunks, 9/9 steps (100%)")
    chunk = job.chunks.get()
    assert (chunk.done_units, chunk.total_units) == (9, 9)


def test_async_starts_a_job_that_a_worker_runs(campaign):
    out, err = train("synthetic", "--name", "later", "--no-embeddings", "--cv-folds", "0", "--async")
    started = json.loads(out)
    job = Job.objects.get(pk=started["job"])
    assert started == {"job": job.pk, "status": "pending", "name": "later", "campaign": "synthetic"} and err == ""
    assert not Regressor.objects.filter(name="later").exists()
    # the synchronous command will not write that name's files while the job owns them
    with pytest.raises(CommandError, match=f"being trained in job {job.pk}"):
        train("synthetic", "--name", "later", "--no-embeddings")
    with pytest.raises(CommandError, match=f"already being trained in job {job.pk}"):
        train("synthetic", "--name", "later", "--no-embeddings", "--async")
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["n_train"] == Regressor.objects.get(name="later").metrics["n_train"]


@pytest.mark.slow
def test_settings_are_checked_before_any_job_exists(campaign):
    for args, message in (
        (("nope", "--name", "x"), "no campaign named 'nope'"),
        (("synthetic", "--name", " "), "invalid regressor name"),
        (("synthetic", "--name", "x", "--test-fraction", "1.5"), "--test-fraction must be between"),
        (("synthetic", "--name", "x", "--min-judgments", "-1"), "--min-judgments must be >= 0"),
    ):
        for mode in ("--wait", "--async"):
            with pytest.raises(CommandError, match=message):
                train(*args, mode)
    train("synthetic", "--name", "taken", "--no-embeddings", "--cv-folds", "0")
    with pytest.raises(CommandError, match="exists"):
        train("synthetic", "--name", "taken", "--async")
    with pytest.raises(CommandError, match="not allowed with argument"):
        train("synthetic", "--name", "y", "--async", "--wait")
    assert not Job.objects.exists()


def test_a_job_stored_with_the_flat_training_params_of_before_still_runs(campaign):
    """A job queued before the settings travelled as one object: its ``params["train"]`` written out by hand,
    as the command wrote it then (``cv_folds`` because not the default, ``recipe`` left out as base)."""
    stored = {
        "campaign": "synthetic",
        "name": "old",
        "test_fraction": 0.25,
        "seed": 4,
        "with_embeddings": False,
        "replace": False,
        "min_judgments": None,
        "target": "raw",
        "cv_folds": 0,
    }
    params = from_values(TrainRegressorParams, stored)
    assert params.options == RegressorTrainOptions(test_fraction=0.25, seed=4, with_embeddings=False, cv_folds=0)
    assert to_json(params) == stored
    job = job_launch(kind=KIND, params={"train": dict(stored)}, label="train old on synthetic")
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    sig = Regressor.objects.get(name="old").signature
    assert (sig["test_fraction"], sig["seed"], sig["with_embeddings"], sig["recipe"]) == (0.25, 4, False, "base")
    assert sig["cross_validation"] is None and job.result["cv_folds"] is None
    assert job.params["train"] == stored


@pytest.mark.parametrize(
    ("args", "settings"),
    [
        (("--test-fraction", "1.5"), {"test_fraction": 1.5}),
        (("--min-judgments", "-1"), {"min_judgments": -1}),
        (("--cv-folds", "1"), {"cv_folds": 1}),
    ],
)
def test_a_setting_that_cannot_work_is_refused_by_the_options_with_the_commands_message(args, settings):
    with pytest.raises(RegressorError) as refused:
        RegressorTrainOptions(**settings)
    with pytest.raises(RegressorError) as stored:  # a job's params are checked by the same rules
        from_values(RegressorTrainOptions, {"campaign": "synthetic", "name": "x", **settings})
    for mode in ((), ("--async",)):
        with pytest.raises(CommandError) as shown:
            train("synthetic", "--name", "x", "--no-embeddings", *args, *mode)
        assert str(shown.value) == str(refused.value) == str(stored.value)
    assert not Job.objects.exists()


def test_the_options_refuse_an_unknown_target_or_recipe():
    """(the command's argparse choices refuse these first; a job's params or a caller's reach the options)"""
    with pytest.raises(RegressorError, match=r"^--target must be one of raw, zscore, not 'mean'$"):
        RegressorTrainOptions(target="mean")
    with pytest.raises(RegressorError, match=r"^--recipe must be one of base, v2, v3, v4, not 'v9'$"):
        RegressorTrainOptions(recipe="v9")


def test_a_training_on_too_little_data_is_refused_before_any_job_exists(tmp_path, storage_dir):
    build_campaign(tmp_path, name="tiny", n_refs=3)
    with pytest.raises(CommandError, match="has 12 judged candidates .* judge more HITs first"):
        train("tiny", "--name", "x", "--min-judgments", "0", "--wait")
    assert not Regressor.objects.filter(name="x").exists() and not Job.objects.exists()


def test_cancel_stops_the_training_before_anything_is_written(campaign, monkeypatch):
    job = Job.objects.get(pk=json.loads(train("synthetic", "--name", "c", "--no-embeddings", "--async")[0])["job"])
    real = training.select_estimator

    def cancelled_meanwhile(*args, **kwargs):
        job_cancel(job_id=job.pk)  # someone presses "cancel" while the models are being compared
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "select_estimator", cancelled_meanwhile)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.CANCELLED
    assert job.chunks.get().status == JobStatus.CANCELLED
    assert not Regressor.objects.filter(name="c").exists() and not get_storage().exists(storage_key("c"))


def test_a_failed_training_resumes_and_a_rerun_after_saving_trains_nothing(campaign, monkeypatch):
    job = Job.objects.get(
        pk=json.loads(train("synthetic", "--name", "r", "--no-embeddings", "--cv-folds", "0", "--async")[0])["job"]
    )
    real = training.select_estimator
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("worker ran out of memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "select_estimator", flaky)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.FAILED and "chunk 0: MemoryError" in job.error
    assert not Regressor.objects.filter(name="r").exists()
    job_resume(job_id=job.pk)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED and len(calls) == 2
    row = Regressor.objects.get(name="r")
    assert job.result["signature"] == row.signature["string"]

    # the worker died after saving, before its chunk was marked done: the chunk runs again and finds its model
    trained_at = row.signature["trained_at"]
    chunk = job.chunks.get()
    chunk.refresh_from_db()
    again = get_kind(KIND).run_chunk(job, chunk, lambda done, total: None)
    assert again == job.result and len(calls) == 2  # nothing trained twice
    assert Regressor.objects.get(name="r").signature["trained_at"] == trained_at


@pytest.mark.slow
def test_replace_as_a_job_retrains_and_rerun_still_trains_once(campaign):
    train("synthetic", "--name", "x", "--no-embeddings", "--seed", "1", "--cv-folds", "0")
    before = Regressor.objects.get(name="x").signature["trained_at"]
    waited = json.loads(train("synthetic", "--name", "x", "--no-embeddings", "--seed", "2", "--replace", "--wait")[0])
    row = Regressor.objects.get(name="x")
    job = Job.objects.get(pk=waited["job"])
    assert job.params["previous_trained_at"] == before and row.signature["trained_at"] != before
    assert row.signature["seed"] == 2 and waited["signature"] == row.signature["string"]
    assert JobChunk.objects.get(job=job).status == JobStatus.SUCCEEDED
