"""The campaign page states the attention pass mark each batch checks at (issue 48): it said 100, the campaign's
setting, while every batch scored its checks at 85."""

import re

import pytest

from annotation.batch_params import BatchParams
from annotation.batches import hit_batch_create
from annotation.models import Batch

from .builders import sample_campaign

pytestmark = pytest.mark.django_db


def pass_mark_row(admin_client, campaign) -> str:
    page = admin_client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    row = re.search(r"<th scope=\"row\">score an attention copy needs to pass</th><td>(.*?)</td>", page)
    assert row, "no pass mark row"
    return row.group(1)


def test_the_campaign_page_shows_each_batchs_own_pass_mark(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    assert pass_mark_row(admin_client, campaign) == "100"  # no batch yet: the campaign's own
    first = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=[5]))
    second = hit_batch_create(campaign=campaign, params=BatchParams(provider="local", per_length=2, lengths=[5]))
    assert Batch.objects.get(pk=first.pk).settings["attention_pass_mark"] == 85  # the batches' default
    shown = pass_mark_row(admin_client, campaign)
    assert shown.startswith(f"85 in batches {first.pk}, {second.pk} (each batch&#x27;s own); 100 for imported")
