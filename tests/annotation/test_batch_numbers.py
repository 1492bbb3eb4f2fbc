"""Issue 36, item 6: every number a person types (the admin's batch form, the API's batch settings, the
command line) is written in digits 0-9 (``api.numbers``): ``١٨٠٠`` and ``1_800``, which ``int()`` takes,
are refused with a clear error. Item 7 (part): a batch label takes no control or bidirectional characters,
whichever way it comes in."""

from __future__ import annotations

import argparse
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class

from annotation.batch_settings import BatchSettingsError, batch_label_check, batch_settings_clean, length_buckets
from annotation.models import Batch
from jobs.models import Job

from .builders import sample_campaign
from .test_admin_batches import FORM, form_url

pytestmark = pytest.mark.django_db

ARABIC_1800 = "\u0661\u0668\u0660\u0660"  # ١٨٠٠
NOT_ASCII = [ARABIC_1800, "1_800", "\u00b9\u2078", "\uff11\uff18\uff10\uff10", "1800.0x", " ", "nan"]


@pytest.mark.parametrize("value", NOT_ASCII)
def test_batch_settings_take_numbers_in_digits_0_9_only(value):
    for key in ("assignment_duration_s", "lifetime_s", "hits_per_session", "min_approval_rate"):
        with pytest.raises(BatchSettingsError, match=f"'{key}'.*digits 0-9"):
            batch_settings_clean({key: value})
    for key in ("attention_rate", "degraded_rate"):
        with pytest.raises(BatchSettingsError, match="digits 0-9"):
            batch_settings_clean({key: value.replace("1800", "0.5") if value.isascii() else value})
    with pytest.raises(BatchSettingsError, match="digits 0-9"):
        batch_settings_clean({"reward_usd": value})
    with pytest.raises(BatchSettingsError, match="digits 0-9"):
        batch_settings_clean({"easl": {"judgment_budget": value}})


def test_batch_settings_still_take_ascii_strings_and_json_numbers():
    cleaned = batch_settings_clean(
        {"assignment_duration_s": " 1800 ", "lifetime_s": 3600, "attention_rate": "0.25", "reward_usd": "0.50"}
    )
    assert cleaned["assignment_duration_s"] == 1800 and cleaned["lifetime_s"] == 3600
    assert cleaned["attention_rate"] == 0.25
    for amount in ("0_50", "\u0660.\u0665\u0660"):
        with pytest.raises(BatchSettingsError, match="reward_per_session.*digits 0-9"):
            batch_settings_clean({"reward_per_session": amount})


def test_length_buckets_are_ascii_whole_numbers_in_range():
    assert length_buckets(" 5, 10,20 ,40") == (5, 10, 20, 40)
    for text in ("\u0665,\u0661\u0660", "1_0,20", "5,x", "", ",", "0,5", "5," * 21, "5,1001", "9" * 5000):
        with pytest.raises(BatchSettingsError, match="comma-separated integers") as err:
            length_buckets(text)
        assert len(str(err.value)) < 300


def test_the_admin_batch_form_refuses_unicode_digits_and_underscores_in_the_lengths(admin_client):
    campaign = sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5)
    for lengths in ("\u0665,\u0661\u0660", "1_0", "5,1_0"):
        page = admin_client.post(form_url(campaign), {**FORM, "lengths": lengths, "create": "Create draft batch"})
        assert page.status_code == 200 and "digits 0-9" in page.content.decode(), lengths
    assert not Batch.objects.exists()
    done = admin_client.post(form_url(campaign), {**FORM, "lengths": "5,10", "create": "Create draft batch"})
    assert done.status_code == 302 and Batch.objects.get().settings["lengths"] == [5, 10]


BATCH = {"provider": "local", "per_length": 2, "lengths": [5], "assignments": 2, "attention_rate": 0, "seed": 3}


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("value", [ARABIC_1800, "1_800"])
def test_the_api_refuses_unicode_digits_and_underscores_in_batch_settings(admin_client, value):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    url = f"/api/campaigns/{campaign.pk}/batches/"
    refused = post(admin_client, url, {**BATCH, "settings": {"assignment_duration_s": value}})
    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert body["code"] and "assignment_duration_s" in body["detail"] and "digits 0-9" in body["detail"]
    assert not Batch.objects.exists()
    made = post(admin_client, url, {**BATCH, "settings": {"assignment_duration_s": "1800"}})
    assert made.status_code == 201 and Batch.objects.get().settings["assignment_duration_s"] == 1800


