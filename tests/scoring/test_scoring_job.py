import hashlib
import io
import json
import os
import signal
import time

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from threadpoolctl import threadpool_limits

from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from jobs.execution import chunk_queue, job_launch, job_resume, job_wait
from jobs.models import Job, JobChunk, JobStatus
from scoring.models import Regressor, ScoredResource
from scoring.regressor import RegressorTrainOptions, regressor_load, regressor_train
from scoring.scored.job import pair_of, score_records, score_shard, scored_shard_key
from tests.annotation.parabank_data import import_contract
from tests.conftest import CeleryWorker

from .resource_data import PARAPHRASES, REFERENCES, OverlapScorer, build_resource, make_regressor, records

JUNK = "Bananas are yellow and quite tasty."


def train_tiny_regressor(tmp_path, name="tiny"):
    """A real regressor (lexical features, no embeddings) trained on a made-up campaign whose scores follow
    word overlap: 8 references x their paraphrases and one unrelated sentence, three workers each."""
    refs, cands = [], []
    scorer = OverlapScorer()
    for i, (ref, paras) in enumerate(zip(REFERENCES, PARAPHRASES), 1):
        refs.append(f"{i}\t{ref}\t10\t1.0")
        for text in paras + [JUNK]:
            base = float(scorer.predict([{"reference": ref, "paraphrase": text}])[0])
            for worker, shift in ((1, -5), (2, 0), (3, 5)):
                score = int(min(100, max(0, base + shift)))
                cands.append(f"{worker}\t{i}\t10\t17\t{text}\t1.0\t{score}\t2")
    import_contract(tmp_path, campaign="train", refs=refs, cands=cands)
    with threadpool_limits(1):  # OpenMP threads only spin on a tiny training set and a busy machine
        return regressor_train(
            campaign="train",
            name=name,
            options=RegressorTrainOptions(with_embeddings=False, min_judgments=0, seed=0),
        )


_TRAINED: dict = {}


def tiny_regressor(tmp_path, name="tiny"):
    """The tiny regressor, trained once per test run (training takes seconds); later tests get its saved
    model file written back to their storage and a Regressor row pointing at it."""
    if not _TRAINED:
        row = train_tiny_regressor(tmp_path, name)
        with get_storage().open_read(row.key) as fh:
            _TRAINED.update(payload=fh.read(), key=row.key, signature=row.signature, metrics=row.metrics)
        return row
    with get_storage().open_write(_TRAINED["key"]) as fh:
        fh.write(_TRAINED["payload"])
    return Regressor.objects.create(
        name=name, key=_TRAINED["key"], signature=_TRAINED["signature"], metrics=_TRAINED["metrics"]
    )


def score(*args):
    out = io.StringIO()
    call_command("score_resource", *args, stdout=out)
    return json.loads(out.getvalue())


def pairs_of_shards(keys):
    return [
        (r["ref_index"], c["text"], c.get("score")) for key in keys for r in read_jsonl_gz(key) for c in r["candidates"]
    ]


