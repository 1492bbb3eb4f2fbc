"""Issue 41, the release: a release leaves out what a HIT batch leaves out (non-words, copies) by the one rule of
``generation.screening``, counts it on the card and in the manifest, keeps it only when asked (marked, unscored),
and marks every pair the regressor cannot score honestly (non-words kept, references longer than it was trained
on) in every format."""

from __future__ import annotations

import gzip
import json

import pytest
from django.core.management import CommandError

from annotation.batches.making import non_word_screen
from annotation.models import Campaign, Candidate, CandidateSystem, Reference
from generation.screening import is_copy, screen_verdicts, screen_vocabulary
from jobs.execution import job_run_inline, job_start
from jobs.models import Job, JobStatus

from .resource_data import OverlapScorer, build_resource, make_regressor, record, score_with
from .test_releases import export, tsv_rows

pytestmark = pytest.mark.django_db

# the corpus the resource was generated from: "finding" and "harming" are not in it (as in the demo corpus)
CORPUS = [
    "Ryanair chief praises report on airline safety.",
    "Officials call for dialogue after the protest.",
    "The council meets today in the hall.",
    "A man is reaching for the guitar.",
    "Smoking is bad for your health.",
]
RECORDS = [
    (
        "Ryanair chief praises report on airline safety.",
        [
            "Ryanair chief praises report finding",  # "finding": English, not in the corpus: a real paraphrase
            "Ryanair boss praises the safety report.",
            "Ryanair chief praisesing report on airline safety.",  # invented
        ],
    ),
    (
        "Officials call for dialogue after the protest.",
        [
            "Officials call fors dialogue after the protest.",  # "fors": the demo's "call fors dialogue"
            "Officials ask for talks after the protest.",
            "officials call for dialogue after the  protest.",  # a copy: case and spacing only
        ],
    ),
    (
        "Smoking is bad for your health.",
        ["Smoking is harming your health.", "Smoking is reachinging your health."],
    ),
]
NON_WORDS = {
    "Ryanair chief praisesing report on airline safety.",
    "Officials call fors dialogue after the protest.",
    "Smoking is reachinging your health.",
}
COPY = "officials call for dialogue after the  protest."
# "fors" is also one character from its reference: a near-copy, left out even when non-words are kept
NEAR_COPY = "Officials call fors dialogue after the protest."
KEPT_NON_WORDS = NON_WORDS - {NEAR_COPY}


@pytest.fixture
def screened(storage_dir, tmp_path):
    """A resource generated from a corpus whose IDF table build_idf counted, scored, and a campaign of the same
    references and candidates (its generate job names the corpus) for the HIT batch's screen."""
    from generation.corpus.corpora import ImportCorpusParams, corpus_import

    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="news", path=path, format="mono"))
    idf = job_run_inline(job_id=job_start(kind="build_idf", params={"corpus": corpus.pk}, enqueue=False).pk)
    assert idf.status == "succeeded"
    job = Job.objects.create(kind="generate", params={"corpus": corpus.pk}, status=JobStatus.SUCCEEDED)
    records = [record(i, ref, outputs) for i, (ref, outputs) in enumerate(RECORDS)]
    resource = build_resource(name="news-res", shards=[records], job=job, corpus=corpus)
    campaign = Campaign.objects.create(name="news-campaign", job=job)
    for i, (ref, outputs) in enumerate(RECORDS):
        reference = Reference.objects.create(campaign=campaign, ref_id=str(i), length_bucket=5, text=ref)
        for k, text in enumerate(outputs):
            candidate = Candidate.objects.create(reference=reference, text=text)
            CandidateSystem.objects.create(candidate=candidate, system=str(k + 1))
    return score_with(resource, make_regressor(), OverlapScorer())


def released_pairs(folder) -> dict[str, dict]:
    rows = tsv_rows(folder / "pairs.tsv.gz")
    return {r[4]: dict(zip(rows[0], r)) for r in rows[1:]}


def test_the_rule_knows_english_beyond_the_corpus_and_still_catches_invented_words(screened):
    vocabulary, source = screen_vocabulary(screened.resource.corpus)
    assert "IDF table" in source and "wordfreq" in source
    verdicts = screen_verdicts([(ref, text) for ref, outputs in RECORDS for text in outputs], vocabulary)
    flat = [text for _, outputs in RECORDS for text in outputs]
    found = dict(zip(flat, verdicts))
    # "finding" and "harming" are English words, though the corpus lacks them: not non-words any more
    assert found["Ryanair chief praises report finding"] == (None, [])
    assert found["Smoking is harming your health."] == (None, [])
    # what the decoder invents stays a non-word, "fors" (a typo a web crawl has seen) included
    assert found["Officials call fors dialogue after the protest."] == ("non-word", ["fors"])
    assert found["Smoking is reachinging your health."] == ("non-word", ["reachinging"])
    assert found[COPY][0] == "copy" and is_copy(RECORDS[1][0], COPY)
    # a function word with an inflection, though a crawl holds it (the demo's "tos", "buts")
    more = screen_verdicts([("But it has to go.", "Buts it has tos go."), ("It is in.", "It is ins.")], vocabulary)
    assert more == [("non-word", ["buts", "tos"]), ("non-word", ["ins"])]


