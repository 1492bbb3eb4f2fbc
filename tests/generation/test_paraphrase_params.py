"""``ParaphraseParams`` (``generation.paraphrase_params``), made directly: it refuses what ``manage.py paraphrase``
refuses, with and without ``--diverse``, in the command's words, and its options are the command's."""

from __future__ import annotations

import argparse

import pytest

from generation.decode_options import DIVERSE_ONLY, NOT_JOB_OPTIONS, DecodeOptions, DecodeOptionsError, DiverseOptions
from generation.paraphrase_params import NOT_WITH_DIVERSE, ParaphraseParams, ParaphraseParamsError, from_options
from jobs.params import ParamsError, add_arguments, field_names

FILES = {"model": "m", "input": "in.txt", "output": "out.jsonl"}
CLASH = "--diverse samples its own negative constraints: leave out"


def refusal(**settings) -> ParamsError:
    with pytest.raises(ParamsError) as exc:
        ParaphraseParams(**FILES, **settings)
    return exc.value


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"constraints": "c.jsonl", "system": "3", "idf": "i.tsv"}, "give either --constraints or --system, not both"),
        ({"system": "3"}, "--system needs --idf IDF.tsv"),
        ({"system": "3", "idf": ""}, "--system needs --idf IDF.tsv"),
        ({"diverse_options": DiverseOptions(samples=3)}, "--samples needs --diverse"),
        ({"diverse_options": DiverseOptions(allow_non_words=True)}, "--allow-non-words needs --diverse"),
        ({"diverse_options": {"keep": 5}}, "--keep needs --diverse"),  # given at its default: still refused
        ({"diverse": True, "constraints": "c.jsonl"}, f"{CLASH} --constraints"),
        ({"diverse": True, "system": "3", "idf": "i.tsv"}, f"{CLASH} --system"),
        ({"diverse": True, "decode": DecodeOptions(int8=True)}, f"{CLASH} --int8"),
        ({"diverse": True, "decode": DecodeOptions(rerank_dissimilar=True)}, f"{CLASH} --rerank-dissimilar"),
        ({"diverse": True, "diverse_options": {"clusters": 1}}, "--clusters must be at least 2"),
        ({"diverse": True, "seed": -1}, "--seed must be at least 0, not -1"),
        ({"diverse": True, "diverse_options": DiverseOptions(seed=7)}, "--seed is one setting of the command"),
    ],
)
def test_refuses_what_the_command_refuses(settings, message):
    exc = refusal(**settings)
    assert isinstance(exc, (ParaphraseParamsError, DecodeOptionsError))
    assert exc.option_message.startswith(message), exc.option_message
    assert "--" not in str(exc)  # (its own message names the fields: system, diverse, ...)


def test_the_diverse_rules_follow_the_scopes():
    """Every diverse-only setting needs ``diverse``; with it, the constraints and every process knob are refused."""
    for name in DIVERSE_ONLY:
        value = getattr(DiverseOptions(), name)
        value = 1.0 if value is None else value  # (None is "not given"; discourage's default)
        exc = refusal(diverse_options={name: value})
        assert exc.option_message == f"--{name.replace('_', '-')} needs --diverse"
    assert NOT_WITH_DIVERSE == ("constraints", "system")
    for name in NOT_JOB_OPTIONS:
        off_default = {"early_stopping": True}.get(name, not getattr(DecodeOptions(), name))
        exc = refusal(diverse=True, decode=DecodeOptions(**{name: off_default}))
        assert exc.option_message.endswith(f"leave out --{name.replace('_', '-')}")


def test_accepted_settings():
    plain = ParaphraseParams(**FILES, system="3", idf="i.tsv", seed=4, constraints="")
    assert plain.diverse_options is None and plain.constraints is None and plain.seed == 4
    assert ParaphraseParams(**FILES, diverse_options=DiverseOptions()).diverse_options is None  # all defaults: none
    diverse = ParaphraseParams(
        **FILES, diverse=True, seed=9, decode=DecodeOptions(max_length=40, beam=3), diverse_options={"keep": 2}
    )
    assert diverse.diverse_options == DiverseOptions(keep=2, seed=9, max_length=40)
    assert ParaphraseParams(**FILES, diverse=True, backward_model="").backward_model is None
    assert ParaphraseParams(**FILES, diverse=True).diverse_options == DiverseOptions()


def test_from_options_reads_parsed_options_as_the_command_gives_them():
    parser = argparse.ArgumentParser()
    add_arguments(parser, ParaphraseParams)
    parsed = vars(parser.parse_args(["--model", "m", "--input", "i", "--output", "o", "--samples", "0"]))
    with pytest.raises(ParaphraseParamsError) as exc:  # refused for wanting --diverse, not for its value
        from_options(parsed)
    assert exc.value.option_message == "--samples needs --diverse"
    parsed = vars(parser.parse_args(["--model", "m", "--input", "i", "--output", "o", "--diverse", "--keep", "3"]))
    assert from_options(parsed).diverse_options == DiverseOptions(keep=3)
    assert {"model", "constraints", "beam", "diverse", "max_nll", "backward_model", "int8"} <= set(
        field_names(ParaphraseParams)
    )
