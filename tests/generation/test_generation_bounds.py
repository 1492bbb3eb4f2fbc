"""Issue 46 (3): every generation setting is bounded where it is declared, and the command, the admin's form and
the API refuse the same out-of-range value with a message naming the limit; ``lengths`` and ``systems`` take
digits 0-9 only (``int()`` reads "١٥", "１５" and "1_5" as 15)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from generation.decode_options import DecodeOptions, DiverseOptions
from generation.generation_job.budget import beam_peak_bytes, diverse_memory_error, diverse_peak_bytes, model_shape
from generation.generation_job.params import GenerateParams, GenerationSettingsError, checked_folder
from generation.generation_job.pause import pause_between_batches
from generation.models import Corpus
from generation.web.forms import GenerateForm
from jobs.execution import JobCancelled
from jobs.models import Job
from jobs.params import from_values

from .test_generate_admin_api import DEMO_MODEL, browser_form, corpus, post_json, staff  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

TOO_BIG = [
    ({"diverse": True, "negative_sets": 1_000_000_000}, "negative_sets", "50"),
    ({"diverse": True, "samples": 100_000}, "samples", "500"),
    ({"systems": "28", "pause_per_batch": 1e9}, "pause_per_batch", "60"),
    ({"systems": "28", "beam": 101, "nbest": 1}, "beam", "100"),
    ({"systems": "28", "max_length": 100_000}, "max_length", "1024"),
    ({"systems": "28", "batch_size": 10**6}, "batch_size", "4096"),
    ({"systems": "28", "sample_per_length": 10**7}, "sample_per_length", "100000"),
    ({"systems": "28", "seed": 2**40}, "seed", "4294967295"),
]


def generate_cli(corpus, *args) -> None:  # noqa: F811
    """``manage.py generate CORPUS --model <demo model> ARGS``."""
    call_command("generate", corpus.name, "--model", str(DEMO_MODEL), *args, stdout=open(os.devnull, "w"))


@pytest.mark.parametrize(("changes", "field", "limit"), TOO_BIG)
def test_api_refuses_a_setting_above_its_bound_naming_the_limit(corpus, client, changes, field, limit):  # noqa: F811
    staff(client)
    answer = post_json(client, corpus.pk, {"model": "model", **changes})
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["code"] == "invalid" and list(body["errors"]) == [field], body
    assert limit in body["errors"][field][0], body
    assert not Job.objects.exists()


def test_the_command_and_the_admin_refuse_the_same_values(corpus):  # noqa: F811
    with pytest.raises(CommandError, match=r"negative.sets must be between 1 and 50"):
        generate_cli(corpus, "--diverse", "--negative-sets", "1000000000")
    with pytest.raises(CommandError, match=r"pause.per.batch must be between 0 and 60"):
        generate_cli(corpus, "--systems", "28", "--pause-per-batch", "1e9")
    form = GenerateForm(browser_form(corpus, model="model", diverse="on", negative_sets=10**9), corpus=corpus)
    assert not form.is_valid() and "50" in str(form.errors["negative_sets"])
    assert not Job.objects.exists()


@pytest.mark.parametrize("typed", ["١٥", "１５", "1_5", "²"])
def test_lengths_and_systems_take_ascii_digits_only(corpus, client, typed):  # noqa: F811
    staff(client)
    for body, field in (
        ({"systems": "28", "sample_per_length": 1, "lengths": f"5,{typed}"}, "lengths"),
        ({"systems": f"28,{typed}"}, "systems"),
    ):
        answer = post_json(client, corpus.pk, {"model": "model", **body})
        assert answer.status_code == 400 and field in answer.json()["errors"], answer.content
        assert "0-9" in answer.json()["errors"][field][0]
    assert not Job.objects.exists()


def test_a_stored_job_within_the_bounds_reads_as_before():
    stored = {
        "corpus": 1,
        "model": "m",
        "systems": [17, 28],
        "beam": 5,
        "nbest": 1,
        "max_length": 128,
        "pause_per_batch": 0.5,
        "seed": 3,
        "sample_chunk_size": 50,
    }
    params = from_values(GenerateParams, stored)
    assert params.systems == (17, 28) and params.pause_per_batch == 0.5 and params.decode.beam == 5
    with pytest.raises(GenerationSettingsError, match="lengths? must"):
        from_values(GenerateParams, {**stored, "sample_per_length": 1, "lengths": [5, 5000]})


def test_a_diverse_jobs_memory_estimate_counts_the_inputs_the_cpu_decodes_together():
    """An unset batch size is the CPU's rule (``DiverseOptions.inputs_per_batch``): the quick start's 3 x 8 rows
    decode ten inputs together, and the estimate and its message count all ten."""
    model = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"
    small, one = DiverseOptions(negative_sets=3, samples=8), DiverseOptions(negative_sets=3, samples=8, batch_size=1)
    weights = model_shape(model)[0]
    assert diverse_peak_bytes(small, model) - weights == 10 * (diverse_peak_bytes(one, model) - weights)
    message = diverse_memory_error(small, model, None, 1e-6)
    assert message and "(24 rows per input), batch size 10 and max length" in message


def test_a_diverse_job_over_the_memory_budget_is_refused_before_it_is_queued(corpus, client, settings):  # noqa: F811
    staff(client)
    # each number within its bound, their product (25,000 rows an input) is not: ~37 GiB on the demo model
    answer = post_json(client, corpus.pk, {"model": "model", "diverse": True, "negative_sets": 50, "samples": 500})
    assert answer.status_code == 400, answer.content
    message = answer.json()["errors"]["__all__"][0]
    assert "25000 rows per input" in message and "PARAFORGE_JOB_MEMORY_GIB" in message and "8 GiB" in message
    assert not Job.objects.exists()

    body = {"model": "model", "diverse": True, "sample_per_length": 1}  # ParaBank 2's 5 x 30: ~0.25 GiB
    settings.PARAFORGE_JOB_MEMORY_GIB = 0.1
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 400 and "0.1 GiB" in answer.json()["errors"]["__all__"][0], answer.content
    settings.PARAFORGE_JOB_MEMORY_GIB = 8.0
    assert post_json(client, corpus.pk, body).status_code == 202


def test_a_beam_search_job_over_the_memory_budget_is_refused_before_it_is_queued(corpus, client, settings):  # noqa: F811
    staff(client)
    # beam 100, 4,096 sentences a batch, 1,024 tokens: each within its bound, together ~7,300 GiB on the demo model
    hostile = {"model": "model", "systems": "28", "beam": 100, "nbest": 1, "batch_size": 4096, "max_length": 1024}
    answer = post_json(client, corpus.pk, hostile)
    assert answer.status_code == 400, answer.content
    body = answer.json()
    message = body["errors"]["__all__"][0]
    assert body["code"] == "invalid" and "PARAFORGE_JOB_MEMORY_GIB" in message and "8 GiB" in message, body
    assert "a beam of 100, batch size 4096 and max length 1024" in message and "lower --batch-size" in message
    with pytest.raises(CommandError, match="PARAFORGE_JOB_MEMORY_GIB"):
        generate_cli(corpus, "--systems", "28", "--beam", "100", "--batch-size", "4096", "--max-length", "1024")
    assert not Job.objects.exists()

    settings.PARAFORGE_JOB_MEMORY_GIB = 0.2  # the demo model's beam 5 at the CPU's batch of 32: ~0.4 GiB
    assert post_json(client, corpus.pk, {"model": "model", "systems": "28"}).status_code == 400
    assert post_json(client, corpus.pk, {"model": "model", "systems": "28", "batch_size": 8}).status_code == 202


def test_a_backward_model_that_is_the_model_is_counted_once(tmp_path):
    """It is loaded once (read the other way), so it must not double the weights a job is refused for."""
    model = checked_folder(str(DEMO_MODEL))
    alone = beam_peak_bytes(DecodeOptions(), model)
    assert beam_peak_bytes(DecodeOptions(), model, model) == alone
    other = tmp_path / "copy"
    shutil.copytree(model, other)
    assert beam_peak_bytes(DecodeOptions(), model, other) == alone + model_shape(model)[0]


def test_a_diverse_job_over_the_time_budget_is_refused_before_it_is_queued(corpus, client, settings):  # noqa: F811
    staff(client)
    body = {"model": "model", "diverse": True, "sample_per_length": 1}  # ParaBank 2's 5 x 30, within memory
    Corpus.objects.filter(pk=corpus.pk).update(n_references=50_000_000)  # a web-scale corpus on two CPU cores
    answer = post_json(client, corpus.pk, body)
    assert answer.status_code == 400, answer.content
    message = answer.json()["errors"]["__all__"][0]
    assert "50000000 references" in message and "PARAFORGE_DIVERSE_HOURS" in message and "168 hours" in message
    assert not Job.objects.exists()
    settings.PARAFORGE_DIVERSE_FLOPS = 1e15  # a worker that says it is that much faster takes it
    assert post_json(client, corpus.pk, body).status_code == 202


def test_a_cancel_ends_the_pause_between_batches_within_a_step():
    calls = []

    def progress(done: int, total: int) -> None:  # as the job's recorder does once the job is cancelled
        calls.append((done, total))
        raise JobCancelled("job 1 was cancelled")

    with pytest.raises(JobCancelled):
        pause_between_batches(60.0, progress, 3, 10)  # the bound's longest pause: ended after its first step
    assert calls == [(3, 10)]
    pause_between_batches(0.0, progress, 3, 10)  # no pause: no sleep, no extra report
    assert calls == [(3, 10)]