@pytest.mark.django_db
def test_score_resource_writes_mirrored_scored_shards(storage_dir, tmp_path):
    regressor = tiny_regressor(tmp_path)
    resource = build_resource()
    out = score("res", "--regressor", "tiny", "--wait", "--batch-size", "4")
    assert set(out) == {"job", "status", "resource", "regressor", "scored_resource", "n_pairs", "n_skipped"}
    assert out["status"] == "succeeded" and out["n_pairs"] == 18 and out["n_skipped"] == 0

    scored = ScoredResource.objects.get(pk=out["scored_resource"])
    assert (scored.resource, scored.regressor, scored.job_id, scored.n_pairs) == (resource, regressor, out["job"], 18)
    assert [e["index"] for e in scored.shards] == [0, 1, 2]
    fitted = regressor_load("tiny")
    for shard, entry in zip(resource.shards.order_by("index"), scored.shards):
        assert entry["key"] == scored_shard_key(scored.pk, shard.index, out["job"])
        assert entry["sha256"] == hashlib.sha256((storage_dir / entry["key"]).read_bytes()).hexdigest()
        original, scored_records = list(read_jsonl_gz(shard.key)), list(read_jsonl_gz(entry["key"]))
        # record for record the same, each candidate gaining a score: the regressor's own prediction
        for a, b in zip(original, scored_records, strict=True):
            assert [{k: v for k, v in c.items() if k != "score"} for c in b["candidates"]] == a["candidates"]
            assert {k: v for k, v in b.items() if k != "candidates"} == {
                k: v for k, v in a.items() if k != "candidates"
            }
            expected = fitted.predict([pair_of(a, c) for c in a["candidates"]])
            assert [c["score"] for c in b["candidates"]] == pytest.approx(list(expected), abs=1e-4)
    # higher predicted similarity for a close paraphrase than for a loose one
    first = list(read_jsonl_gz(scored.shards[0]["key"]))[0]["candidates"]
    assert first[1]["score"] > first[2]["score"]  # near-copy vs. "Earthquakes occur here how often?"
    chunks = JobChunk.objects.filter(job_id=out["job"]).order_by("index")
    assert [(c.done_units, c.total_units) for c in chunks] == [(8, 8), (6, 6), (4, 4)]


@pytest.mark.django_db
def test_a_scoring_job_stored_before_later_options_still_runs(storage_dir, tmp_path):
    """Jobs queued before GPU scoring (no ``device``, ``dtype``, ``encode_batch`` or ``cpu_workers``) and with no
    ``batch_size`` or ``throttle_s`` at all: each scores on the CPU in float32, in batches of 256, the same scores,
    and its params stay as stored (``scoring.scored.params.ScoreResourceParams`` reads the absent keys as defaults)."""
    tiny_regressor(tmp_path)
    resource = build_resource()
    now = score("res", "--regressor", "tiny", "--wait")
    expected = pairs_of_shards(e["key"] for e in ScoredResource.objects.get().shards)
    for stored in (
        {"resource": resource.pk, "regressor": "tiny", "batch_size": 4, "throttle_s": 0.0},
        {"resource": resource.pk, "regressor": "tiny"},
    ):
        job = job_launch(kind="score_resource", params=dict(stored), label="score res with tiny", wait=True)
        assert job.status == JobStatus.SUCCEEDED, job.error
        assert chunk_queue(job) == "cpu" and job.result["encoded_on"] == ["cpu/float32"]
        assert {k: v for k, v in job.params.items() if k != "regressor_trained_at"} == stored
        scored = ScoredResource.objects.get()
        assert scored.job_id == job.pk != now["job"]
        assert pairs_of_shards(e["key"] for e in scored.shards) == expected


def _contents(storage_dir, shards):
    return [(storage_dir / e["key"]).read_bytes() for e in shards]


@pytest.mark.django_db
def test_rerun_rewrites_the_same_files_without_duplicates(storage_dir, tmp_path, django_capture_on_commit_callbacks):
    tiny_regressor(tmp_path)
    resource = build_resource()
    first = score("res", "--regressor", "tiny", "--wait")
    scored = ScoredResource.objects.get(pk=first["scored_resource"])
    files = _contents(storage_dir, scored.shards)
    # one chunk runs again (a redelivered message): same file, same bytes, same entry
    shard = resource.shards.get(index=1)
    entry = score_shard(shard=shard, scored=scored, job_id=first["job"], regressor=regressor_load("tiny"))
    assert entry == scored.shards[1] and _contents(storage_dir, scored.shards) == files
    # the whole resource scored again by the same regressor: same row and bytes, the first files gone
    with django_capture_on_commit_callbacks(execute=True):
        second = score("res", "--regressor", "tiny", "--wait")
    assert second["scored_resource"] == first["scored_resource"] and second["job"] != first["job"]
    old_keys = [e["key"] for e in scored.shards]
    scored.refresh_from_db()
    assert scored.job_id == second["job"] and [e["index"] for e in scored.shards] == [0, 1, 2]
    assert scored.n_pairs == 18 and _contents(storage_dir, scored.shards) == files
    assert not any((storage_dir / k).exists() for k in old_keys)


