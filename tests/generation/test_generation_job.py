"""The ``generate`` job kind and CLI: candidate shards in the Resource format, constraints obeyed, identical
outputs merged, the evaluation sample as an annotation campaign, idempotent chunks, CLI shape and errors."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from annotation.campaigns.sample import campaign_from_sample
from annotation.models import Campaign, Candidate, CandidateSystem, Reference
from generation.constraints.sets import select_for_all_systems
from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.decode_options import DecodeOptionsError
from generation.decoding import normalise_constraints, violations
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key, run_chunk
from generation.generation_job.params import GenerateParams, generation_params
from generation.generation_job.sample import length_bucket
from generation.model_source import model_fingerprint
from generation.models import IdfTable, Resource, ResourceShard
from generation.nlp import load_pipeline
from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from jobs.execution import job_finish, job_run_inline, job_start
from jobs.models import Job, JobStatus
from jobs.params import from_values

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("one_torch_thread")]

SYSTEMS = [17, 21, 28, 31, 34]
# Made of the tiny test tokenizer's words (tests/generation/conftest.py); spaCy token counts in comments.
SENTENCES = [
    "the cat sat on the mat",  # 6
    "a dog runs in the house",  # 6
    "she walked to the car",  # 5
    "they talk about the big tree",  # 6
    "the red sun was in the sky",  # 7
    "he ran with the small dog to the blue house",  # 10
    "we walk in the green world and talk with people",  # 10
    "the government work is a big question for the company",  # 10
    "it was a day of fire and water , wind and earth",  # 12
    "you run to the house for the time of the week and the night is big and the moon "
    "is red and the sky was blue with the sun",  # 29
    "how often do earthquakes occur today",  # 6
    "this program is work",  # 4
]
FUNCTION_WORDS = {
    "the",
    "a",
    "is",
    "was",
    "it",
    "and",
    "of",
    "to",
    "in",
    "for",
    "with",
    "that",
    "this",
    "he",
    "she",
    "they",
    "we",
    "you",
    "on",
    "how",
    "do",
}


def _idf_value(word: str) -> float:
    return 2.0 if word in FUNCTION_WORDS else 7.0 + 0.5 * len(word)


@pytest.fixture
def corpus(tmp_path, storage_dir):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="tiny-gen", path=path, format="mono", shard_size=5))
    words = sorted({w for s in SENTENCES for w in s.split() if w.isalpha()})
    key = f"idf/tiny-gen-{corpus.pk}.tsv"
    with get_storage().open_write(key) as fh:
        fh.write(("token\tidf\n" + "".join(f"{w}\t{_idf_value(w)}\n" for w in words)).encode())
    IdfTable.objects.create(corpus=corpus, name="tiny-gen", key=key, n_documents=len(SENTENCES), n_types=len(words))
    return corpus


def _params(corpus, model_dir, **extra):
    return {
        "corpus": corpus.pk,
        "model": str(model_dir),
        "systems": SYSTEMS,
        "beam": 3,
        "nbest": 1,
        "max_length": 16,
        "batch_size": 8,
        "device": "cpu",
        "seed": 1,
        **extra,
    }


def checked_params(corpus, **values) -> dict:
    """A generate job's params as the command makes them, from ``values`` by setting name (decoding ones
    included): ``generation_params`` of a ``GenerateParams``."""
    return generation_params(from_values(GenerateParams, {"corpus": corpus.pk, **values}))


def _records(job):
    return [r for c in job.chunks.order_by("index") for r in read_jsonl_gz(candidate_shard_key(job.pk, c.index))]


def _check_record(record, idf_table):
    """A record has exactly the documented keys; every candidate obeys each of its systems' constraints,
    which are the ones the selection gives; merged texts are distinct; nll ascending."""
    assert set(record) == {"ref_index", "reference", "source", "length", "candidates", "no_constraints"}
    assert record["source"] == "" and record["reference"] == SENTENCES[record["ref_index"]]
    doc = load_pipeline(tagger=False)(record["reference"])
    assert record["length"] == sum(1 for t in doc if not t.is_space)
    expected = {
        str(s.system): s for s in select_for_all_systems(record["reference"], idf_table, seed=1, systems=SYSTEMS)
    }
    assert record["no_constraints"] == [n for n, s in expected.items() if not s.is_constraint_set]
    texts = [c["text"] for c in record["candidates"]]
    assert len(texts) == len(set(texts)) and all(t.strip() for t in texts)
    assert [c["nll"] for c in record["candidates"]] == sorted(c["nll"] for c in record["candidates"])
    seen = []
    for cand in record["candidates"]:
        assert set(cand) == {"text", "nll", "systems", "constraints"}
        assert cand["nll"] > 0 and cand["systems"] == sorted(cand["systems"], key=int)
        assert sorted(cand["constraints"]) == sorted(cand["systems"])
        for system in cand["systems"]:
            value = expected[system].to_json()
            assert cand["constraints"][system] == {k: value[k] for k in ("positive", "negative", "bos_avoid")}
            assert violations(cand["text"], normalise_constraints(cand["constraints"][system])) == []
        seen += cand["systems"]
    # nbest = 1: each system with a constraint set produced exactly one candidate (or none, if unsatisfiable)
    assert len(seen) == len(set(seen)) and not set(seen) & set(record["no_constraints"])
    return seen


def test_job_writes_documented_shards_obeying_constraints_and_merging_systems(corpus, tiny_marian_dir):
    job = job_start(kind=KIND, params=_params(corpus, tiny_marian_dir), enqueue=False)
    assert job.total_chunks == 3 and job.params["idf_table"] == corpus.idf_tables.get().pk
    resource = Resource.objects.get(job=job)
    assert resource.name == f"tiny-gen-job{job.pk}" and resource.n_references == 0
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error

    idf = {
        line.split("\t")[0]: float(line.split("\t")[1])
        for line in get_storage().open_read(corpus.idf_tables.get().key).read().decode().splitlines()[1:]
    }
    records = _records(job)
    assert [r["ref_index"] for r in records] == list(range(len(SENTENCES)))
    produced = [_check_record(r, idf) for r in records]
    per_system = job.result["per_system"]
    assert sorted(per_system, key=int) == [str(s) for s in SYSTEMS]
    assert sum(len(p) for p in produced) == sum(v["outputs"] for v in per_system.values())
    assert sum(v["unsatisfiable"] + v["empty"] for v in per_system.values()) == sum(
        len(SYSTEMS) - len(r["no_constraints"]) - len(p) for r, p in zip(records, produced)
    )
    # identical outputs of different systems are one candidate listing both (the baseline 28 and a
    # system whose banned words the unconstrained output does not contain, at least)
    assert any(len(c["systems"]) > 1 for r in records for c in r["candidates"])
    assert any(r["no_constraints"] for r in records)  # "this program is work" has too small a pool for 21

    resource.refresh_from_db()
    shards = list(resource.shards.order_by("index"))
    assert [s.index for s in shards] == [0, 1, 2] and [s.key for s in shards] == job.result["shards"]
    assert resource.n_references == len(SENTENCES) == sum(s.n_references for s in shards)
    assert resource.n_pairs == sum(len(r["candidates"]) for r in records) == sum(s.n_pairs for s in shards)
    s = resource.settings
    assert s["model"] == str(tiny_marian_dir) and s["model_sha256"] == model_fingerprint(str(tiny_marian_dir))
    assert (s["systems"], s["beam"], s["nbest"], s["stop"], s["max_length"], s["length_penalty"], s["seed"]) == (
        SYSTEMS,
        3,
        1,
        "auto",
        16,
        1.0,
        1,
    )
    assert s["idf_table"] == corpus.idf_tables.get().pk and s["idf_table_name"] == "tiny-gen"
    # every setting the job stored is on the card but how it was run (derived: a new setting needs no card code)
    run_only = ("resource", "corpus", "name", "batch_size", "sample_chunk_size", "pause_per_batch")
    assert {k for k in job.params if k not in run_only} <= set(s), set(job.params) - set(s)
    assert s["dtype"] is None and "sample_chunk_size" not in s  # float32 on the CPU; chunking changes no text
    assert not Campaign.objects.filter(job=job).exists()  # the whole corpus stays in shards


def test_stop_rule_is_checked_and_a_job_planned_without_one_keeps_hugging_faces(corpus, tiny_marian_dir):
    """``stop`` is a checked setting; a job planned before it existed (no "stop" in its params) decodes its
    remaining chunks under Hugging Face's rule, the one its first chunks ran under, and says so."""
    with pytest.raises(DecodeOptionsError, match="stop must be one of auto, beam, nbest, not 'first'"):
        checked_params(corpus, model=str(tiny_marian_dir), systems=[28], stop="first")
    assert checked_params(corpus, model=str(tiny_marian_dir), systems=[28], stop="nbest")["stop"] == "nbest"
    job = job_start(kind=KIND, params=_params(corpus, tiny_marian_dir, systems=[17, 28]), enqueue=False)
    assert job.params["stop"] == "auto"
    del job.params["stop"]
    job.save(update_fields=["params"])
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert Resource.objects.get(job=job).settings["stop"] == "beam"


