"""English words as the non-word screen and the constraint check read them: function words, the English word
list, and the two shapes of invented word a decoder writes that a web crawl has seen anyway.

* an **inflected function word** ("tos", "buts", "fors"): a function word with an inflection;
* a **glued word** ("tothe", "inthe", "ofthe"): a function word glued to a determiner (:data:`GLUED_TAILS`),
  two words with their space lost. A crawl holds "ofthe" at Zipf 3.3 and "inthe" at 2.6 (typos and scraped
  text), above the screen's floor, so frequency alone lets them through.

A banned word escapes a ban the same way: Gemma 3 270M, banned from "the", wrote "tothe" and "inthe".
:func:`glued_to` is the constraint check's rule for it (``generation.decoding.violations``): the banned word
glued to one of the commonest function words (:data:`GLUE_HEADS`) or to itself, on either side, that is not an
English word or is a glued word, counts as the banned word ("tothe" for "the", "thecat" for "cat"; not
"therein" for "in", "bean" for "an", real words). The decoder bans exactly those words (:func:`glued_forms`,
at most 34 a banned word) beside the banned word, so it never writes one and the final check drops nothing.

No Django, no torch: the decoder (Django-free) and the screen import it alike. The word list is loaded on
first use (under a second), not with the app.
"""

from __future__ import annotations

import functools

MIN_ZIPF = 2.25
WORDLIST = "wordfreq large English list"
# English's closed classes (prepositions, conjunctions, determiners, pronouns, auxiliaries): they take no
# inflection, so such a word with one is the decoder's ("tos", "buts", "fors"), however often a crawl saw it
FUNCTION_WORDS = frozenset(
    """a about above after against along also although among an and any are as at be because been before
    being below between both but by can could did do does down during each either for from had has have he
    her him his how i if in into is it its may me might must my neither no nor not of off on once only onto
    or our out over per shall she should since so some than that the their them then there these they this
    those though through till to toward towards under unless until up upon us was we were what when where
    whether which while who whom whose why will with within without would yet you your""".split()
)
INFLECTIONS = ("s", "es", "ing", "ed")
# what a function word is glued to in a "glued word": in the wordfreq list, no English word is a function word
# followed by one of these ("anthem", "usher", "mean" and "area" are why them, her, an and a are not here)
GLUED_TAILS = ("the", "this", "that", "these", "those", "their", "its", "our", "your")
# the function words a banned word must not be glued to (the commonest in English text): few, so that the
# decoder can ban every such form as a word of its own
GLUE_HEADS = ("the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "with", "as", "on", "was", "at", "by")


@functools.cache
def english_words() -> frozenset[str]:
    """The English words of ``WORDLIST`` at or above ``MIN_ZIPF`` (loaded once per process)."""
    from wordfreq import get_frequency_dict  # its lists load on first use, not with the app

    floor = 10 ** (MIN_ZIPF - 9)  # Zipf = log10 of the uses per billion words
    return frozenset(w for w, f in get_frequency_dict("en", wordlist="large").items() if f >= floor)


def inflected_function_word(word: str) -> bool:
    """A function word with an inflection ("tos", "buts", "fors", "ofing"): never English, whatever its frequency."""
    return word not in FUNCTION_WORDS and any(
        word.endswith(end) and word[: -len(end)] in FUNCTION_WORDS for end in INFLECTIONS
    )


def glued_word(word: str) -> bool:
    """A function word glued to a determiner ("tothe", "inthe", "ofthe", "forthis"): never English."""
    low = word.lower()
    return low not in FUNCTION_WORDS and any(
        low.endswith(tail) and low[: -len(tail)] in FUNCTION_WORDS for tail in GLUED_TAILS
    )


def is_english(word: str) -> bool:
    """In the English list, and neither an inflected function word nor a glued word (lower-cased)."""
    low = word.lower()
    return low in english_words() and not inflected_function_word(low) and not glued_word(low)


def glued_to(word: str, banned: str, *, before: bool = True, after: bool = True) -> bool:
    """Whether ``word`` is ``banned`` glued to one of the :data:`GLUE_HEADS` function words or to itself
    (``before`` it: "tothe", "thethe"; ``after`` it: "theof"), and no English word ("therein" is a word of its
    own, not "in" escaping a ban). Exactly the words :func:`glued_forms` has the decoder ban."""
    return word in glued_forms(banned, before=before, after=after)


@functools.cache
def glued_forms(banned: str, *, before: bool = True, after: bool = True) -> frozenset[str]:
    """The words that count as ``banned`` glued (see :func:`glued_to`): a :data:`GLUE_HEADS` word or ``banned``
    itself glued before it (``before``) or after it (``after``), that are not English or are glued words."""
    heads = (*GLUE_HEADS, banned)
    forms = {head + banned for head in heads if before} | {banned + head for head in heads if after}
    return frozenset(w for w in forms if glued_word(w) or not is_english(w))
