"""Scoring on a GPU worker (issue 31): the device a scoring job asks for travels with it to its queue, the
encoder's reduced precision stays within the stated tolerance of float32, and the CPU path is unchanged.

No GPU here: the tolerance is measured on torch's CPU float16, through the very code path a GPU worker runs
(``embeddings.encoding_on`` a placement in float16, pooling and cosines in float32); a CUDA worker is
simulated by the placement it would get. docs/performance.md (Scoring on a GPU) states the tolerance."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from scipy.stats import spearmanr

from jobs.execution import chunk_queue
from jobs.models import Job, JobStatus
from jobs.params import from_values, to_json
from scoring.forms import ScoreResourceForm
from scoring.models import Regressor, ScoredResource
from scoring.regressor import FittedRegressor, candidate_estimators
from scoring.scored.device import ScoringDevice, ScoringDeviceError
from scoring.scored.job import score_resource_launch
from scoring.similarity.embeddings import CPU_FLOAT32, EncoderPlacement, current_placement, embed, encoder, encoding_on
from scoring.similarity.features import EMBEDDING_FEATURES, LEXICAL_FEATURES, pair_features

from .resource_data import PARAPHRASES, REFERENCES, build_resource
from .test_scoring_job import tiny_regressor

# The stated tolerance of float16 against float32 (docs/performance.md, "Scoring on a GPU"): every embedding
# feature (and those built on them) and every embedding component within FEATURE_TOLERANCE; scores of a smooth
# estimator within SCORE_TOLERANCE points of 0-100; the ranking of any estimator's scores nearly the same.
FEATURE_TOLERANCE = 2e-3  # measured: 5.3e-4 (features), 3.0e-4 (embedding components), 1,500 STS-B dev pairs
SCORE_TOLERANCE = 0.25  # measured: 0.04 points (ridge, SVR)
MIN_SPEARMAN = 0.999  # measured: >= 0.9997 (every candidate estimator, trees included)
HALF = EncoderPlacement(device="cpu", dtype="float16")


def real_pairs() -> list[dict]:
    """Each reference with its paraphrases (close) and with the next reference's (unrelated): 34 pairs."""
    pairs = []
    for i, (ref, paras) in enumerate(zip(REFERENCES, PARAPHRASES)):
        others = PARAPHRASES[(i + 1) % len(PARAPHRASES)]
        for text in [*paras, others[0], REFERENCES[(i + 3) % len(REFERENCES)]]:
            pairs.append({"reference": ref, "paraphrase": text, "nll": 1.0 + 0.1 * len(pairs)})
    return pairs


FAMILIES = ("nll2", "group", "agree", "sts")  # every family built on the encoder (sts: the tuned head's layers)


@pytest.fixture(scope="module")
def features():
    """The features of the real pairs in float32 (the default placement) and in float16."""
    pairs = real_pairs()
    reference = pair_features(pairs, with_embeddings=True, families=FAMILIES)
    with encoding_on(HALF):
        half = pair_features(pairs, with_embeddings=True, families=FAMILIES)
    return pairs, reference, half


def test_float16_features_are_within_the_stated_tolerance_and_lexical_ones_are_untouched(features):
    _, reference, half = features
    assert half.names == reference.names and half.keep.all()
    n_lexical = len(LEXICAL_FEATURES)
    assert np.array_equal(half.matrix[:, :n_lexical], reference.matrix[:, :n_lexical])
    differences = np.abs(half.matrix - reference.matrix).max(axis=0)
    moved = {name: float(d) for name, d in zip(reference.names, differences) if d > 0}
    assert set(EMBEDDING_FEATURES) <= set(moved)  # the float16 pass did run in float16
    assert max(moved.values()) <= FEATURE_TOLERANCE, moved
    texts = [*REFERENCES, *(p for paras in PARAPHRASES for p in paras)]
    assert np.abs(embed(texts, placement=HALF) - embed(texts)).max() <= FEATURE_TOLERANCE