@pytest.mark.django_db
def test_a_new_scoring_replaces_the_old_only_once_it_succeeds(
    storage_dir, tmp_path, django_capture_on_commit_callbacks
):
    from jobs.execution import job_cancel, job_run_inline
    from scoring.releases.checks import scoring_for

    tiny_regressor(tmp_path)
    resource = build_resource()
    first = score("res", "--regressor", "tiny", "--wait")
    done = ScoredResource.objects.get(pk=first["scored_resource"])
    # a second scoring is queued (no worker takes it here): releases keep the first result meanwhile
    pending = score("res", "--regressor", "tiny")
    assert pending["status"] == "pending" and pending["scored_resource"] == done.pk
    kept = scoring_for(resource, "tiny")
    assert (kept.job_id, kept.shards, kept.n_pairs) == (first["job"], done.shards, 18)
    with pytest.raises(CommandError, match=f"already being scored by 'tiny' in job {pending['job']}"):
        score("res", "--regressor", "tiny")
    # cancelled: the first result stays, files included
    job_cancel(job_id=pending["job"])
    kept = scoring_for(resource, "tiny")
    assert kept.job_id == first["job"] and all((storage_dir / e["key"]).exists() for e in kept.shards)
    # (as if one of its chunks had written a shard before the cancel)
    orphan = storage_dir / scored_shard_key(done.pk, 0, pending["job"])
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"")
    # a third one that runs to the end takes over and the first files go once it commits
    third = score("res", "--regressor", "tiny")
    with django_capture_on_commit_callbacks(execute=True):
        job_run_inline(job_id=third["job"])
    now = scoring_for(resource, "tiny")
    assert now.job_id == third["job"] and now.n_pairs == 18
    assert not any((storage_dir / e["key"]).exists() for e in done.shards) and not orphan.exists()
    assert sorted(str(p.relative_to(storage_dir)) for p in (storage_dir / "scored").rglob("*.gz")) == sorted(
        e["key"] for e in now.shards
    )


@pytest.mark.django_db
def test_a_retrained_regressor_needs_a_new_scoring(storage_dir, tmp_path):
    from scoring.releases.checks import ReleaseError, scoring_for

    regressor = tiny_regressor(tmp_path)
    resource = build_resource()
    score("res", "--regressor", "tiny", "--wait")
    assert scoring_for(resource, "tiny").n_pairs == 18
    # train_regressor --replace: same name, a new training
    regressor.signature = {**regressor.signature, "trained_at": regressor.signature["trained_at"] + 1}
    regressor.save(update_fields=["signature"])
    with pytest.raises(ReleaseError, match="earlier training of regressor 'tiny'"):
        scoring_for(resource, "tiny")
    with pytest.raises(CommandError, match="earlier training"):
        call_command("export_release", "res", "--out", str(tmp_path / "rel"))
    assert not (tmp_path / "rel").exists()
    # a job started before the retraining refuses to run its chunks with the new model
    queued = score("res", "--regressor", "tiny")
    regressor.signature = {**regressor.signature, "trained_at": regressor.signature["trained_at"] + 1}
    regressor.save(update_fields=["signature"])
    from jobs.execution import job_run_inline

    job = job_run_inline(job_id=queued["job"])
    assert job.status == "failed" and "was retrained since" in job.error
    score("res", "--regressor", "tiny", "--wait")
    assert scoring_for(resource, "tiny").n_pairs == 18


