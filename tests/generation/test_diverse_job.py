"""``generate --diverse`` (issue 39): ParaBank 2's diverse mode as a generate job. Each reference's kept outputs
become candidates of systems r1 .. rK in rank order, none holding a word of the negative set it was sampled
under; the same seed writes byte-identical shards; a chunk that runs again (a redelivered message, as after a
worker killed mid-chunk) rewrites the same shard and row, each rank once; the evaluation sample becomes a
campaign of those systems; a plain job stores what it always stored.

On the shipped demo model, with few samples per reference so that the CPU runs stay short. The SIGKILL fault
test (test_generation_fault.py) covers the resume machinery itself for any chunk; here the chunk is re-run
through the kind's ``run_chunk``, which is what the resumed worker calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Campaign, CandidateSystem
from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.decode_options import DIVERSE_SHARED, DiverseOptions
from generation.decoding.clustering import PINNED
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key, run_chunk
from generation.generation_job.params import (
    GenerateParams,
    GenerationSettingsError,
    generation_params,
    job_diverse_options,
)
from generation.models import Resource, ResourceShard
from generation.words import words_of
from infra.shards import read_jsonl_gz
from jobs.execution import job_finish, job_run_inline, job_start
from jobs.models import Job, JobStatus
from jobs.params import from_values, to_json

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("one_torch_thread")]

DEMO_MODEL = str(Path(__file__).resolve().parents[2] / "generation" / "demo" / "model")
SENTENCES = [
    "The committee approved the new budget on Monday.",
    "A man is playing a guitar.",
    "Two dogs are running through the snow.",
]
SMALL = {"negative_sets": 2, "samples": 6, "keep": 3, "clusters": 5, "max_length": 40, "seed": 7, "device": "cpu"}
DIVERSE_KEYS = {"text", "nll", "systems", "constraints", "diverse_score", "cluster", "banned"}


@pytest.fixture
def corpus(tmp_path, storage_dir):
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    return corpus_import(ImportCorpusParams(name="diverse-gen", path=path, format="mono", shard_size=2))


def _params(corpus, **values) -> dict:
    return generation_params(
        from_values(GenerateParams, {"corpus": corpus.pk, "model": DEMO_MODEL, "diverse": True, **SMALL, **values})
    )


def _records(job) -> list[dict]:
    return [r for c in job.chunks.order_by("index") for r in read_jsonl_gz(candidate_shard_key(job.pk, c.index))]


def _check_ranked(record: dict, keep: int) -> None:
    """At most ``keep`` candidates, systems r1, r2, ... in rank order (best score first), none holding a banned
    word of its own set, which is its constraints' negative set; nll is the forward NLL (no backward model)."""
    cands = record["candidates"]
    assert 1 <= len(cands) <= keep and record["no_constraints"] == []
    assert [c["systems"] for c in cands] == [[f"r{r}"] for r in range(1, len(cands) + 1)]
    assert [c["diverse_score"] for c in cands] == sorted(c["diverse_score"] for c in cands)
    for c in cands:
        assert set(c) == DIVERSE_KEYS
        [system] = c["systems"]
        assert c["banned"] and not set(words_of(c["text"])) & set(c["banned"]), c
        assert c["constraints"] == {system: {"positive": [], "negative": [[w] for w in c["banned"]], "bos_avoid": []}}
        assert c["nll"] == c["diverse_score"] and 0 < c["nll"] <= 3.5
        assert c["cluster"] != PINNED
    assert len({c["cluster"] for c in cands}) == len(cands)


