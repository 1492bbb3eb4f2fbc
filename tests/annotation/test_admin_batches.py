import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import Assignment, Batch, BatchStatus, Candidate, Hit, Provider, Verification, Worker
from annotation.providers.prolific.study import median_seconds_per_hit, suggested_minutes

from .builders import sample_campaign

pytestmark = pytest.mark.django_db

FORM = {
    "provider": "local",
    "per_length": "2",
    "lengths": "5",
    "assignments": "3",
    "attention_rate": "0",
    "degraded_rate": "0",
    "seed": "4",
    "reward_usd": "0.10",
    "label": "pilot",
}


def form_url(campaign) -> str:
    return f"/admin/annotation/campaign/{campaign.pk}/batch/"


def test_the_changelist_action_shows_the_campaigns_batch_form_which_makes_a_draft(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    url = "/admin/annotation/campaign/"
    action = admin_client.post(url, {"action": "create_hit_batch", "_selected_action": [campaign.pk]})
    assert f'id="batch-form" action="{form_url(campaign)}"' in action.content.decode()  # the same form
    page = admin_client.get(form_url(campaign))
    assert page.status_code == 200 and "Create draft batch" in page.content.decode()
    assert not Batch.objects.exists()
    bad = admin_client.post(form_url(campaign), {**FORM, "lengths": "x"})
    assert bad.status_code == 200 and "comma-separated integers" in bad.content.decode() and not Batch.objects.exists()
    done = admin_client.post(form_url(campaign), {**FORM, "create": "Create draft batch"})
    assert done.status_code == 302 and done["Location"] == "/admin/annotation/batch/"
    batch = Batch.objects.get()
    assert batch.status == BatchStatus.DRAFT and batch.label == "pilot" and batch.hits.count() == 2
    listing = admin_client.get(done["Location"]).content.decode()
    assert f"Draft batch {batch.pk} created with 2 HITs" in listing


@pytest.mark.parametrize(
    "field,value",
    [
        ("per_length", "\u0661\u0662"),
        ("assignments", "\u00b3"),
        ("seed", "1_0"),
        ("attention_rate", "\u0660.\u0661"),
        ("reward_usd", "\u0661.50"),
        ("degraded_rate", "nan"),
    ],
)
def test_the_batch_form_takes_numbers_in_digits_0_9_only(admin_client, field, value):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    page = admin_client.post(form_url(campaign), {**FORM, field: value})
    assert page.status_code == 200 and "digits 0-9" in page.content.decode() and not Batch.objects.exists()


def test_publish_shows_the_cost_preview_before_anything_is_spent(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    paid = hit_batch_create(
        campaign=campaign,
        params=BatchParams(provider="mturk-sandbox", attention_rate=0, settings={"reward_usd": "0.50"}),
    )
    page = admin_client.post("/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [paid.pk]})
    text = page.content.decode()
    assert page.status_code == 200 and "Publish now" in text
    assert "1.80" in text  # 1 HIT x 3 assignments x $0.50 x 1.2 (MTurk's fee)
    assert Batch.objects.get(pk=paid.pk).status == BatchStatus.DRAFT
    local = hit_batch_create(campaign=campaign, params=BatchParams(provider="local"))
    page = admin_client.post("/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [local.pk]})
    assert "nothing is spent" in page.content.decode()
    admin_client.post(
        "/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [local.pk], "confirm": "yes"}
    )
    assert Batch.objects.get(pk=local.pk).status == BatchStatus.PUBLISHED
    admin_client.post("/admin/annotation/batch/", {"action": "expire_batches", "_selected_action": [local.pk]})
    assert not local.hits.filter(expires_at__isnull=True).exists()


def test_the_campaign_page_links_its_dashboard_and_a_create_batch_button(admin_client, client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    page = admin_client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    assert f'href="/research/campaigns/{campaign.pk}/"' in page
    assert f'href="{form_url(campaign)}" id="create-batch"' in page and "Create a HIT batch" in page
    listing = admin_client.get("/admin/annotation/campaign/").content.decode()
    assert f'href="/research/campaigns/{campaign.pk}/"' in listing and f'href="{form_url(campaign)}"' in listing

    # a researcher who may look but not make batches sees no button, and the form is refused
    viewer = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_campaign"))
    client.force_login(viewer)
    page = client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    assert "Dashboard" in page and "Create a HIT batch" not in page
    assert client.get(form_url(campaign)).status_code == 403
    assert client.post(form_url(campaign), {**FORM, "create": "1"}).status_code == 403 and not Batch.objects.exists()
    # no such campaign: a 404, never a 500
    for missing in ("999999", "abc", "1%2F2"):
        assert admin_client.get(f"/admin/annotation/campaign/{missing}/batch/").status_code in (302, 404)


def test_the_form_groups_fields_by_provider_and_shows_them_all_without_javascript(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    page = admin_client.get(form_url(campaign)).content.decode()
    prolific = re.search(r'<fieldset[^>]*data-providers="prolific"[^>]*>(.*?)</fieldset>', page, re.S)
    mturk = re.search(r'<fieldset[^>]*data-providers="mturk-sandbox mturk"[^>]*>(.*?)</fieldset>', page, re.S)
    assert prolific and 'name="reward_per_session"' in prolific[1] and 'name="reward_usd"' not in prolific[1]
    assert mturk and 'name="reward_usd"' in mturk[1]
    assert " hidden" not in page.split('id="batch-form"')[1]  # the server hides nothing: the script does
    assert "frontend/batch-form.js" in page
    # the server still reads only the chosen provider's fields
    admin_client.post(
        form_url(campaign), {**FORM, "reward_per_session": "9.00", "hits_per_session": "4", "create": "1"}
    )
    assert not {"reward_per_session", "hits_per_session", "reward_usd"} & set(Batch.objects.get().settings)


def test_preview_shows_reliability_cost_and_time_and_makes_nothing(admin_client):
    campaign = sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5)
    candidates = Candidate.objects.count()
    design = {**FORM, "provider": "mturk-sandbox", "lengths": "5", "reward_usd": "0.50", "attention_rate": "0.5"}
    page = admin_client.post(form_url(campaign), {**design, "preview": "Preview"})
    text = " ".join(page.content.decode().split())
    assert page.status_code == 200 and "Preview (nothing made yet)" in text
    assert not Batch.objects.exists() and not Hit.objects.exists() and Candidate.objects.count() == candidates
    assert re.search(r"\b3 HITs x 3 assignments: 10 candidates judged 3 times each, 1 attention", text)
    cost = re.search(r'id="preview-cost">([\d.]+) USD', text)
    assert cost and cost[1] == "5.40"  # 3 HITs x 3 assignments x ($0.50 + MTurk's 20%)
    assert "typical values from ParaBank" in text  # no judgment yet: ParaBank's rater noise
    assert "about <strong>3 min</strong>: 60 s per HIT until one is measured" in text  # 3 HITs x 3 x 60 s / 3
    assert "x 3 HITs x 3 assignments, shared by 3 people working at once" in text

    def expected(assignments: str) -> float:
        shown = admin_client.post(form_url(campaign), {**design, "assignments": assignments, "preview": "1"})
        return float(re.search(r"expected <strong>([\d.]+)</strong>", shown.content.decode())[1])

    assert expected("1") < expected("3") < expected("8")
    assert not Batch.objects.exists()
    # what the preview cannot price is an error on the form, not a 500
    bad = admin_client.post(form_url(campaign), {**design, "lengths": "7", "preview": "1"})
    assert bad.status_code == 200 and "No preview: campaign" in bad.content.decode()


def test_prolific_pay_below_the_minimum_is_warned_of(admin_client, settings):
    settings.PROLIFIC_CURRENCY, settings.PROLIFIC_MIN_HOURLY_REWARD = "GBP", "6.00"
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    prolific = {**FORM, "provider": "prolific", "hits_per_session": "10", "estimated_minutes": "10"}
    page = admin_client.post(form_url(campaign), {**prolific, "reward_per_session": "0.50", "preview": "1"})
    text = page.content.decode()
    assert "<strong>3.00 GBP an hour</strong>" in text and "below Prolific's minimum of 6.00 GBP" in text
    assert "raise the reward to at least 1.00 GBP" in text
    fair = admin_client.post(form_url(campaign), {**prolific, "reward_per_session": "2.00", "preview": "1"})
    assert "12.00 GBP an hour" in fair.content.decode() and "below" not in fair.content.decode()
    done = admin_client.post(
        form_url(campaign), {**prolific, "reward_per_session": "0.50", "create": "1"}, follow=True
    ).content.decode()
    assert "Draft batch" in done and "below Prolific&#x27;s minimum of 6.00 GBP" in done


def _timed(campaign, worker: str, seconds: float, *, hit=True, provider="prolific", **fields) -> Assignment:
    worker_row, _ = Worker.objects.get_or_create(provider=provider, external_id=worker)
    done = timezone.now()
    return Assignment.objects.create(
        campaign=campaign,
        hit=Hit.objects.filter(batch__campaign=campaign).first() if hit else None,
        worker=worker_row,
        provider=provider,
        external_assignment_id=f"{worker}-{Assignment.objects.count()}",
        accepted_at=done - timedelta(seconds=seconds),
        submitted_at=done,
        **fields,
    )


def test_the_suggested_session_time_has_a_floor_and_counts_verified_human_timings_only(admin_client, settings):
    settings.PROLIFIC_SECONDS_PER_HIT, settings.PROLIFIC_MIN_SECONDS_PER_HIT = 60, 30
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    hit_batch_create(campaign=campaign, params=BatchParams(provider="prolific", attention_rate=0))
    for _ in range(5):  # a script: 11 s per HIT, verified
        _timed(campaign, "bot", 11)
    assert median_seconds_per_hit() is None  # no human pace measured: the default, never the bot's
    page = admin_client.get(form_url(campaign)).content.decode()
    assert "suggested 10 min for 10 HITs from 60 s per HIT until one is measured" in page
    assert suggested_minutes(hits_per_session=10, seconds_per_hit=11) == 5  # the floor: 30 s per HIT

    _timed(campaign, "human", 90)
    _timed(campaign, "human2", 100)
    _timed(campaign, "human3", 80)
    _timed(campaign, "liar", 600, verification=Verification.FLAGGED)
    _timed(campaign, "slow", 700, verification=Verification.UNVERIFIED)
    _timed(campaign, "imported", 800, hit=False, provider=Provider.IMPORT)
    barred = _timed(campaign, "barred", 900)
    Worker.objects.filter(pk=barred.worker_id).update(disqualified=True)
    assert median_seconds_per_hit() == 90 and median_seconds_per_hit(campaign=campaign) == 90
    page = admin_client.get(form_url(campaign)).content.decode()
    assert "suggested 15 min for 10 HITs from the median of 90 s per HIT of this campaign" in page