def test_rerunning_a_chunk_rewrites_the_same_shard_and_row(corpus, tiny_marian_dir):
    job = job_run_inline(
        job_id=job_start(kind=KIND, params=_params(corpus, tiny_marian_dir, systems=[28, 34]), enqueue=False).pk
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    before = list(read_jsonl_gz(candidate_shard_key(job.pk, 1)))
    row = ResourceShard.objects.get(resource__job=job, index=1)
    chunk = job.chunks.get(index=1)
    result = run_chunk(job, chunk, lambda done, total: None)  # a redelivered message
    assert list(read_jsonl_gz(candidate_shard_key(job.pk, 1))) == before
    assert result["sha256"] == row.sha256 == chunk.result["sha256"]
    assert ResourceShard.objects.filter(resource__job=job).count() == 3
    assert job_finish(job_id=job.pk).result == job.result  # finishing twice changes nothing


def test_evaluation_sample_goes_into_a_campaign(corpus, tiny_marian_dir):
    params = _params(corpus, tiny_marian_dir, sample_per_length=2, lengths=[5, 10, 20], sample_chunk_size=3)
    job = job_start(kind=KIND, params=params, enqueue=False)
    # nearest bucket (ties: shorter); exact lengths first, then the nearest, order fixed by the seed
    sample = [r for c in job.chunks.order_by("index") for r in c.params["references"]]
    assert job.params["sample"] == {"5": 2, "10": 2, "20": 1}
    by_bucket = {L: [r["i"] for r in sample if r["bucket"] == L] for L in (5, 10, 20)}
    assert set(by_bucket[5]) <= {2, 11, 0, 1, 3, 10, 4} and 2 in by_bucket[5]  # "she walked to the car": 5 tokens
    assert set(by_bucket[10]) <= {5, 6, 7} and by_bucket[20] == [9]  # 12 tokens -> 10; 29 -> 20
    assert job.total_chunks == 2
    again = job_start(kind=KIND, params={**params, "name": "again"}, enqueue=False)
    assert [r["i"] for c in again.chunks.order_by("index") for r in c.params["references"]] == [
        r["i"] for r in sample
    ]  # deterministic by seed

    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    campaign = Campaign.objects.get(job_id=job.pk)
    assert job.result["campaign"] == campaign.pk and campaign.name == Resource.objects.get(job=job).name
    records = _records(job)
    refs = {r.ref_id: r for r in Reference.objects.filter(campaign=campaign)}
    assert sorted(refs) == sorted(str(r["i"]) for r in sample)
    for r in sample:
        ref = refs[str(r["i"])]
        assert ref.length_bucket == r["bucket"] and ref.text == SENTENCES[r["i"]]
        assert ref.extra["length"] == r["length"]
    for record in records:
        got = {
            c.text: (c.nll, sorted(s.system for s in c.systems.all()))
            for c in Candidate.objects.filter(reference=refs[str(record["ref_index"])])
        }
        assert got == {c["text"]: (pytest.approx(c["nll"]), sorted(c["systems"])) for c in record["candidates"]}
    counts = (Reference.objects.count(), Candidate.objects.count(), CandidateSystem.objects.count())
    assert counts[1] == sum(len(r["candidates"]) for r in records) > 0
    # writing the campaign again (a finish that ran twice) duplicates nothing
    chunks = list(job.chunks.order_by("index"))
    assert campaign_from_sample(job, chunks, name="ignored").pk == campaign.pk
    assert (Reference.objects.count(), Candidate.objects.count(), CandidateSystem.objects.count()) == counts


def test_length_bucket_rule():
    assert [length_bucket(n, (5, 10, 20, 40)) for n in (1, 5, 7, 8, 15, 16, 30, 31, 90)] == [
        5,
        5,
        5,
        10,
        10,
        20,
        20,
        40,
        40,
    ]


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_with_the_demo_model_prints_the_job_and_waits(corpus, capsys):
    call_command(
        "generate",
        "tiny-gen",
        "--model",
        "generation/demo/model",
        "--systems",
        "28,31,34",
        "--sample-per-length",
        "1",
        "--lengths",
        "5,10",
        "--beam",
        "4",
        "--nbest",
        "2",
        "--device",
        "cpu",
        "--max-length",
        "24",
        "--name",
        "demo-sample",
        "--wait",
    )
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    job = Job.objects.get(pk=out["job"])
    # progress on stderr (not a terminal here: plain lines), counting the sampled references
    assert captured.err.splitlines()[-1].startswith(
        f"job {job.pk} generate succeeded: 1/1 chunks, 2/2 references (100%)"
    )
    assert out == {
        "job": job.pk,
        "status": "succeeded",
        "corpus": corpus.pk,
        "resource": Resource.objects.get(name="demo-sample").pk,
        "name": "demo-sample",
        "campaign": Campaign.objects.get(job=job).pk,
        "chunks": 1,
        "references": 2,
        "pairs": out["pairs"],
        "sample": {"5": 1, "10": 1},
    }
    assert job.params["nbest"] == 2 and out["pairs"] >= 2
    for record in _records(job):  # real paraphrases: words, under the constraints
        for cand in record["candidates"]:
            assert any(w.isalpha() for w in cand["text"].split())
            for system in cand["systems"]:
                assert violations(cand["text"], normalise_constraints(cand["constraints"][system])) == []


def test_cli_without_wait_only_queues(corpus, tiny_marian_dir, capsys, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("generate", str(corpus.pk), "--model", str(tiny_marian_dir), "--systems", "28", "--stop", "nbest")
    out = json.loads(capsys.readouterr().out)
    assert Job.objects.get(pk=out["job"]).params["stop"] == "nbest"
    assert out["status"] == "pending" and out["chunks"] == 3 and out["campaign"] is None
    assert out["name"] == f"tiny-gen-job{out['job']}" and len(callbacks) == 1  # the enqueue after commit


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope", "--model", "{model}", "--systems", "28"], "no corpus named or numbered 'nope'"),
        (["tiny-gen", "--model", "{tmp}/missing", "--systems", "28"], "does not exist"),
        (["tiny-gen", "--model", "{tmp}", "--systems", "28"], "has no config.json"),
        (["tiny-gen", "--model", "{model}", "--systems", "17,99"], "unknown system 99"),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "17,x"],
            "unknown system 'x': 'x' is not a number written in digits 0-9",
        ),
        (["tiny-gen", "--model", "{model}", "--systems", "35"], "need a PPDB file"),
        (["tiny-gen", "--model", "{model}", "--systems", "28", "--beam", "2", "--nbest", "3"], "cannot exceed beam"),
        (["tiny-gen", "--model", "{model}", "--systems", "28", "--idf", "nope"], "no IDF table named"),
        (["tiny-gen", "--model", "{model}", "--systems", "28", "--stop", "first"], "--stop: invalid choice: 'first'"),
        (["tiny-gen", "--model", "{model}", "--systems", "28", "--sample-per-length", "0"], "at least 1"),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "28", "--lengths", "5,x", "--sample-per-length", "2"],
            "length must be an integer",
        ),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "28", "--lengths", "abc"],  # checked even when unused
            "length must be an integer",
        ),
        (["tiny-gen", "--model", "{tmp}/notes.txt", "--systems", "28"], r"model folder '.*notes\.txt' is not a folder"),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "28", "--length-penalty", "nan"],
            r"--length-penalty: the value must be a number written in digits 0-9 \(e\.g\. 1\.5\), not 'nan'",
        ),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "28", "--length-penalty", "inf"],
            r"--length-penalty: the value must be a number written in digits 0-9 \(e\.g\. 1\.5\), not 'inf'",
        ),
        (
            ["tiny-gen", "--model", "{model}", "--systems", "28", "--pause-per-batch", "inf"],
            r"--pause-per-batch: the value must be a number written in digits 0-9",
        ),
        (["tiny-gen", "--model", "{model}", "--systems", "35", "--ppdb", "{tmp}"], "is a directory, not a file"),
    ],
)
def test_cli_errors_create_nothing(corpus, tiny_marian_dir, tmp_path, args, message):
    (tmp_path / "notes.txt").write_text("not a model")
    args = [a.format(model=tiny_marian_dir, tmp=tmp_path) for a in args]
    with pytest.raises(CommandError, match=message) as raised:
        call_command("generate", *args)
    assert "\n" not in str(raised.value)
    assert not Job.objects.exists() and not Resource.objects.exists() and not Campaign.objects.exists()