def test_a_release_leaves_out_what_the_hit_batch_leaves_out_and_counts_it(screened, tmp_path):
    campaign = Campaign.objects.get(name="news-campaign")
    left_out, note = non_word_screen(campaign, list(campaign.references.all()))
    assert {c.text for c in Candidate.objects.filter(pk__in=left_out)} == NON_WORDS
    assert note["left_out"] == 3 and "wordfreq" in note["vocabulary"]

    result = export("news-res", "--out", str(tmp_path / "rel"))
    pairs = released_pairs(tmp_path / "rel")
    assert not NON_WORDS & set(pairs) and COPY not in pairs  # the same pairs the HITs leave out
    assert "Ryanair chief praises report finding" in pairs and "Smoking is harming your health." in pairs
    counts = result["counts"]
    assert (counts["pairs_read"], counts["pairs"], counts["non_words_read"], counts["non_words"]) == (8, 4, 3, 0)
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert manifest["counts"]["non_words_read"] == 3 and "wordfreq" in manifest["screen"]["vocabulary"]
    card = (tmp_path / "rel" / "README.md").read_text()
    assert "| paraphrases with a non-word | 3 | 0 |" in card
    assert "The 3 such pair(s) were left out, as the HIT batches leave them out" in card


def test_keep_non_words_keeps_them_marked_and_unscored_in_every_format(screened, tmp_path):
    with pytest.raises(CommandError, match="disagree"):
        export("news-res", "--out", str(tmp_path / "x"), "--keep-non-words", "--filters", "non_words=drop")
    result = export("news-res", "--out", str(tmp_path / "tsv"), "--keep-non-words")
    assert result["counts"]["non_words"] == 2 and result["counts"]["pairs"] == 6
    assert result["counts"]["near_copies_read"] == 1 and result["counts"]["near_copies"] == 0
    pairs = released_pairs(tmp_path / "tsv")
    assert NEAR_COPY not in pairs
    for text in KEPT_NON_WORDS:  # the regressor's number for a non-word would mean nothing
        assert pairs[text]["score"] == "" and pairs[text]["caveat"] == "non_words"
    fine = pairs["Ryanair boss praises the safety report."]
    assert fine["caveat"] == "" and float(fine["score"]) > 0

    export("news-res", "--out", str(tmp_path / "jsonl"), "--keep-non-words", "--format", "jsonl")
    with gzip.open(tmp_path / "jsonl" / "pairs.jsonl.gz", "rt") as fh:
        jsonl = {p["paraphrase"]: p for line in fh for p in json.loads(line)["paraphrases"]}
    assert {t: (jsonl[t]["score"], jsonl[t]["caveat"]) for t in KEPT_NON_WORDS} == dict.fromkeys(
        KEPT_NON_WORDS, (None, "non_words")
    )
    assert jsonl["Ryanair boss praises the safety report."]["caveat"] is None

    import pyarrow.parquet as pq

    export("news-res", "--out", str(tmp_path / "pq"), "--keep-non-words", "--format", "parquet")
    table = pq.read_table(tmp_path / "pq" / "pairs.parquet").to_pylist()
    parquet = {r["paraphrase"]: r for r in table}
    assert {t: (parquet[t]["score"], parquet[t]["caveat"]) for t in KEPT_NON_WORDS} == dict.fromkeys(
        KEPT_NON_WORDS, (None, "non_words")
    )
    card = (tmp_path / "pq" / "README.md").read_text()
    assert "kept (`--keep-non-words`), each with an empty `score` and the `caveat` `non_words`" in card


def test_the_admin_form_and_the_api_keep_non_words_only_when_asked(screened, admin_client):
    url = f"/api/scored-resources/{screened.pk}/releases/"
    answer = admin_client.post(url, {"version": "v1", "keep_non_words": True}, "application/json")
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(kind="export_release")
    assert "non_words=keep" in job.params["filters"]
    done = job_run_inline(job_id=job.pk)
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert done.result["counts"]["non_words"] == len(KEPT_NON_WORDS)


def test_references_longer_than_any_the_regressor_was_trained_on_are_marked_not_scored(storage_dir, tmp_path):
    training = Campaign.objects.create(name="trained-on")
    Reference.objects.create(campaign=training, ref_id="a", length_bucket=10, text="x " * 10)
    resource = build_resource(name="long-res")  # reference 1 has 12 tokens, the others 7 or 8
    score_with(resource, make_regressor(campaign=training), OverlapScorer())
    export("long-res", "--out", str(tmp_path / "rel"), "--format", "jsonl")
    with gzip.open(tmp_path / "rel" / "pairs.jsonl.gz", "rt") as fh:
        refs = [json.loads(line) for line in fh]
    long = [p for r in refs if r["length"] > 10 for p in r["paraphrases"]]
    short = [p for r in refs if r["length"] <= 10 for p in r["paraphrases"]]
    assert long and all(p["score"] is None and p["caveat"] == "long_reference" for p in long)
    assert short and all(p["score"] is not None and p["caveat"] is None for p in short)
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert manifest["counts"]["long_reference_pairs"] == len(long) and manifest["screen"]["length_limit"] == 10