def run_cli(*args) -> dict:
    out = StringIO()
    call_command("create_hit_batch", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    "option,value",
    [
        ("--per-length", "\u0662"),
        ("--per-length", "1_0"),
        ("--assignments", "\u0662"),
        ("--attention-rate", "\u0660.\u0661"),
        ("--attention-rate", "1_0e-1"),
        ("--seed", "1_0"),
        ("--lengths", "\u0665"),
        ("--lengths", "1_0"),
    ],
)
def test_create_hit_batch_refuses_unicode_digits_and_underscores(option, value):
    job = Job.objects.create(kind="generate", label="g")
    sample_campaign(buckets=(5, 10), refs_per_bucket=2, candidates=5, job=job)
    with pytest.raises(CommandError, match="digits 0-9"):
        run_cli("--job", str(job.pk), "--provider", "local", option, value)
    assert not Batch.objects.exists()


def test_no_command_line_option_parses_numbers_with_int_or_float():
    """Every command's number options use ``api.numbers.cli_int`` / ``cli_float``, never ``int`` or ``float``
    (which take ``١٢`` and ``1_000``), subcommands included."""

    def actions(parser):
        for action in parser._actions:
            yield action
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from actions(sub)

    lax = []
    for name, app in get_commands().items():
        if app.split(".")[0] not in (
            "annotation",
            "api",
            "config",
            "frontend",
            "generation",
            "infra",
            "jobs",
            "scoring",
        ):
            continue  # (Django's and other libraries' commands are theirs)
        parser = load_command_class(app, name).create_parser("manage.py", name)
        lax += [
            f"{name} {a.option_strings or a.dest}"
            for a in actions(parser)
            if a.type in (int, float) and a.dest != "verbosity"  # (Django's own: one of 0-3)
        ]
    assert lax == []


BAD_LABELS = ["pilot\u202e1", "a\nb", "\x1b[31mred", "a\u2066b\u2069", "zero\u200bwidth", "bell\x07", "line\u2028two"]


def test_a_label_is_plain_text():
    assert batch_label_check("Lot d'\u00e9t\u00e9 \u2014 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") != ""
    for label in BAD_LABELS:
        with pytest.raises(BatchSettingsError, match=r"label: U\+[0-9A-F]{4}") as err:
            batch_label_check(label)
        assert label not in str(err.value)
    with pytest.raises(BatchSettingsError, match="label"):
        batch_label_check("x" * 201)


def test_the_admin_refuses_a_label_with_control_or_bidirectional_characters(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    for label in ("pilot\u202e1", "\x1b[31mred", "a\u2066b"):
        page = admin_client.post(form_url(campaign), {**FORM, "label": label, "create": "Create draft batch"})
        assert page.status_code == 200 and "is not allowed" in page.content.decode(), label
    assert not Batch.objects.exists()


def test_the_api_refuses_a_label_with_control_or_bidirectional_characters(admin_client):
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5)
    for label in BAD_LABELS:
        refused = post(admin_client, f"/api/campaigns/{campaign.pk}/batches/", {**BATCH, "label": label})
        assert refused.status_code == 400, (label, refused.content)
        assert refused.json()["code"] and "is not allowed" in json.dumps(refused.json()), refused.json()
    assert not Batch.objects.exists()


def test_create_hit_batch_refuses_a_label_with_control_or_bidirectional_characters():
    job = Job.objects.create(kind="generate", label="g")
    sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=5, job=job)
    for label in ("pilot\u202e1", "a\nb"):
        with pytest.raises(CommandError, match="is not allowed"):
            run_cli("--job", str(job.pk), "--provider", "local", "--lengths", "5", "--label", label)
    assert not Batch.objects.exists()


@pytest.mark.parametrize("typed", ["\u00b2", "\u0661", "9" * 5000, "9" * 25])
def test_a_name_or_id_that_is_no_ascii_id_is_not_found_rather_than_a_crash(storage_dir, typed):
    """``named_or_numbered`` (every command's corpus, IDF table or resource argument) read ``"²"`` as an id."""
    with pytest.raises(CommandError, match="no resource named or numbered"):
        call_command("score_resource", typed, "--regressor", "x")


@pytest.mark.parametrize("command", [("mturk", "bonus", "some-assignment"), ("crowd", "bonus", "1")])
@pytest.mark.parametrize("amount", ["\u0661.50", "1_0", "nan", "0.25x"])
def test_a_bonus_amount_is_written_in_digits_0_9(command, amount):
    """A bonus is money: ``Decimal("١.50")`` is 1.50, so the amount is refused before any platform is asked."""
    with pytest.raises(CommandError, match="amount must be an amount written in digits 0-9"):
        call_command(*command, amount, "thanks")


@pytest.mark.parametrize("assignment", ["\u00b2", "9" * 5000, "99999999999999999999"])
def test_an_mturk_assignment_that_is_no_ascii_id_is_not_found_rather_than_a_crash(assignment):
    with pytest.raises(CommandError, match="no MTurk assignment"):
        call_command("mturk", "bonus", assignment, "0.25", "thanks")