def test_cli_name_taken_and_corpus_without_idf(corpus, tiny_marian_dir, tmp_path):
    Resource.objects.create(name="taken", corpus=corpus)
    with pytest.raises(CommandError, match="a resource named 'taken' already exists"):
        call_command("generate", "tiny-gen", "--model", str(tiny_marian_dir), "--systems", "28", "--name", "taken")
    corpus.idf_tables.all().delete()
    with pytest.raises(CommandError, match="has no IDF table"):
        call_command("generate", "tiny-gen", "--model", str(tiny_marian_dir), "--systems", "28")
    assert not Job.objects.exists()


# --- the admin -----------------------------------------------------------------------------------


def test_admin_lists_resources_with_progress_shards_and_settings(corpus, tiny_marian_dir, client, django_user_model):
    from django.urls import reverse

    client.force_login(django_user_model.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True))
    job = job_start(kind=KIND, params=_params(corpus, tiny_marian_dir, systems=[28]), enqueue=False)
    resource = Resource.objects.get(job=job)
    page = client.get(reverse("admin:generation_resource_changelist")).content.decode()
    assert resource.name in page and f'data-job="{job.pk}"' in page and "pending 0%" in page
    job = job_run_inline(job_id=job.pk)
    page = client.get(reverse("admin:generation_resource_changelist")).content.decode()
    assert "succeeded 100%" in page
    detail = client.get(reverse("admin:generation_resource_change", args=[resource.pk])).content.decode()
    assert candidate_shard_key(job.pk, 2) in detail and "model_sha256" in detail and f"job {job.pk}" in detail