def test_regressor_scores_from_float16_features_rank_as_float32s(features):
    pairs, reference, _ = features
    X = reference.matrix
    target = np.clip(
        60 * X[:, reference.names.index("cosine")] + 40 * X[:, reference.names.index("bleu")] / 100, 0, 100
    )
    for name in ("ridge", "gradient_boosting"):
        estimator = candidate_estimators(len(pairs), 0)[name].fit(X, target)
        fitted = FittedRegressor(
            name=f"gpu-{name}",
            signature={},
            metrics={},
            estimator=estimator,
            features=reference.names,
            with_embeddings=True,
            families=FAMILIES,
        )
        scores = fitted.predict(pairs)
        with encoding_on(HALF):  # the job's path: a regressor's predict under the chunk's placement
            half_scores = fitted.predict(pairs)
        assert spearmanr(scores, half_scores)[0] > MIN_SPEARMAN, name
        if name == "ridge":
            assert np.abs(scores - half_scores).max() <= SCORE_TOLERANCE


def test_the_cpu_float32_path_is_the_default_and_one_copy_of_the_encoder():
    assert current_placement() == CPU_FLOAT32 and CPU_FLOAT32.is_reference
    assert encoder() is encoder("cpu", "float32")
    with encoding_on(HALF):
        assert current_placement() == HALF
        assert encoder(HALF.device, HALF.dtype) is not encoder()
    assert current_placement() == CPU_FLOAT32
    assert np.array_equal(embed(REFERENCES), embed(REFERENCES, placement=CPU_FLOAT32))


def test_a_device_choice_is_checked_and_a_worker_turns_it_into_a_placement(caplog):
    assert ScoringDevice().queue == "cpu" and from_values(ScoringDevice, {}) == ScoringDevice()
    cuda = ScoringDevice(device="cuda")
    assert cuda.queue == "gpu" and from_values(ScoringDevice, to_json(cuda)) == cuda
    assert cuda.placement(cuda_available=True) == EncoderPlacement(device="cuda", dtype="float16", batch_size=1024)
    assert ScoringDevice(device="cuda", dtype="bfloat16", encode_batch=64).placement(
        cuda_available=True
    ) == EncoderPlacement(device="cuda", dtype="bfloat16", batch_size=64)
    assert ScoringDevice().placement(cuda_available=True) == CPU_FLOAT32  # asked for the CPU: the CPU
    with pytest.raises(ScoringDeviceError, match="this worker has no CUDA device"):
        cuda.placement(cuda_available=False)
    with caplog.at_level(logging.WARNING, logger="scoring.scored.device"):
        assert ScoringDevice(device="auto").placement(cuda_available=False) == CPU_FLOAT32
    assert "no CUDA device; encoding on the CPU in float32" in caplog.text
    for bad, message in (
        (dict(device="gpu"), "device must be one of cpu, cuda, auto"),
        (dict(device="cpu", dtype="float16"), "float16 needs a GPU"),
        (dict(device="cuda", dtype="int8"), "dtype must be one of"),
        (dict(device="cuda", encode_batch=0), "encode_batch must be a whole number"),
        (dict(device="cpu", encode_batch=512), "encode_batch applies on a GPU only"),
    ):
        with pytest.raises(ScoringDeviceError, match=message):
            ScoringDevice(**bad)