def test_a_diverse_job_writes_ranked_candidates_and_records_its_settings(corpus):
    params = _params(corpus)
    # stored: the mode and every option of it; no constraint system, IDF table, PPDB file
    assert params["diverse"] is True and "systems" not in params and params["idf_table"] is None
    assert {k: params[k] for k in ("negative_sets", "samples", "keep", "clusters", "seed", "max_length")} == {
        "negative_sets": 2,
        "samples": 6,
        "keep": 3,
        "clusters": 5,
        "seed": 7,
        "max_length": 40,
    }
    assert to_json(from_values(GenerateParams, params)) == params  # the worker's reading is what was stored
    job = job_start(kind=KIND, params=params, enqueue=False)
    assert job.total_chunks == 2
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    records = _records(job)
    assert [r["reference"] for r in records] == SENTENCES
    for record in records:
        _check_ranked(record, keep=3)
    per_system = job.result["per_system"]
    assert list(per_system) == ["r1", "r2", "r3"]
    assert (
        sum(v["outputs"] for v in per_system.values())
        == job.result["pairs"]
        == sum(len(r["candidates"]) for r in records)
    )
    assert per_system["r1"]["outputs"] == len(SENTENCES)
    counts = job.result["diverse"]
    assert counts["sampled"] == len(SENTENCES) * 2 * 6 and counts["violating"] == 0
    assert counts["fewer_than_keep"] == sum(len(r["candidates"]) < 3 for r in records)
    settings = Resource.objects.get(job=job).settings
    assert settings["systems"] == ["r1", "r2", "r3"] and settings["model"] == DEMO_MODEL
    everything = to_json(DiverseOptions(negative_sets=2, samples=6, keep=3, clusters=5))
    assert settings["diverse"] == {k: v for k, v in everything.items() if k not in DIVERSE_SHARED}
    assert {k: settings["diverse"][k] for k in ("negative_sets", "samples", "keep", "clusters", "max_nll")} == {
        "negative_sets": 2,
        "samples": 6,
        "keep": 3,
        "clusters": 5,
        "max_nll": 3.5,
    }
    assert (settings["seed"], settings["max_length"], settings["backward_model"]) == (7, 40, None)

    # the same seed writes byte-identical shards; another seed other outputs
    again = job_run_inline(job_id=job_start(kind=KIND, params=_params(corpus, name="again"), enqueue=False).pk)
    assert [c.result["sha256"] for c in again.chunks.order_by("index")] == [
        c.result["sha256"] for c in job.chunks.order_by("index")
    ]
    other = job_run_inline(job_id=job_start(kind=KIND, params=_params(corpus, name="other", seed=8), enqueue=False).pk)
    assert [r["candidates"] for r in _records(other)] != [r["candidates"] for r in records]


def test_graded_negative_sets_are_a_stored_setting_and_a_job_without_it_decodes_as_before(corpus):
    # a job of today's default stores what a diverse job stored before --ban-spread existed, and reads it back so
    plain = _params(corpus)
    assert "ban_spread" not in plain and job_diverse_options(plain).ban_fractions == [0.3, 0.3]
    graded = _params(corpus, name="graded", ban_spread=0.2)
    assert graded["ban_spread"] == 0.2 and job_diverse_options(graded).ban_fractions == pytest.approx([0.1, 0.5])
    jobs = [job_run_inline(job_id=job_start(kind=KIND, params=p, enqueue=False).pk) for p in (plain, graded)]
    assert [j.status for j in jobs] == [JobStatus.SUCCEEDED] * 2, [j.error for j in jobs]
    settings = [Resource.objects.get(job=j).settings["diverse"] for j in jobs]
    assert "ban_spread" not in settings[0] and settings[1]["ban_spread"] == 0.2  # the card says so when graded
    sizes = [[len({w.lower() for w in c["banned"]}) for r in _records(j) for c in r["candidates"]] for j in jobs]
    assert set(sizes[0]) == {1}  # 0.3 of these three references' 3-5 pool words: one word in every set
    assert 2 in sizes[1]  # graded, the heavier set bans 0.5 of them: two words