@pytest.mark.django_db
def test_clear_errors(storage_dir, tmp_path):
    make_regressor("tiny")
    build_resource()
    build_resource(name="empty", shards=[])
    with pytest.raises(CommandError, match="no regressor named 'nope'"):
        score("res", "--regressor", "nope")
    with pytest.raises(CommandError, match="no resource named or numbered 'zzz'"):
        score("zzz", "--regressor", "tiny")
    with pytest.raises(CommandError, match="has no candidate shards yet"):
        score("empty", "--regressor", "tiny")
    with pytest.raises(CommandError, match="--batch-size"):
        score("res", "--regressor", "tiny", "--batch-size", "0")
    for throttle in ("nan", "inf", "-1"):
        with pytest.raises(CommandError, match="--throttle"):
            score("res", "--regressor", "tiny", "--throttle", throttle)
    assert not Job.objects.filter(kind="score_resource").exists() and not ScoredResource.objects.exists()


def test_score_records_batches_whole_records_and_marks_skipped_pairs():
    recs = records()
    scorer = OverlapScorer(max_words=10)  # reference 1 has 12 words: skipped (NaN -> null)
    counts, seen = {}, []
    out = list(score_records(recs, regressor=scorer, batch_size=4, progress=seen.append, counts=counts))
    assert [r["ref_index"] for r in out] == list(range(8))
    assert counts == {"pairs": 18, "skipped": 2}
    assert [c["score"] for c in out[1]["candidates"]] == [None, None]
    assert all(0 <= c["score"] <= 100 for r in out if r["ref_index"] != 1 for c in r["candidates"])
    # batches of whole records, each of at least 4 pairs but the last
    assert seen == [5, 10, 14, 18] and scorer.calls == 4


def test_a_regressor_returning_the_wrong_count_is_an_error():
    class Short:
        def predict(self, pairs):
            return np.zeros(len(pairs) - 1)

    with pytest.raises(ValueError, match="scores for"):
        list(score_records(records(), regressor=Short(), batch_size=100))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_chunk_then_resumed_scores_every_pair_once(celery_worker_process, tmp_path):
    # default storage (VAR_DIR/storage): the worker process sees the same files
    tiny_regressor(tmp_path)
    resource = build_resource(name="fault")
    # each batch (one reference) takes over 0.5 s, the progress recorder's interval: every one is recorded
    out = score("fault", "--regressor", "tiny", "--batch-size", "1", "--throttle", "0.6")
    job_id = out["job"]
    deadline = time.monotonic() + 60
    while True:  # wait until a chunk is part-way through
        running = JobChunk.objects.filter(job_id=job_id, status=JobStatus.RUNNING, done_units__gt=0).first()
        if running is not None and running.done_units < running.total_units:
            break
        job = Job.objects.get(pk=job_id)
        assert time.monotonic() < deadline and not job.is_terminal, f"no chunk got under way: {job.status} {job.error}"
        time.sleep(0.05)
    os.kill(celery_worker_process.pid, signal.SIGKILL)
    celery_worker_process.wait(timeout=10)
    running.refresh_from_db()
    assert running.status == JobStatus.RUNNING  # stranded: nobody will finish it
    scored = ScoredResource.objects.get(resource=resource)
    # nothing half-written
    assert not get_storage().exists(scored_shard_key(scored.pk, running.params["index"], job_id))
    assert Job.objects.get(pk=job_id).status == JobStatus.RUNNING

    second = CeleryWorker("second").wait_ready()
    try:
        job_resume(job_id=job_id)
        job = job_wait(job_id=job_id, timeout=120)
    finally:
        second.stop()
    assert job.status == JobStatus.SUCCEEDED, job.error
    running.refresh_from_db()
    assert running.status == JobStatus.SUCCEEDED and running.attempts == 2
    scored.refresh_from_db()
    assert [e["index"] for e in scored.shards] == [0, 1, 2] and scored.n_pairs == 18
    got = pairs_of_shards(e["key"] for e in scored.shards)
    expected = [
        (r["ref_index"], c["text"])
        for s in resource.shards.order_by("index")
        for r in read_jsonl_gz(s.key)
        for c in r["candidates"]
    ]
    assert [(i, t) for i, t, _ in got] == expected  # every pair exactly once, in order
    assert all(s is not None for _, _, s in got)
