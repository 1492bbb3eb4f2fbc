"""The batch-creating API's arguments (issue 37.7): the campaign by name as the CLI takes it, the arguments
that may sit in ``settings`` taken from there or their conflict refused, and a realistic example body in the
API description that can be sent as it is."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from drf_spectacular.generators import SchemaGenerator

from annotation.models import LENGTH_BUCKETS, Batch

from .builders import sample_campaign

pytestmark = pytest.mark.django_db

BATCH = {"provider": "local", "per_length": 2, "lengths": [5], "assignments": 2, "attention_rate": 0, "seed": 3}
PATH = "/api/campaigns/{campaign}/batches/"


@pytest.fixture
def researcher(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_campaign", "add_batch", "view_batch", "change_batch"],
            content_type__app_label="annotation",
        )
    )
    client.force_login(user)
    return client


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("name", ["demo-sample", "pilot 2 / cs-en", "12345678901234567890"])
def test_a_campaign_is_taken_by_its_name_as_the_cli_takes_it(researcher, name):
    campaign = sample_campaign(name, buckets=(5,), refs_per_bucket=2, candidates=5)
    made = post(researcher, PATH.format(campaign=quote(name, safe="")), BATCH)
    assert made.status_code == 201, made.content
    assert Batch.objects.get(pk=made.json()["batch"]["id"]).campaign == campaign
    by_id = post(researcher, PATH.format(campaign=campaign.pk), BATCH)  # the id still works
    assert by_id.status_code == 201 and by_id.json()["batch"]["campaign"] == campaign.pk


def test_an_unknown_campaign_name_is_a_json_404(researcher):
    sample_campaign("known", buckets=(5,), refs_per_bucket=2, candidates=5)
    for missing in ("unknown", "999999", "99999999999999999999"):
        answer = post(researcher, PATH.format(campaign=missing), BATCH)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found" and answer.json()["detail"]
    assert not Batch.objects.exists()


def test_lengths_given_in_settings_are_the_batchs_lengths(researcher):
    campaign = sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5)
    body = {k: v for k, v in BATCH.items() if k != "lengths"}
    made = post(researcher, PATH.format(campaign=campaign.pk), {**body, "settings": {"lengths": [10]}})
    assert made.status_code == 201, made.content
    batch = Batch.objects.get(pk=made.json()["batch"]["id"])
    assert batch.settings["lengths"] == [10]  # was silently [5, 10, 20, 40], the top-level default
    assert set(batch.hits.values_list("reference__length_bucket", flat=True)) == {10}
    # the other recorded arguments too
    made = post(researcher, PATH.format(campaign=campaign.pk), {"provider": "local", "settings": {"per_length": 1}})
    assert Batch.objects.get(pk=made.json()["batch"]["id"]).settings["per_length"] == 1


@pytest.mark.parametrize(
    "change,key",
    [
        ({"lengths": [5], "settings": {"lengths": [10]}}, "lengths"),
        ({"assignments": 3, "settings": {"assignments": 2}}, "assignments"),
        ({"settings": {"lengths": ["x"]}}, "lengths"),
    ],
)
def test_a_conflict_or_a_bad_value_in_settings_is_refused_naming_it(researcher, change, key):
    campaign = sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5)
    refused = post(researcher, PATH.format(campaign=campaign.pk), {**BATCH, **change})
    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
    assert list(refused.json()["errors"]) == [key] and f"settings.{key}" in refused.json()["errors"][key][0]
    assert not Batch.objects.exists()


def test_the_same_value_in_both_places_is_fine(researcher):
    campaign = sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5)
    made = post(researcher, PATH.format(campaign=campaign.pk), {**BATCH, "settings": {"lengths": [5]}})
    assert made.status_code == 201 and Batch.objects.get().settings["lengths"] == [5]


def test_the_descriptions_example_body_is_realistic_and_creates_a_batch(researcher):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    [path] = [p for p in schema["paths"] if p.startswith("/api/campaigns/") and p.endswith("/batches/")]
    content = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    [example] = [e["value"] for e in content["examples"].values()]
    assert set(example["lengths"]) <= set(LENGTH_BUCKETS)  # was [1000]: no campaign has such a bucket
    assert 0 < example["degraded_rate"] < 0.5 and 0 < example["attention_rate"] < 0.5  # was 1: every HIT
    assert example["assignments"] >= 2  # a split-half reliability needs two judgments per candidate
    campaign = sample_campaign(buckets=LENGTH_BUCKETS, refs_per_bucket=2, candidates=7)
    made = post(researcher, PATH.format(campaign=campaign.name), example)
    assert made.status_code == 201, made.content
    assert made.json()["batch"]["hits"] > 0