def test_cancelling_stops_a_chunk_at_its_next_batch_without_writing(corpus, tiny_marian_dir):
    from jobs.execution import JobCancelled, _progress_recorder, job_cancel

    job = job_start(
        kind=KIND, params=_params(corpus, tiny_marian_dir, batch_size=2, pause_per_batch=0.1), enqueue=False
    )
    chunk = job.chunks.get(index=0)
    record = _progress_recorder(chunk)
    seen = []

    def progress(done, total):  # the operator cancels while the first batches decode
        seen.append((done, total))
        if done:
            job_cancel(job_id=job.pk)
        record(done, total)

    with pytest.raises(JobCancelled):
        run_chunk(job, chunk, progress)
    done, total = seen[-1]
    assert 0 < done < total  # stopped at a batch boundary (the recorder checks at most every 0.5 s), not the end
    assert not get_storage().exists(candidate_shard_key(job.pk, 0)) and not ResourceShard.objects.exists()


def test_a_cancel_while_a_batch_decodes_ends_the_chunk_inside_the_batch(corpus, tiny_marian_dir):
    """Issue 46: the decoder's stop check reads the job's cancel (no progress report needed): the chunk ends
    as cancelled before its first batch is decoded, and writes nothing."""
    from jobs.execution import JobCancelled, job_cancel

    job = job_start(kind=KIND, params=_params(corpus, tiny_marian_dir, batch_size=64), enqueue=False)
    chunk = job.chunks.get(index=0)
    seen = []

    def progress(done, total, stage=None):  # the operator cancels as the chunk starts its first batch
        seen.append((done, total))
        job_cancel(job_id=job.pk)

    with pytest.raises(JobCancelled):
        run_chunk(job, chunk, progress)
    assert seen == [(0, seen[0][1])] and seen[0][1] > 0  # no batch came to its end
    assert not get_storage().exists(candidate_shard_key(job.pk, 0)) and not ResourceShard.objects.exists()


