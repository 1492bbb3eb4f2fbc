"""The generate job's one parameters class (``generation.generation_job.params.GenerateParams``): the JSON a job
stores is the one jobs stored before it (same keys, same values), and a job stored in an older shape still runs
as it did."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from generation.decode_options import DecodeOptions
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key, run_chunk
from generation.generation_job.params import (
    GenerateParams,
    GenerationSettingsError,
    job_decode_options,
)
from generation.generation_job.pipeline import DEVICE_BATCH_RULE
from generation.model_source import model_fingerprint
from generation.models import Resource
from infra.shards import read_jsonl_gz
from jobs.execution import job_run_inline, job_start
from jobs.models import Job, JobStatus
from jobs.params import ParamsError, from_values, to_json

from .test_generation_job import checked_params, corpus  # noqa: F401 - the job tests' corpus (a fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("one_torch_thread")]


def test_stored_params_are_the_keys_jobs_have_always_stored(corpus, tiny_marian_dir):  # noqa: F811
    model = str(tiny_marian_dir)
    table = corpus.idf_tables.get().pk
    assert checked_params(corpus, model=model, systems=["28", 17, 28], beam=3) == {
        "corpus": corpus.pk,
        "model": model,
        "systems": [28, 17],
        "idf_table": table,
        "beam": 3,
        "nbest": 1,
        "stop": "auto",
        "max_length": 128,
        "length_penalty": 1.0,
        "batch_size": None,
        "device": None,
        "dtype": None,
        "seed": 0,
        "ppdb": None,
        "sample_chunk_size": 50,
        "pause_per_batch": 0.0,
    }
    sampled = checked_params(
        corpus, model=model, systems=[28], sample_per_length=2, lengths=[20, 5, 5], name=" mine ", pause_per_batch=-1
    )
    assert {k: sampled[k] for k in ("sample_per_length", "lengths", "name", "pause_per_batch")} == {
        "sample_per_length": 2,
        "lengths": [5, 20],
        "name": "mine",
        "pause_per_batch": 0.0,
    }
    # the command: the same JSON, plus what the plan adds
    call_command("generate", "tiny-gen", "--model", model, "--systems", "17,28", "--beam", "3", "--batch-size", "4")
    job = Job.objects.get()
    assert job.params == {
        "corpus": corpus.pk,
        "model": model,
        "systems": [17, 28],
        "idf_table": table,
        "beam": 3,
        "nbest": 1,
        "stop": "auto",
        "max_length": 128,
        "length_penalty": 1.0,
        "batch_size": 4,
        "device": None,
        "dtype": None,
        "seed": 0,
        "ppdb": None,
        "sample_chunk_size": 50,
        "pause_per_batch": 0.0,
        "name": f"tiny-gen-job{job.pk}",
        "model_sha256": model_fingerprint(model),
        "resource": Resource.objects.get(job=job).pk,
    }
    # the worker's reading of it is the settings it was made from
    settings = from_values(GenerateParams, job.params)
    assert settings.decode == DecodeOptions(beam=3, batch_size=4) and settings.systems == (17, 28)
    assert to_json(settings) == {k: v for k, v in job.params.items() if k not in ("model_sha256", "resource")}


def test_settings_are_checked_when_made_and_refuse_what_a_job_does_not_store():
    with pytest.raises(GenerationSettingsError, match="need a PPDB file"):
        GenerateParams(corpus=1, model="m", systems=[35])
    with pytest.raises(GenerationSettingsError, match="length must be an integer"):
        GenerateParams(corpus=1, model="m", systems=[28], lengths="5,x")
    with pytest.raises(GenerationSettingsError, match="int8 is not a generation job's setting") as raised:
        GenerateParams(corpus=1, model="m", systems=[28], decode=DecodeOptions(int8=True))
    assert isinstance(raised.value, ParamsError) and "--int8" in raised.value.option_message
    plain = GenerateParams(corpus=1, model="m", systems="28, 17")
    assert plain.systems == (28, 17) and plain.lengths is None  # no sample: no buckets stored


def test_a_job_stored_in_an_older_shape_still_runs_as_it_did(corpus, tiny_marian_dir):  # noqa: F811
    """A job planned before ``stop``, ``dtype``, ``batch_size`` and ``prompt_template`` existed: its
    chunks (a first one, then the rest on a resume) decode under Hugging Face's rule ("beam") and the
    device's batch, exactly as a job that asks for those today."""
    old_keys = ("stop", "dtype", "batch_size", "prompt_template")
    params = {  # (what a job stored before those keys: no stop, dtype, batch_size nor prompt_template)
        "corpus": corpus.pk,
        "model": str(tiny_marian_dir),
        "systems": [17, 28],
        "beam": 3,
        "nbest": 1,
        "max_length": 16,
        "length_penalty": 1.0,
        "device": "cpu",
        "seed": 1,
        "ppdb": None,
        "sample_chunk_size": 50,
        "pause_per_batch": 0.0,
    }
    old = job_start(kind=KIND, params=params, enqueue=False)
    for key in old_keys:
        old.params.pop(key, None)
    old.save(update_fields=["params"])
    assert job_decode_options(old.params) == DecodeOptions(beam=3, max_length=16, device="cpu", stop="beam")
    run_chunk(old, old.chunks.get(index=0), lambda done, total: None)  # a first chunk, then the worker died
    old = job_run_inline(job_id=old.pk)
    assert old.status == JobStatus.SUCCEEDED, old.error
    assert Resource.objects.get(job=old).settings["stop"] == "beam"
    assert old.result["decoding"]["batch_rule"] == DEVICE_BATCH_RULE

    today = job_run_inline(
        job_id=job_start(kind=KIND, params={**params, "stop": "beam", "name": "today"}, enqueue=False).pk
    )
    assert today.status == JobStatus.SUCCEEDED, today.error

    def shards(job):
        return [list(read_jsonl_gz(candidate_shard_key(job.pk, c.index))) for c in job.chunks.order_by("index")]

    assert json.dumps(shards(old)) == json.dumps(shards(today))