def score(*args: str) -> dict:
    out = io.StringIO()
    call_command("score_resource", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_a_scoring_asked_for_cuda_sends_its_chunks_to_the_gpu_queue(
    storage_dir, tmp_path, settings, sent, django_capture_on_commit_callbacks
):
    tiny_regressor(tmp_path)
    resource = build_resource()
    with django_capture_on_commit_callbacks(execute=True):
        gpu = Job.objects.get(pk=score("res", "--regressor", "tiny", "--device", "cuda")["job"])
    assert gpu.params["device"] == "cuda" and gpu.params["batch_size"] == 2048 and chunk_queue(gpu) == "gpu"
    chunk_ids = sorted(gpu.chunks.values_list("pk", flat=True))
    assert sorted(sent) == [("jobs.tasks.run_chunk_gpu", pk) for pk in chunk_ids] and len(chunk_ids) == 3
    Job.objects.filter(pk=gpu.pk).update(status=JobStatus.CANCELLED)

    sent.clear()  # a CPU scoring (the default) stays on the cpu queue, its params as before plus the device
    with django_capture_on_commit_callbacks(execute=True):
        cpu = Job.objects.get(pk=score("res", "--regressor", "tiny")["job"])
    assert (cpu.params["device"], cpu.params["batch_size"], chunk_queue(cpu)) == ("cpu", 256, "cpu")
    assert {name for name, _ in sent} == {"jobs.tasks.run_chunk_cpu"} and len(sent) == 3
    Job.objects.filter(pk=cpu.pk).update(status=JobStatus.CANCELLED)

    sent.clear()  # the installation's default, and the launch function the admin and the API call
    settings.PARAFORGE_SCORING_DEVICE = "auto"
    with django_capture_on_commit_callbacks(execute=True):
        auto = score_resource_launch(resource=resource, regressor=Regressor.objects.get(name="tiny"), batch_size=8)
    assert (auto.params["device"], auto.params["batch_size"], chunk_queue(auto)) == ("auto", 8, "gpu")
    assert {name for name, _ in sent} == {"jobs.tasks.run_chunk_gpu"}
    settings.PARAFORGE_SCORING_DEVICE = "tpu"
    with pytest.raises(CommandError, match="PARAFORGE_SCORING_DEVICE='tpu': device must be one of"):
        score("res", "--regressor", "tiny")
    with pytest.raises(CommandError, match="float16 needs a GPU"):
        score("res", "--regressor", "tiny", "--device", "cpu", "--dtype", "float16")


@pytest.mark.django_db
def test_on_a_worker_without_cuda_a_cuda_job_fails_clearly_and_auto_scores_on_the_cpu(
    storage_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr("scoring.scored.job.cuda_available", lambda: False)
    tiny_regressor(tmp_path)
    build_resource()
    with pytest.raises(CommandError, match="this worker has no CUDA device"):
        score("res", "--regressor", "tiny", "--device", "cuda", "--wait")
    cpu = score("res", "--regressor", "tiny", "--wait")
    cpu_files = [(storage_dir / e["key"]).read_bytes() for e in ScoredResource.objects.get().shards]
    auto = score("res", "--regressor", "tiny", "--device", "auto", "--wait")
    assert auto["status"] == cpu["status"] == "succeeded"
    job = Job.objects.get(pk=auto["job"])
    assert job.result["encoded_on"] == ["cpu/float32"] and Job.objects.get(pk=cpu["job"]).result["encoded_on"] == [
        "cpu/float32"
    ]
    scored = ScoredResource.objects.get()
    assert scored.job_id == job.pk and all("encoded_on" not in e for e in scored.shards)
    assert [(storage_dir / e["key"]).read_bytes() for e in scored.shards] == cpu_files  # the same bytes


@pytest.mark.django_db
def test_the_api_and_the_admin_form_pass_the_device_on(
    client, storage_dir, tmp_path, sent, django_capture_on_commit_callbacks
):
    tiny_regressor(tmp_path)
    resource = build_resource()
    regressor = Regressor.objects.get(name="tiny")
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    body = {"resource": resource.pk, "regressor": regressor.pk, "device": "cuda"}
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post("/api/scored-resources/", json.dumps(body), content_type="application/json")
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert (job.params["device"], job.params["batch_size"], chunk_queue(job)) == ("cuda", 2048, "gpu")
    assert {name for name, _ in sent} == {"jobs.tasks.run_chunk_gpu"}
    Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
    refused = client.post(
        "/api/scored-resources/", json.dumps({**body, "device": "tpu"}), content_type="application/json"
    )
    assert refused.status_code == 400 and "device" in refused.json()["errors"]

    form = ScoreResourceForm(data={"resource": resource.pk, "regressor": regressor.pk, "batch_size": "4"})
    assert form.is_valid(), form.errors
    assert form.score_arguments()["device"] == ScoringDevice() and form.score_arguments()["batch_size"] == 4
