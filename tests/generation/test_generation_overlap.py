"""A generation chunk's CPU work (spaCy tagging, constraint selection) overlapped with decoding, the batch and
dtype a job decodes with (stated in its result), and references that start with punctuation (systems 32-34)."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from django.core.management import CommandError, call_command

import generation.generation_job.pipeline as gj
from generation.constraints.sets import select_constraints
from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.decode_options import DecodeOptionsError
from generation.decoding import normalise_constraints, violations
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key, run_chunk
from generation.generation_job.pipeline import BATCH_RULE, DEVICE_BATCH_RULE, prepared_ahead
from generation.models import IdfTable
from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from jobs.execution import job_run_inline, job_start
from jobs.models import JobStatus

from .test_generation_job import checked_params

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = [
    '"the cat sat on the mat," she said',
    "a dog runs in the house",
    '" big red house "',
    "...",
    "they talk about the big tree",
    "the red sun was in the sky",
    "he ran with the small dog to the blue house",
    "-- we walk in the green world and talk with people",
    "how often do earthquakes occur today",
]


def _idf(word: str) -> float:
    return 2.0 if word in {"the", "a", "in", "on", "to", "with", "and"} else 7.0 + 0.5 * len(word)


@pytest.fixture
def corpus(tmp_path, storage_dir, db):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="quoted", path=path, format="mono", shard_size=100))
    words = sorted({w.strip('",.') for s in SENTENCES for w in s.split()} - {""})
    key = f"idf/quoted-{corpus.pk}.tsv"
    with get_storage().open_write(key) as fh:
        fh.write(("token\tidf\n" + "".join(f"{w}\t{_idf(w)}\n" for w in words)).encode())
    IdfTable.objects.create(corpus=corpus, name="quoted", key=key, n_documents=len(SENTENCES), n_types=len(words))
    return corpus


def _params(corpus, model_dir, **extra):
    return {
        "corpus": corpus.pk,
        "model": str(model_dir),
        "systems": [17, 28, 32, 33, 34],
        "beam": 3,
        "nbest": 1,
        "max_length": 12,
        "device": "cpu",
        "seed": 1,
        **extra,
    }


def _records(job, chunk=0):
    return list(read_jsonl_gz(candidate_shard_key(job.pk, chunk)))


# --- the overlap -------------------------------------------------------------------------------------


def test_prepared_ahead_keeps_order_bounds_the_queue_and_hands_errors_over():
    made, threads = [], set()

    def prepare(x):
        threads.add(threading.current_thread().name)
        if x == "boom":
            raise KeyError(x)
        made.append(x)
        return x * 10

    got = []
    for i, value in enumerate(prepared_ahead(iter(range(8)), prepare, ahead=2)):
        time.sleep(0.02)  # (the consumer is slower: the thread runs ahead until the queue is full)
        assert len(made) <= i + 1 + 2 + 1  # this one, at most 2 queued, one more prepared and waiting
        got.append(value)
    assert got == [x * 10 for x in range(8)] and threads == {"generate-prepare"}

    made.clear()
    it = prepared_ahead(iter([1, 2, "boom", 4]), prepare, ahead=1)
    assert [next(it), next(it)] == [10, 20]
    with pytest.raises(KeyError, match="boom"):
        next(it)

    it = prepared_ahead(iter(range(100)), prepare, ahead=1)
    assert next(it) == 0
    it.close()  # a cancelled chunk: the thread stops and is waited for
    assert not any(t.name == "generate-prepare" for t in threading.enumerate()) and len(made) < 10

    threads.clear()
    assert list(prepared_ahead(iter([1, 2]), prepare, ahead=0)) == [10, 20]
    assert threads == {threading.current_thread().name}  # the sequential version


def test_chunks_overlap_where_the_model_is_on_a_gpu(monkeypatch):
    monkeypatch.setattr(gj, "PREPARE_AHEAD", None)
    assert (gj.prepare_ahead_for("cuda"), gj.prepare_ahead_for("cpu")) == (1, 0)
    monkeypatch.setattr(gj, "PREPARE_AHEAD", 2)
    assert gj.prepare_ahead_for("cpu") == 2


@pytest.mark.django_db
def test_overlapped_chunk_writes_exactly_what_the_sequential_one_writes(corpus, tiny_marian_dir, monkeypatch):
    """Windows prepared in the background thread while the previous one decodes (seen to overlap) give the
    very shard the sequential version writes."""
    monkeypatch.setattr(gj, "WINDOW", 2)  # 9 references: 5 windows in the one chunk
    monkeypatch.setattr(gj, "PREPARE_AHEAD", 0)
    job = job_run_inline(job_id=job_start(kind=KIND, params=_params(corpus, tiny_marian_dir), enqueue=False).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    sequential, sha = _records(job), job.chunks.get().result["sha256"]

    events = []
    real_prepare, real_decode = gj.prepare_window, gj.decode_window

    def prepare(records, setup):
        events.append(("prepare", records[0]["i"], threading.current_thread().name))
        return real_prepare(records, setup)

    def decode(window, setup, progress):
        time.sleep(0.2)  # (long enough for the thread to start on the next window meanwhile)
        out = real_decode(window, setup, progress)
        events.append(("decoded", window.out_records[0]["ref_index"], threading.current_thread().name))
        return out

    monkeypatch.setattr(gj, "prepare_window", prepare)
    monkeypatch.setattr(gj, "decode_window", decode)
    monkeypatch.setattr(gj, "PREPARE_AHEAD", 1)
    interval = sys.getswitchinterval()
    result = run_chunk(job, job.chunks.get(), lambda done, total: None)
    assert _records(job) == sequential and result["sha256"] == sha
    assert sys.getswitchinterval() == interval  # (shorter GIL slices only while the chunk overlaps)
    assert {name for kind, _, name in events if kind == "prepare"} == {"generate-prepare"}
    assert {name for kind, _, name in events if kind == "decoded"} == {threading.current_thread().name}
    order = [(kind, first) for kind, first, _ in events]
    for k in (0, 2, 4, 6):  # window k + 2 was being prepared before window k finished decoding
        assert order.index(("prepare", k + 2)) < order.index(("decoded", k))


# --- batch and dtype: stated, checked ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_job_states_the_batch_and_dtype_it_decoded_with(corpus, tiny_marian_dir):
    given = job_run_inline(
        job_id=job_start(kind=KIND, params=_params(corpus, tiny_marian_dir, batch_size=4), enqueue=False).pk
    )
    assert given.status == JobStatus.SUCCEEDED, given.error
    assert given.result["decoding"] == {"batch_size": [4], "batch_rule": BATCH_RULE, "dtype": ["float32"]}
    by_device = job_run_inline(
        job_id=job_start(
            kind=KIND, params=_params(corpus, tiny_marian_dir, dtype="float32", name="by-device"), enqueue=False
        ).pk
    )
    assert by_device.status == JobStatus.SUCCEEDED, by_device.error
    assert by_device.params["batch_size"] is None and by_device.params["dtype"] == "float32"
    assert by_device.result["decoding"] == {"batch_size": [32], "batch_rule": DEVICE_BATCH_RULE, "dtype": ["float32"]}
    chunk = by_device.chunks.get().result
    assert (chunk["batch_size"], chunk["batch_rule"], chunk["dtype"]) == (32, "cpu: 32", "float32")
    texts = [[[c["text"] for c in r["candidates"]] for r in _records(j)] for j in (given, by_device)]
    assert texts[0] == texts[1]  # (the batch changes no output here)


@pytest.mark.django_db
def test_half_precision_is_refused_for_a_cpu_job_with_a_clear_error(corpus, tiny_marian_dir):
    with pytest.raises(DecodeOptionsError, match="dtype float16 needs a CUDA device"):
        checked_params(corpus, model=str(tiny_marian_dir), systems=[28], device="cpu", dtype="float16")
    args = ["quoted", "--model", str(tiny_marian_dir), "--systems", "28", "--device", "cpu", "--dtype", "bfloat16"]
    with pytest.raises(CommandError, match="dtype bfloat16 needs a CUDA device"):
        call_command("generate", *args)
    # a worker without a GPU that gets a half-precision job (device left to the worker) fails it, saying why
    job = job_run_inline(
        job_id=job_start(
            kind=KIND, params=_params(corpus, tiny_marian_dir, device=None, dtype="float16"), enqueue=False
        ).pk
    )
    assert job.status == JobStatus.FAILED and "dtype float16 needs a CUDA device" in job.error


# --- references that start with punctuation (systems 32-34) ------------------------------------------


def test_positional_systems_carry_on_through_the_first_word():
    from generation.selection.values import positional_phrase

    assert positional_phrase(['"', "The", "figures"], 1) == ('"', "The")
    assert positional_phrase(['"', "The", "figures"], 2) == ('"', "The")
    assert positional_phrase(["--", "-", "What", "do"], 2) == ("--", "-", "What")
    assert positional_phrase(["The", ",", "x"], 2) == ("The", ",")  # (a word among them: as written)
    assert positional_phrase(["...", "!"], 1) is None
    idf = {"figures": 9.0}
    assert select_constraints(32, '"The figures are catastrophic," said Dr. Patrick', idf).bos_avoid == (('"', "The"),)
    none = select_constraints(32, "...", idf)
    assert not none.is_constraint_set and "no word" in none.reason
    assert normalise_constraints({"bos_avoid": [['"', "The"]]})["bos_avoid"] == [["The"]]


@pytest.mark.django_db
def test_references_starting_with_a_quote_decode_under_systems_32_to_34(corpus, tiny_marian_dir):
    """The job used to fail whole (``'bos_avoid': empty phrase ['"']``): now every reference decodes, each
    output keeps clear of its reference's opening words, and a reference without words has no set."""
    job = job_run_inline(job_id=job_start(kind=KIND, params=_params(corpus, tiny_marian_dir), enqueue=False).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    records = {r["reference"]: r for r in _records(job)}
    quoted = records[SENTENCES[0]]
    by_system = {s: c["constraints"][s] for c in quoted["candidates"] for s in c["systems"]}
    assert by_system["32"]["bos_avoid"] == [['"', "the"]] and by_system["33"]["bos_avoid"] == [['"', "the"]]
    assert by_system["34"]["bos_avoid"] == [['"', "the", "cat"]]
    assert records['" big red house "']["candidates"]
    assert records["..."]["no_constraints"] == ["17", "32", "33", "34"]
    assert records["-- we walk in the green world and talk with people"]["candidates"]
    for record in records.values():
        for cand in record["candidates"]:
            for system in cand["systems"]:
                assert violations(cand["text"], normalise_constraints(cand["constraints"][system])) == []
    s32 = job.result["per_system"]["32"]
    assert s32["no_constraints"] == 1 and s32["outputs"] + s32["unsatisfiable"] + s32["empty"] == len(SENTENCES) - 1
