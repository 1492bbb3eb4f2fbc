"""A ban cannot be escaped by gluing the banned word to a function word (issue 47: Gemma 3 270M, banned from
"the", wrote "tothe" and "inthe") or by running it on into no English word (the fine-tuned one, banned from
"with", wrote "withJulia"): the constraint check counts it as the banned word, the decoder does not write
it, and the non-word screen flags it."""

from __future__ import annotations

import pytest

from generation.decoding import decode, from_objects, normalise_constraints, violations
from generation.english import Vocabulary, english_words
from generation.prompts import PromptTemplate
from generation.words import words_of

from .causal_models import constant_causal

RAW = PromptTemplate("raw", "{source}", chat=False, stop_at_newline=False)


@pytest.mark.parametrize(
    ("text", "banned", "violated"),
    [
        ("we went tothe shop", "the", True),
        ("inthe end it rained", "the", True),
        ("ofthe people", "the", True),
        ("a part theof it", "the", True),  # the banned word before a function word
        ("thecat sat", "cat", True),
        ("earthearth", "earth", True),  # glued to itself
        ("therein lies the rub", "in", False),  # words of their own, not "in" glued
        ("a bean and a mean dog", "an", False),
        ("they bathe there", "the", False),
        ("we went to the shop", "the", True),
    ],
)
def test_a_banned_word_glued_to_a_function_word_is_the_banned_word(text, banned, violated):
    assert bool(violations(text, normalise_constraints({"negative": [[banned]]}))) is violated


def test_a_glued_phrase_is_banned_at_its_edges():
    c = normalise_constraints({"negative": [["big", "dog"]]})
    assert violations("thebig dog barked", c) and violations("a big dogis here", c)
    assert not violations("a big hotdog", c)


def _wants_to_earth(**more: float):
    """A model that always wants " to", then the end, then "earth" (no space: "toearth"); ``more``: other
    tokens' scores (the rest at -10)."""
    model, tok = constant_causal({"Ġto": 6.0, "earth": 4.8, "eos": 5.0, **more})
    return from_objects(model, tok, "cpu", prompt_template=RAW)


def test_the_decoder_does_not_write_a_glued_banned_word():
    """Banned from "earth", the search finds other outputs than "toearth" itself; the final check has nothing to
    drop."""
    loaded = _wants_to_earth(Ġdog=1.0)
    [free] = decode(loaded, ["we went"], beam=4, nbest=4, max_length=6)
    assert any("toearth" in words_of(o["text"]) for o in free.outputs)  # what it writes unconstrained
    [r] = decode(loaded, ["we went"], [{"negative": [["earth"]]}], beam=4, nbest=4, max_length=6)
    assert r.outputs and not r.unsatisfiable
    assert r.safety_net_dropped == 0
    for o in r.outputs:
        assert "earth" not in o["text"], o["text"]


@pytest.mark.parametrize(
    ("text", "banned", "violated"),
    [
        ("I am here withJulia today", "with", True),  # what the fine-tuned Gemma wrote under system 15
        ("it is up toyou", "to", True),
        ("we stayed inBali", "in", True),
        ("the shiverss", "shivers", True),  # the demo model's run-on
        ("within the hour, without fail", "with", False),  # English words that begin with the banned word
        ("today and tomorrow", "to", False),
        ("the Within", "with", False),  # a capital: another word, as every ban is case-sensitive
    ],
)
def test_a_banned_word_run_on_into_no_english_word_is_the_banned_word(text, banned, violated):
    assert bool(violations(text, normalise_constraints({"negative": [[banned]]}))) is violated


def test_the_decoder_does_not_run_a_banned_word_on():
    """Banned from "to", the search does not write "toearth" (no English word begins so): it finds other outputs
    itself, and the final check has nothing to drop."""
    loaded = _wants_to_earth()
    [free] = decode(loaded, ["we went"], beam=4, nbest=4, max_length=6)
    assert any("toearth" in words_of(o["text"]) for o in free.outputs)  # what it writes unconstrained
    [r] = decode(loaded, ["we went"], [{"negative": [["to"]]}], beam=4, nbest=4, max_length=6)
    assert r.outputs and r.safety_net_dropped == 0
    written = [words_of(o["text"]) for o in r.outputs]
    assert not [w for ws in written for w in ws if w.startswith("to")], written


def test_a_ban_leaves_the_english_words_that_begin_with_it():
    """Banned from "to", the search may still write "today", and follows the word past it: "to" + "day" +
    "earth" is no English word either, and the final check has nothing to drop."""
    loaded = _wants_to_earth(day=4.5)
    [r] = decode(loaded, ["we went"], [{"negative": [["to"]]}], beam=4, nbest=4, max_length=6)
    assert r.safety_net_dropped == 0
    written = [words_of(o["text"]) for o in r.outputs]
    assert any("today" in ws for ws in written), written
    assert not [w for ws in written for w in ws if w.startswith("to") and w != "today"], written


def test_the_non_word_screen_flags_glued_function_words():
    vocabulary = Vocabulary(corpus=frozenset({"inthe", "shop"}), english=english_words(), source="test")
    for glued in ("tothe", "inthe", "ofthe", "forthe", "onthe", "forthis"):
        assert glued not in vocabulary, glued
    for word in ("therein", "upon", "thereby", "shop", "the", "bathe"):
        assert word in vocabulary, word