def test_a_bitext_corpus_decodes_the_source_under_the_references_constraints(
    tmp_path, storage_dir, tiny_marian, tiny_marian_dir
):
    from generation.decoding import decode

    pairs = [
        ("how often do earthquakes occur today", "the cat sat on the mat"),
        ("the red sun was in the sky", "a dog runs in the house"),
    ]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{r}\n" for s, r in pairs))
    corpus = corpus_import(ImportCorpusParams(name="tiny-bitext", path=path, format="bitext"))
    key = "idf/tiny-bitext.tsv"
    with get_storage().open_write(key) as fh:
        fh.write("".join(f"{w}\t{_idf_value(w)}\n" for s, r in pairs for w in r.split()).encode())
    idf = {w: _idf_value(w) for _, r in pairs for w in r.split()}
    IdfTable.objects.create(corpus=corpus, name="tiny-bitext", key=key, n_documents=2, n_types=len(idf))
    job = job_run_inline(
        job_id=job_start(
            kind=KIND, params={**_params(corpus, tiny_marian_dir, systems=[17, 28]), "batch_size": 1}, enqueue=False
        ).pk
    )
    assert job.status == JobStatus.SUCCEEDED, job.error

    def best(text):
        return decode(tiny_marian, [text], beam=3, nbest=1, max_length=16, batch_size=1)[0].outputs[0]["text"]

    assert any(best(s) != best(r) for s, r in pairs)  # so that decoding the wrong side would show
    for record, (source, reference) in zip(_records(job), pairs):
        assert (record["source"], record["reference"]) == (source, reference)
        baseline = [c for c in record["candidates"] if "28" in c["systems"]]
        assert [c["text"] for c in baseline] == [best(source)]
        [s17] = [c["constraints"]["17"] for c in record["candidates"] if "17" in c["systems"]]
        selected = select_for_all_systems(reference, idf, seed=1, systems=[17])[0].to_json()
        assert s17["negative"] == selected["negative"] and s17["negative"]  # chosen from the reference
