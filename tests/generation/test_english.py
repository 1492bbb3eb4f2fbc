"""One English-word rule (issue 49.2, ``generation.english``): the non-word screen of HIT batches and releases and
the diverse mode's non-word filter give the same verdict on the same words, and the inflection rule that catches
the decoder's "tos" and "buts" does not turn real words ("beings", "downs", "notes") into non-words."""

from __future__ import annotations

import pytest

from generation.english import (
    BAN_POOL_STOP_WORDS,
    FUNCTION_WORDS,
    INFLECTED_ENGLISH,
    INFLECTIONS,
    Vocabulary,
    english_words,
    is_english,
    non_words,
    text_non_words,
)
from generation.screening import pair_non_words

REFERENCE = "Mandela met the specialists on Friday."
# each rule's own word list disagreed on some of these before: the screen (wordfreq) judged "beings" and "downs"
# non-words, the diverse filter (lemminflect) "Obama"
CANDIDATE = "Tothe specialistss met Mandelas and others, six beings of Obama, on Monday at the downs."
INVENTED = ["tothe", "specialistss", "mandelas"]


@pytest.mark.django_db
def test_the_screen_and_the_diverse_filter_give_the_same_verdict():
    # the screen's vocabulary with a corpus that knows none of these words: English alone decides, as in diverse
    vocabulary = Vocabulary(corpus=frozenset(), english=english_words(), source="test")
    [screened] = pair_non_words([(REFERENCE, CANDIDATE)], vocabulary, cached=False)
    assert screened == INVENTED
    assert text_non_words(CANDIDATE, REFERENCE) == INVENTED
    # the reference's own word is never a non-word, whichever the caller
    assert text_non_words("Mandelas spoke.", "Mandelas spoke softly.") == []


@pytest.mark.django_db
def test_the_diversity_bench_counts_what_the_screen_flags():
    """bench/diversity.py's non-word share (and bench/paraphraser.py's diverse rows) judge by the screen's rule:
    it counted by lemminflect's list, so the same outputs read 7% there and 3% in the rows beside them."""
    from bench import diversity

    corpus = ["Mandelas and tothe are in this corpus.", "Specialistss too."]
    vocabulary = diversity.vocabulary_of(corpus)
    [screened] = pair_non_words([(REFERENCE, CANDIDATE)], vocabulary, cached=False)
    assert screened == ["tothe"]  # the corpus knows the others, yet a glued word stays a non-word
    assert diversity.has_non_word(CANDIDATE, REFERENCE, vocabulary)
    assert not diversity.has_non_word("Six beings met Obama at the downs.", REFERENCE, vocabulary)


@pytest.mark.parametrize(
    "word", ["others", "beings", "downs", "ups", "outs", "notes", "using", "used", "doing", "ones", "yours", "six"]
)
def test_a_real_word_shaped_like_an_inflected_function_word_is_english(word):
    assert is_english(word) and is_english(word.capitalize())
    assert non_words([word], []) == []


@pytest.mark.parametrize("word", ["tos", "buts", "fors", "ins", "thes", "ofing", "tothe", "inthe", "specialistss"])
def test_what_the_decoder_invents_is_no_english_word(word):
    assert not is_english(word)
    assert non_words([word], []) == [word]


def test_numbers_are_never_non_words_and_a_reference_allows_its_words_back():
    assert non_words(["2013", "3", "tos"], ["tos"]) == []
    assert not is_english("2013")  # in the list, yet no word a ban pool should hold


def test_the_inflected_english_words_are_every_such_word_lemminflect_knows():
    """INFLECTED_ENGLISH is derived, not picked: every word of the English list shaped like an inflected function
    word that lemminflect's lexicon holds is in it, and it holds no word outside the English list."""
    from generation.morphology import known_words

    known = set(known_words())
    english = english_words()
    shaped = {f + end for f in FUNCTION_WORDS for end in INFLECTIONS} - FUNCTION_WORDS
    assert {w for w in shaped & english if w in known} <= INFLECTED_ENGLISH
    assert INFLECTED_ENGLISH <= shaped & english


def test_the_ban_pools_stop_words_are_the_function_words_and_a_named_addition():
    assert FUNCTION_WORDS < BAN_POOL_STOP_WORDS
    # the addition stays out of the inflection and glue rules: the real words built on it are English
    for word in ("others", "owns", "mores", "amour", "mostly"):
        assert is_english(word), word


@pytest.mark.parametrize("word", ["'ve", "'d", "\u2019ll", "'s", "U.S.", "Dr.", "J.", "e.g.", "a.m."])
def test_what_spacy_keeps_whole_is_english_as_the_word_it_writes(word):
    """The screen's tokens (spaCy) keep a contraction's piece and an abbreviation whole: they were non-words, so a
    paraphrase writing "you've" for "you have" or "U.S." for "US" was left out of HITs and releases."""
    assert is_english(word) and non_words([word], []) == []


@pytest.mark.parametrize("word", ["1990s", "80s", "21st", "2nd", "2013"])
def test_a_number_with_an_ending_is_never_a_non_word(word):
    assert non_words([word], []) == []


@pytest.mark.parametrize("word", ["'xyz", "qzx.", "tothe.", "the.the.", "to4.17.59", "transparency4.7"])
def test_invented_words_stay_non_words_with_an_apostrophe_or_full_stops(word):
    assert non_words([word], []) == [word]


@pytest.mark.django_db
def test_the_screen_keeps_a_paraphrase_with_a_contraction_an_abbreviation_and_a_decade():
    vocabulary = Vocabulary(corpus=frozenset(), english=english_words(), source="test")
    pairs = [("We have lived in the US since the nineteen-nineties.", "We've lived in the U.S. since the 1990s.")]
    assert pair_non_words(pairs, vocabulary, cached=False) == [[]]


@pytest.mark.django_db
def test_a_reference_allows_its_names_back_with_or_without_a_handles_marks():
    """ParaBank's reference "@Cyracuz, What you want to call it is up to you." is one spaCy token "@cyracuz": the
    paraphrase that writes the name alone was left out as holding a non-word. A name the reference does not hold
    stays a non-word, with its marks or without."""
    vocabulary = Vocabulary(corpus=frozenset(), english=english_words(), source="test")
    reference = "@Cyracuz, What you want to call it is up to you."
    pairs = [
        (reference, "What you want to call it is up to you, Cyracuz."),
        ("Cyracuz will decide.", "It is up to @Cyracuz and #Cyracuz."),
        (reference, "It is up to you, Cyracus, and @Zorblax."),
    ]
    assert pair_non_words(pairs, vocabulary, cached=False) == [[], [], ["cyracus", "@zorblax"]]