def test_a_chunk_run_again_rewrites_the_same_shard_each_rank_once(corpus):
    job = job_run_inline(job_id=job_start(kind=KIND, params=_params(corpus), enqueue=False).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    before = list(read_jsonl_gz(candidate_shard_key(job.pk, 0)))
    row = ResourceShard.objects.get(resource__job=job, index=0)
    chunk = job.chunks.get(index=0)
    result = run_chunk(job, chunk, lambda done, total: None)  # a redelivered message (a worker lost mid-chunk)
    after = list(read_jsonl_gz(candidate_shard_key(job.pk, 0)))
    assert after == before and result["sha256"] == row.sha256 == chunk.result["sha256"]
    assert ResourceShard.objects.filter(resource__job=job).count() == 2
    for record in _records(job):
        systems = [s for c in record["candidates"] for s in c["systems"]]
        assert len(systems) == len(set(systems))  # each rank once
    assert job_finish(job_id=job.pk).result == job.result  # finishing twice changes nothing


def test_a_cancel_while_a_batch_samples_ends_the_chunk_inside_the_batch(corpus):
    """Issue 46: the sampler's stop check reads the job's cancel: the chunk ends as cancelled before its
    first batch is sampled, and writes nothing."""
    from infra.storage import get_storage
    from jobs.execution import JobCancelled, job_cancel

    job = job_start(kind=KIND, params=_params(corpus, batch_size=2), enqueue=False)
    chunk = job.chunks.get(index=0)
    seen = []

    def progress(done, total, stage=None):  # the operator cancels as the chunk starts its first batch
        seen.append((done, total))
        job_cancel(job_id=job.pk)

    with pytest.raises(JobCancelled):
        run_chunk(job, chunk, progress)
    assert seen == [(0, 2)]  # no batch came to its end
    assert not get_storage().exists(candidate_shard_key(job.pk, 0)) and not ResourceShard.objects.exists()


def test_the_evaluation_sample_becomes_a_campaign_of_rank_systems(corpus, capsys):
    call_command(
        "generate",
        "diverse-gen",
        *("--model", DEMO_MODEL, "--diverse", "--negative-sets", "2", "--samples", "6", "--keep", "2"),
        *("--max-length", "40", "--device", "cpu", "--sample-per-length", "1", "--lengths", "5,10", "--wait"),
    )
    out = json.loads(capsys.readouterr().out)
    job = Job.objects.get(pk=out["job"])
    assert out["status"] == "succeeded" and out["sample"] == {"5": 1, "10": 1} and out["references"] == 2
    campaign = Campaign.objects.get(pk=out["campaign"])
    assert "systems r1, r2" in campaign.description
    systems = list(
        CandidateSystem.objects.filter(candidate__reference__campaign=campaign).values_list("system", flat=True)
    )
    assert systems and set(systems) <= {"r1", "r2"} and "r1" in systems
    assert sum(len(r["candidates"]) for r in _records(job)) == len(systems) == out["pairs"]


def test_a_backward_model_adds_to_the_score_and_nll_stays_the_forward_one(corpus):
    params = _params(corpus, backward_model=DEMO_MODEL, max_nll=7, sample_per_length=1, lengths=[10])
    job = job_run_inline(job_id=job_start(kind=KIND, params=params, enqueue=False).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    [record] = _records(job)
    for c in record["candidates"]:
        assert 0 < c["nll"] < c["diverse_score"] <= 7  # the score is the forward NLL plus the backward one
        assert set(c) == DIVERSE_KEYS  # the backward NLL is not stored (the sampler's output gave it once)
    settings = Resource.objects.get(job=job).settings
    assert settings["backward_model"] == DEMO_MODEL
    assert settings["backward_model_sha256"] == settings["model_sha256"] == job.params["backward_model_sha256"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--diverse", "--systems", "28"], "diverse samples its own negative constraints: leave out systems"),
        (["--diverse", "--beam", "8"], "beam is beam search's; diverse samples"),
        (["--systems", "28", "--samples", "6"], "samples needs diverse"),
        (["--diverse", "--samples", "0"], "samples must be at least 1"),
        ([], "give at least one system"),
    ],
)
def test_cli_refuses_what_the_mode_cannot_honour(corpus, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("generate", "diverse-gen", "--model", DEMO_MODEL, *args)
    assert not Job.objects.exists() and not Resource.objects.exists()


def test_a_decoder_only_model_and_backward_model_are_accepted_with_their_templates(corpus, tmp_path):
    """Issue 47: a diverse job's model may be decoder-only (its prompt template stored as a beam search job's
    is), and so may its backward model (read with its own default template, checked when the job is asked for)."""
    from generation.generation_job.params import generate_params_checked
    from tests.generation.causal_models import save_chat_model

    chat = save_chat_model(tmp_path / "chat")
    params = generate_params_checked(
        from_values(GenerateParams, {"corpus": corpus.pk, "model": str(chat), "diverse": True, **SMALL})
    )
    assert params.prompt_template["name"] == "paraphrase-chat"  # the model's default: it has a chat template
    stored = generation_params(params)
    assert stored["prompt_template"] == params.prompt_template and stored["diverse"] is True
    plain = generate_params_checked(
        from_values(
            GenerateParams,
            {"corpus": corpus.pk, "model": str(chat), "diverse": True, "prompt_template": "paraphrase-plain", **SMALL},
        )
    )
    assert plain.prompt_template["name"] == "paraphrase-plain"
    with pytest.raises(GenerationSettingsError, match="prompt_template is for decoder-only models"):
        _params(corpus, prompt_template="paraphrase-plain")
    assert _params(corpus, backward_model=str(chat))["backward_model"] == str(chat)
    assert "prompt_template" not in _params(corpus, backward_model=str(chat))  # (the demo forward model has none)
    assert not Job.objects.exists()


def test_a_diverse_job_on_a_decoder_only_model_writes_ranked_candidates(corpus, tmp_path):
    """``generate --diverse --prompt-template paraphrase-plain`` on a tiny Llama that writes a few words: every
    reference gets its ranks, none holding a word of its negative set, and the same seed writes the same shards."""
    from tests.generation.causal_models import WORDS, save_ending_llama

    llama = str(save_ending_llama(tmp_path / "llama"))
    small = {**SMALL, "negative_sets": 3, "samples": 8, "clusters": 4, "keep": 3}

    def run(name: str):
        values = {"corpus": corpus.pk, "model": llama, "diverse": True, "prompt_template": "paraphrase-plain"}
        params = generation_params(from_values(GenerateParams, {**values, **small, "name": name}))
        assert params["prompt_template"]["name"] == "paraphrase-plain"
        job = job_run_inline(job_id=job_start(kind=KIND, params=params, enqueue=False).pk)
        assert job.status == JobStatus.SUCCEEDED, job.error
        return job

    job = run("llama-diverse")
    records = _records(job)
    assert [r["reference"] for r in records] == SENTENCES
    for record in records:
        _check_ranked(record, keep=3)
        assert len(record["candidates"]) == 3
        assert all(set(words_of(c["text"])) <= set(WORDS) for c in record["candidates"])
    assert job.result["diverse"]["violating"] == 0
    assert Resource.objects.get(job=job).settings["prompt_template"]["name"] == "paraphrase-plain"
    again = run("llama-diverse-again")
    assert [c.result["sha256"] for c in again.chunks.order_by("index")] == [
        c.result["sha256"] for c in job.chunks.order_by("index")
    ]


def test_settings_keep_one_value_of_what_the_mode_shares_and_a_plain_job_stores_none_of_it():
    made = GenerateParams(
        corpus=1,
        model="m",
        diverse=True,
        seed=3,
        decode=from_values(GenerateParams, {"corpus": 1, "model": "m", "systems": [28], "max_length": 40}).decode,
    )
    assert (made.diverse_options.seed, made.diverse_options.max_length) == (3, 40)
    with pytest.raises(GenerationSettingsError, match="seed is one setting"):
        GenerateParams(corpus=1, model="m", diverse=True, seed=3, diverse_options=DiverseOptions(seed=4))
    plain = from_values(GenerateParams, {"corpus": 1, "model": "m", "systems": [28], "max_length": 40, "seed": 2})
    assert plain.diverse_options is None and not plain.diverse
    assert set(to_json(plain)) == {
        "corpus",
        "model",
        "systems",
        "beam",
        "nbest",
        "stop",
        "max_length",
        "length_penalty",
        "batch_size",
        "device",
        "dtype",
        "seed",
        "ppdb",
        "idf_table",
        "sample_chunk_size",
        "pause_per_batch",
    }
