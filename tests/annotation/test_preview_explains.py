"""What the batch form's Preview tells a researcher (issue 37.7): Publish's refusal of a crowd batch without an
https address, why the form's defaults make so few HITs, checks counted in plain English, a Prolific session
never longer than the batch, and a first preview that does not load spaCy once the campaign's words are known."""

from __future__ import annotations

import re

import pytest

import annotation.batches.preview
from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.batches.preview import PlannedBatch, batch_preview
from annotation.campaigns.sample import words_warm
from annotation.models import Batch, Candidate, Reference

from .builders import sample_campaign
from .test_batches import CORPUS, NON_WORD_CANDIDATES

pytestmark = pytest.mark.django_db

DEFAULTS = {
    "provider": "local",
    "per_length": "100",
    "lengths": "5,10,20,40",
    "assignments": "3",
    "attention_rate": "0.1",
    "degraded_rate": "0.1",
    "seed": "0",
    "label": "",
}


def preview(client, campaign, **change) -> str:
    page = client.post(f"/admin/annotation/campaign/{campaign.pk}/batch/", {**DEFAULTS, **change, "preview": "1"})
    assert page.status_code == 200
    text = " ".join(re.sub(r"<[^>]+>", " ", page.content.decode()).split())
    assert "Preview (nothing made yet)" in text, text[-3000:]
    return text.replace("&#x27;", "'")


def demo_like():
    """The quick start's sample: 3 references of 5, 10 and 20 tokens, none of 40."""
    return sample_campaign(buckets=(5, 10, 20), refs_per_bucket=3, candidates=4)


@pytest.mark.parametrize("provider", ["prolific", "mturk-sandbox"])
def test_a_crowd_batch_without_an_https_address_is_previewed_with_publishs_refusal_said(
    admin_client, settings, provider
):
    settings.PARAFORGE_PUBLIC_URL = ""
    campaign = demo_like()
    text = preview(admin_client, campaign, provider=provider, reward_usd="0.10", reward_per_session="1.50")
    assert "Publish will refuse this batch until it has an https public address" in text
    assert "You can still design, preview and create the draft" in text
    settings.PARAFORGE_PUBLIC_URL = "https://paraforge.example.org"
    assert "Publish will refuse" not in preview(
        admin_client, campaign, provider=provider, reward_usd="0.10", reward_per_session="1.50"
    )
    assert "Publish will refuse" not in preview(admin_client, campaign)  # local annotators need no address
    assert not Batch.objects.exists()


def test_the_form_defaults_on_a_small_sample_say_why_they_make_nine_hits(admin_client):
    campaign = demo_like()
    text = preview(admin_client, campaign)
    assert "9 HITs x 3 assignments" in text
    assert (
        "100 references per length bucket asked; the campaign has 3 of 5 tokens, 3 of 10 tokens, 3 of 20 tokens "
        "and 0 of 40 tokens, so the batch takes 9 references. Their 36 candidates fill 9 HITs of up to 5 "
        "sentences" in text
    )
    # a sample that has enough: what was asked for
    enough = preview(admin_client, campaign, per_length="2", lengths="5,10")
    assert "2 references per length bucket asked: 4 references. Their 16 candidates fill 4 HITs" in enough


def test_checks_are_counted_in_plain_english(admin_client, monkeypatch):
    campaign = demo_like()
    several = preview(admin_client, campaign, attention_rate="1", degraded_rate="0")
    assert "9 attention checks and 0 degraded checks" in several
    # one HIT with one check of each kind (whichever checks the batch rules can place): the counts' words
    plan = PlannedBatch(
        hits=1, real_candidates=3, attention_checks=1, degraded_checks=1, cost=None, currency="USD", places=None
    )
    monkeypatch.setattr(annotation.batches.preview, "batch_plan", lambda **kwargs: plan)
    one = preview(admin_client, campaign, assignments="1")
    assert "1 HIT x 1 assignment: 3 candidates judged 1 time each, 1 attention check and 1 degraded check" in one


def test_a_prolific_session_is_never_longer_than_the_batch(admin_client, settings):
    settings.PROLIFIC_HITS_PER_SESSION = 10
    campaign = demo_like()
    text = preview(admin_client, campaign, provider="prolific", reward_per_session="1.50", hits_per_session="10")
    assert "A Prolific session is 9 HITs, not the 10 asked: the batch has only 9 HITs" in text
    assert "3 Prolific places" in text  # 9 HITs x 3 assignments / 9 per session
    batch = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="prolific", settings={"hits_per_session": 10})
    )
    assert batch.hits.count() == 9 and batch.settings["hits_per_session"] == 9
    default = hit_batch_create(campaign=campaign, params=BatchParams(provider="prolific"))  # the default of 10 too
    assert default.settings["hits_per_session"] == 9
    small = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="prolific", settings={"hits_per_session": 4})
    )
    assert small.settings["hits_per_session"] == 4  # a shorter session is the researcher's choice
    assert "A Prolific session is 4 HITs in a row." in preview(
        admin_client, campaign, provider="prolific", reward_per_session="1.50", hits_per_session="4"
    )


def test_the_first_preview_does_not_load_spacy_once_the_campaigns_words_are_cached(tmp_path, storage_dir, monkeypatch):
    from annotation.models import Campaign, CandidateSystem
    from generation.corpus.corpora import ImportCorpusParams, corpus_import
    from jobs.execution import job_run_inline, job_start
    from jobs.models import Job

    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="small", path=path, format="mono"))
    assert job_run_inline(job_id=job_start(kind="build_idf", params={"corpus": corpus.pk}, enqueue=False).pk)
    job = Job.objects.create(kind="generate", params={"corpus": corpus.pk}, status="succeeded")
    campaign = Campaign.objects.create(name="generated", job=job)
    texts = []
    for i, (text, outputs) in enumerate(NON_WORD_CANDIDATES.items()):
        ref = Reference.objects.create(campaign=campaign, ref_id=str(i), length_bucket=5, text=text)
        texts.append(text)
        for k, output in enumerate(outputs):
            CandidateSystem.objects.create(candidate=Candidate.objects.create(reference=ref, text=output), system=k)
            texts.append(output)
    words_warm(texts)  # what campaign_from_sample does in the generate job's worker

    import generation.nlp

    def no_spacy(*args, **kwargs):
        raise AssertionError("the preview loaded spaCy")

    monkeypatch.setattr(generation.nlp, "load_pipeline", no_spacy)
    shown = batch_preview(
        campaign=campaign, params=BatchParams(provider="local", lengths=(5,), attention_rate=0, degraded_rate=0)
    )
    assert shown.plan.left_out == 3  # the same non-words as the tokenizer finds
    assert "(3 left out for non-words)" in shown.plan.sample_note
