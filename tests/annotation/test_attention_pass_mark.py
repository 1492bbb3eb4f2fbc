"""Issue 37: the attention check's pass mark is a stated batch setting (default 85: a tap near 100 on a phone
passes), checked like every batch setting, shown on the researcher's form and preview, and held against each
check by its own batch; a batch made before the setting existed keeps its campaign's pass mark (100)."""

from __future__ import annotations

import pytest

from annotation.batch_settings import ATTENTION_PASS_MARK_DEFAULT, BatchSettingsError, batch_settings_clean
from annotation.batches.making import BatchError, hit_batch_create
from annotation.batches.params import BatchParams
from annotation.hits.submissions import JudgmentInput, assignment_submit
from annotation.hits.tokens import submission_token_make
from annotation.models import Batch, Worker
from annotation.quality.workers import campaign_rater_figures, worker_quality, workers_quality

from .builders import platform_confirms, published_batch, sample_campaign
from .test_admin_batches import FORM, form_url

pytestmark = pytest.mark.django_db


def test_the_pass_mark_is_a_checked_batch_setting():
    assert ATTENTION_PASS_MARK_DEFAULT == 85
    assert batch_settings_clean({"attention_pass_mark": "95"}) == {"attention_pass_mark": 95}
    for bad in (101, -1, "ninety", 92.5, True):
        with pytest.raises(BatchSettingsError, match="attention_pass_mark"):
            batch_settings_clean({"attention_pass_mark": bad})


def test_a_new_batch_states_its_pass_mark():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=4)
    made = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", attention_rate=1.0))
    assert made.settings["attention_pass_mark"] == 85  # the default, written down with the batch
    exact = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", settings={"attention_pass_mark": 100})
    )
    assert exact.settings["attention_pass_mark"] == 100
    with pytest.raises(BatchError, match="attention_pass_mark"):
        hit_batch_create(campaign=campaign, params=BatchParams(provider="local", settings={"attention_pass_mark": 150}))


def submit(hit, worker: str, aid: str, copy_score: int) -> None:
    judgments = [
        JudgmentInput(candidate=i.candidate_id, score=copy_score if i.is_attention_check else 40, fluency=2)
        for i in hit.items.all()
    ]
    assignment_submit(
        hit=hit,
        assignment_id=aid,
        worker_id=worker,
        judgments=judgments,
        token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker),
    )
    platform_confirms(aid)


def test_each_check_is_held_against_its_own_batchs_pass_mark_and_old_batches_keep_the_campaigns():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=4, settings={"attention_pass_mark": 100})
    old = published_batch(campaign, attention_rate=1.0, degraded_rate=0, seed=1)
    settings = dict(old.settings)
    del settings["attention_pass_mark"]  # a batch made before the pass mark was a batch setting
    Batch.objects.filter(pk=old.pk).update(settings=settings)
    new = published_batch(campaign, attention_rate=1.0, degraded_rate=0, seed=2)
    assert new.settings["attention_pass_mark"] == 85
    submit(old.hits.first(), "W1", "A-old", 95)  # fails: the old batch passes only 100, its campaign's mark
    submit(new.hits.first(), "W1", "A-new", 95)  # passes: near 100 on the new batch
    worker = Worker.objects.get(external_id="W1")
    one = worker_quality(worker=worker, campaign=campaign)
    assert (one.attention_passed, one.attention_failed) == (1, 1)
    many = workers_quality([worker])[worker.pk]
    assert (many.attention_passed, many.attention_failed) == (1, 1)
    (rater,) = campaign_rater_figures(campaign)
    assert (rater.attention_passed, rater.attention_failed) == (1, 1)


def test_the_researchers_form_states_the_pass_mark_checks_its_digits_and_stores_it(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=4)
    page = admin_client.get(form_url(campaign)).content.decode()
    assert 'name="attention_pass_mark" value="85"' in page and "an attention copy passes" in page
    bad = admin_client.post(form_url(campaign), {**FORM, "attention_pass_mark": "\u0669\u0665"})  # Arabic-Indic 95
    assert "digits 0-9" in bad.content.decode() and not Batch.objects.exists()
    above = admin_client.post(form_url(campaign), {**FORM, "attention_pass_mark": "101"})
    assert "less than or equal to 100" in above.content.decode() and not Batch.objects.exists()
    shown = admin_client.post(
        form_url(campaign), {**FORM, "attention_rate": "1", "attention_pass_mark": "95", "preview": "1"}
    )
    text = " ".join(shown.content.decode().split())
    assert 'id="preview-attention">a copy of the reference passes when its slider reaches <strong>95</strong>' in text
    assert not Batch.objects.exists()
    admin_client.post(form_url(campaign), {**FORM, "attention_pass_mark": "95", "create": "1"})
    assert Batch.objects.get().settings["attention_pass_mark"] == 95
    admin_client.post(form_url(campaign), {**FORM, "attention_pass_mark": "", "create": "1"})  # empty: the default
    assert Batch.objects.order_by("-pk").first().settings["attention_pass_mark"] == 85
