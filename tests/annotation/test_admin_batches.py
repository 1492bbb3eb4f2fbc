import pytest

from annotation.batches import hit_batch_create
from annotation.models import Batch, BatchStatus

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


def test_create_batch_action_shows_a_form_then_makes_a_draft(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    url = "/admin/annotation/campaign/"
    page = admin_client.post(url, {"action": "create_hit_batch", "_selected_action": [campaign.pk]})
    assert page.status_code == 200 and "Create draft batch" in page.content.decode()
    assert not Batch.objects.exists()
    bad = admin_client.post(
        url, {"action": "create_hit_batch", "_selected_action": [campaign.pk], "confirm": "yes", **FORM, "lengths": "x"}
    )
    assert bad.status_code == 200 and not Batch.objects.exists()
    done = admin_client.post(
        url, {"action": "create_hit_batch", "_selected_action": [campaign.pk], "confirm": "yes", **FORM}
    )
    assert done.status_code == 302
    batch = Batch.objects.get()
    assert batch.status == BatchStatus.DRAFT and batch.label == "pilot" and batch.hits.count() == 2


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
    page = admin_client.post(
        "/admin/annotation/campaign/",
        {"action": "create_hit_batch", "_selected_action": [campaign.pk], "confirm": "yes", **FORM, field: value},
    )
    assert page.status_code == 200 and "digits 0-9" in page.content.decode() and not Batch.objects.exists()


def test_publish_shows_the_cost_preview_before_anything_is_spent(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5)
    paid = hit_batch_create(
        campaign=campaign, provider="mturk-sandbox", attention_rate=0, settings={"reward_usd": "0.50"}
    )
    page = admin_client.post("/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [paid.pk]})
    text = page.content.decode()
    assert page.status_code == 200 and "Publish now" in text
    assert "1.80" in text  # 1 HIT x 3 assignments x $0.50 x 1.2 (MTurk's fee)
    assert Batch.objects.get(pk=paid.pk).status == BatchStatus.DRAFT
    local = hit_batch_create(campaign=campaign, provider="local")
    page = admin_client.post("/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [local.pk]})
    assert "nothing is spent" in page.content.decode()
    admin_client.post(
        "/admin/annotation/batch/", {"action": "publish_batches", "_selected_action": [local.pk], "confirm": "yes"}
    )
    assert Batch.objects.get(pk=local.pk).status == BatchStatus.PUBLISHED
    admin_client.post("/admin/annotation/batch/", {"action": "expire_batches", "_selected_action": [local.pk]})
    assert not local.hits.filter(expires_at__isnull=True).exists()
