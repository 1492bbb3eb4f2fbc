"""A batch's making is one parameters class (``annotation.batches.params.BatchParams``, issue 38): the command's
options, the admin's batch form and the API's body are built from it or held to it, and its checks are the
ones ``hit_batch_create`` has always made, whoever makes it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from annotation.admin import BatchForm
from annotation.batches.params import PROVIDER_NAMES, BatchError, BatchParams
from annotation.management.commands.create_hit_batch import Command as CreateHitBatch
from annotation.web.serializers import BatchCreateInSerializer
from jobs.params import field_names, from_values


def test_the_command_offers_every_field_but_provider_and_settings_under_its_old_names():
    parser = argparse.ArgumentParser()
    CreateHitBatch().add_arguments(parser)
    options = [a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help"]
    assert options == [
        "--job",
        "--campaign",
        "--provider",
        "--per-length",
        "--lengths",
        "--assignments",
        "--attention-rate",
        "--degraded-rate",
        "--seed",
        "--baseline",
        "--baseline-system",
        "--label",
        "--batch-settings",
        "--publish",
    ]
    parsed = vars(parser.parse_args(["--job", "1"]))
    made = from_values(BatchParams, parsed, provider="local")
    assert made == BatchParams(provider="local")  # nothing given: the class's defaults, as before


def test_the_admin_form_and_the_api_take_the_same_settings():
    form_only = {"attention_pass_mark", "reward_usd", "reward_per_session", "hits_per_session"}
    form_only |= {"estimated_minutes", "countries", "first_languages", "raters_at_once"}
    offered = {f.name for f in dataclasses.fields(BatchParams) if f.metadata["param"]["form"]}
    assert set(BatchForm.base_fields) - form_only == offered
    api = set(BatchCreateInSerializer().fields) - {"settings"}
    assert api == offered and api <= set(field_names(BatchParams))
    assert list(BatchForm.base_fields["provider"].choices) == [(p, p) for p in PROVIDER_NAMES]


@pytest.mark.parametrize(
    "given,message",
    [
        ({"per_length": 0}, "--per-length must be at least 1"),
        ({"assignments": 0}, "--assignments must be at least 1"),
        ({"attention_rate": 1.5}, "--attention-rate must be between 0 and 1"),
        ({"degraded_rate": True}, "--degraded-rate must be between 0 and 1"),
        ({"degraded_rate": 0.2, "settings": {"degraded_rate": 0.3}}, "disagree"),
        ({"hit_size": 1}, "a HIT needs at least 2 candidates"),
        ({"lengths": ()}, "no length buckets given"),
        ({"provider": "crowdflower"}, "unknown provider"),
        ({"settings": {"reward_usd": "abc"}}, "'reward_usd': expected an amount"),
        ({"label": "a\u202eb"}, "U\\+202E"),
    ],
)
def test_a_params_object_that_cannot_make_a_batch_is_refused_when_made(given, message):
    with pytest.raises(BatchError, match=message):
        BatchParams(**{"provider": "local", **given})


def test_made_params_hold_what_applies():
    made = BatchParams(provider="local", lengths=[5, "10"], settings={"degraded_rate": "0.25", "lifetime_s": "60"})
    assert made.lengths == (5, 10) and made.degraded_rate == 0.25 and made.settings["lifetime_s"] == 60
    assert BatchParams(provider="local").degraded_rate == 0.1
