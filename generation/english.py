"""English words: the one rule that the non-word screen (``generation.screening``), the diverse mode's ban pool and
non-word filter (``generation.decoding.diverse``) and the constraint check read (issue 49.2): function words, the
English word list, and the two shapes of invented word a decoder writes that a web crawl has seen anyway.

* an **inflected function word** ("tos", "buts", "fors"): a function word with an inflection that is no English
  word of its own (:data:`INFLECTED_ENGLISH`: "notes", "using", "beings", "downs" are words);
* a **glued word** ("tothe", "inthe", "ofthe"): a function word glued to a determiner (:data:`GLUED_TAILS`),
  two words with their space lost. A crawl holds "ofthe" at Zipf 3.3 and "inthe" at 2.6 (typos and scraped
  text), above the screen's floor, so frequency alone lets them through.

A banned word escapes a ban the same way: Gemma 3 270M, banned from "the", wrote "tothe" and "inthe".
:func:`glued_to` is the constraint check's rule for it (``generation.decoding.violations``): the banned word
glued to one of the commonest function words (:data:`GLUE_HEADS`) or to itself, on either side, that is not an
English word or is a glued word, counts as the banned word ("tothe" for "the", "thecat" for "cat"; not
"therein" for "in", "bean" for "an", real words). The decoder bans exactly those words (:func:`glued_forms`,
at most 34 a banned word) beside the banned word, so it never writes one and the final check drops nothing.
A banned word with any letters **run on** after it into no English word counts as the banned word too
(:func:`runs_on`: "withJulia", "toyou", "inBali", "specialistss"; a fine-tuned Gemma, banned from its
reference's commonest word, wrote these): the decoder lets a banned word run on only while it can still become
an English word, and end only where it is one (:func:`run_on_words`: "with" + "in" for "within").

A **non-word** (:func:`non_words`) is a word of a candidate that holds a letter and is neither a word of its
reference nor English (:func:`is_english`; the screen also knows its corpus's word types): the screen and the
diverse mode's filter give the same verdict on the same words. The diverse mode judged by lemminflect's lexicon
before (73,000 forms, about ten seconds to load; it lacks rare real words and every name), with its own
function-word list and a list of number and calendar words lemminflect lacks; the ban pool's wider stop-word set
(:data:`BAN_POOL_STOP_WORDS`) is this module's function words plus a named addition.

No Django, no torch: the decoder (Django-free) and the screen import it alike. The word list is loaded on
first use (under a second), not with the app.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

from .words import words_of

NON_WORD = "non-word"  # the reason a candidate is left out or put back for holding one
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
# English words of the list shaped like an inflected function word: a real word is never judged by its shape
# ("doing", "notes", "used" and "ones" were non-words to the screen before this list): every such word of the list
# that lemminflect's lexicon holds (tests/generation/test_english.py checks it), and four forms of other words
# that it lacks ("byes", "noes", "outed", "themed"). "tos", "buts", "ins", "thes" stay non-words
INFLECTED_ENGLISH = frozenset(
    """ass bees beings byes cans canes caning doing dos downed downing downs heed hers hiss hows noes noted notes
    noting offing ones ores ours outed outing outs overs theirs themed themes theses tilling tills toed toes ups
    used uses using weed wheres willed willing wills yours""".split()
)
# Words a ban pool leaves out with FUNCTION_WORDS (quantifiers, degree adverbs, auxiliaries' forms): banning them
# rewrites nothing a reader would call a paraphrase. They are not FUNCTION_WORDS because the inflection and glue
# rules would turn real words built on them into non-words ("others", "owns", "mores"; "am" + "our": "amour")
STOP_WORD_ADDITIONS = frozenset(
    "again all am doing few further having here just more most other own same such too very".split()
)
# What ``\w+`` splits a contraction into ("didn't": "didn", "t"; "she'll": "she", "ll"; "Canada's": "s"): pieces of
# function words, out of a ban pool too ("won", of "won't", stays: a word of its own)
CONTRACTION_PIECES = frozenset(
    "d ll m re s t ve aren couldn didn doesn don hadn hasn haven isn mustn needn shouldn wasn weren wouldn".split()
)
BAN_POOL_STOP_WORDS = FUNCTION_WORDS | STOP_WORD_ADDITIONS | CONTRACTION_PIECES
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
    """A function word with an inflection ("tos", "buts", "fors", "ofing"): never English, whatever its frequency,
    unless it is a word of its own (:data:`INFLECTED_ENGLISH`: "notes", "beings", "downs")."""
    return (
        word not in FUNCTION_WORDS
        and word not in INFLECTED_ENGLISH
        and any(word.endswith(end) and word[: -len(end)] in FUNCTION_WORDS for end in INFLECTIONS)
    )


def glued_word(word: str) -> bool:
    """A function word glued to a determiner ("tothe", "inthe", "ofthe", "forthis"): never English."""
    low = word.lower()
    return low not in FUNCTION_WORDS and any(
        low.endswith(tail) and low[: -len(tail)] in FUNCTION_WORDS for tail in GLUED_TAILS
    )


# a number with an ending ("1990s", "80s", "21st", "2nd"): a number, never a non-word, as "2013" is
NUMBER_WITH_ENDING = re.compile(r"\d[\d,.]*(?:s|st|nd|rd|th|'s)")
# an abbreviation or initials spaCy keeps whole ("U.S.", "Dr.", "J.", "a.m."): looked up without its full stops
ABBREVIATION = re.compile(r"(?:[^\W\d_]+\.)+[^\W\d_]*")
APOSTROPHES = ("'", "\u2019")


def is_number(word: str) -> bool:
    """A word with no letter ("2013") or a number with an ending ("1990s", "21st"): never a non-word."""
    return not has_letter(word) or NUMBER_WITH_ENDING.fullmatch(word.lower()) is not None


def is_english(word: str, words: Container[str] | None = None) -> bool:
    """In the English list (or ``words``, lower-case), and neither an inflected function word nor a glued word
    (lower-cased): the one English-word test of the screen, the diverse mode and the constraint check. What spaCy
    keeps as one token is looked up as the word it writes: a contraction's piece ("'ve", "'ll", "'s": English),
    an abbreviation without its full stops ("U.S.": "us", "Dr.": "dr", "J.": "j")."""
    low = word.lower()
    if low[:1] in APOSTROPHES and low[1:] in CONTRACTION_PIECES:
        return True
    if ABBREVIATION.fullmatch(low):
        low = low.replace(".", "")
    return (
        has_letter(low)  # the list holds numbers ("3", "2013"): no English words, though never non-words either
        and low in (english_words() if words is None else words)
        and not inflected_function_word(low)
        and not glued_word(low)
    )


class EnglishWords(Container[str]):
    """:func:`is_english` as a container (``word in ENGLISH``): the vocabulary :func:`non_words` judges by unless
    given a corpus's."""

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and is_english(word)


ENGLISH = EnglishWords()


@dataclass(frozen=True)
class Vocabulary:
    """The words a candidate may use besides its reference's: the corpus's word types and English words (the
    release screen's vocabulary, ``generation.screening``; here, free of Django, so that a bench judges by it)."""

    corpus: Container[str]
    english: Container[str]
    source: str  # what the record, the manifest and the card say was used

    def __contains__(self, word: object) -> bool:
        # English (is_english), or the corpus's unless glued ("tothe", "inthe": two words that
        # lost their space, whatever the corpus holds)
        word = str(word)
        return is_english(word, self.english) or (word in self.corpus and not glued_word(word))


def has_letter(word: str) -> bool:
    """A word to judge: it has a letter ("meet33ly" does; "2013" is a number, never a non-word)."""
    return any(c.isalpha() for c in word)


def written_names(words: Sequence[str]) -> set[str]:
    """The words of a text (``words``, in order) written with a capital where no sentence starts (after its first
    word; the first word too when a name follows it: "Nelson Mandela spoke"), lower-cased: names ("Nelson",
    "Mandela", "FBI"), English words to the list but no word a paraphrase replaces. None in a title-case text
    (every word after the first that is no function word has a capital: "Cypriots Try to Get Cash Out of
    Banks"), where a capital says nothing."""
    content = [w for w in words[1:] if has_letter(w) and w.lower() not in FUNCTION_WORDS]
    capitals = {w.lower() for w in content if w[:1].isupper()}
    if len(capitals) == len({w.lower() for w in content}):
        return set()
    if len(words) > 1 and words[0][:1].isupper() and words[1].lower() in capitals:
        capitals.add(words[0].lower())
    return capitals


def non_words(words: Iterable[str], reference_words: Iterable[str], vocabulary: Container[str] = ENGLISH) -> list[str]:
    """The candidate's ``words`` (lower-cased) that hold a letter and are neither words of its reference (a name, a
    rare word is always allowed back, with or without the marks around it: "@Cyracuz" and "Cyracuz") nor in
    ``vocabulary`` (default: English words, :func:`is_english`; the screen
    adds its corpus's word types): what a subword model writes when its word is banned ("thes", "tothe",
    "mandelas")."""
    allowed = {form for w in reference_words for form in (w.lower(), _bare(w.lower()))}
    return [
        w
        for w in words
        if not is_number(w)
        and w.lower() not in allowed
        and _bare(w.lower()) not in allowed
        and w.lower() not in vocabulary
    ]


_MARKS = "@#'\"“”‘’-_*"  # what a tokenizer keeps on a word: a handle's "@", a hashtag's "#", quotes


def _bare(word: str) -> str:
    """``word`` without the marks around it that keep a tokenizer from splitting it off: "@cyracuz" (a handle,
    one spaCy token) is the reference's "cyracuz" when a paraphrase writes the name alone, and the other way."""
    return word.strip(_MARKS)


def text_non_words(text: str, reference: str) -> list[str]:
    """The non-words of ``text`` given its ``reference`` (:func:`non_words` over their lower-cased words,
    punctuation stripped): the decoder's verdict, without a corpus (the diverse mode's filter, ``avoid_copies``)."""
    return non_words(words_of(text.lower()), words_of(reference.lower()))


def glued_to(word: str, banned: str, *, before: bool = True, after: bool = True) -> bool:
    """Whether ``word`` is ``banned`` glued to one of the :data:`GLUE_HEADS` function words or to itself
    (``before`` it: "tothe", "thethe"; ``after`` it: "theof"), and no English word ("therein" is a word of its
    own, not "in" escaping a ban). Exactly the words :func:`glued_forms` has the decoder ban."""
    return word in glued_forms(banned, before=before, after=after)


def runs_on(word: str, banned: str) -> bool:
    """Whether ``word`` is ``banned`` with letters run on after it into no English word ("withJulia", "toyou",
    "specialistss"): the banned word with the space after it lost ("within", "today" are words of their own)."""
    return len(word) > len(banned) and word.startswith(banned) and not is_english(word)


@functools.cache
def _english_sorted() -> list[str]:
    return sorted(english_words())


@functools.lru_cache(maxsize=4096)
def run_on_words(banned: str) -> tuple[tuple[str, bool], ...]:
    """The words ``banned`` may run on into, as the decoder follows them: ``banned`` and the rest of each word
    of the English list that begins with it, lower-case ("with" + "in", "with" + "out"; "to" + "s", on the
    way to "toss"), and whether each is English (:func:`is_english`: "within" is, "tos" is not), so that it
    may end there. The decoder's side of :func:`runs_on`. Remembered for 4,096 words (a job bans the same
    words again and again)."""
    stem = banned.lower()
    words = _english_sorted()
    found = words[bisect_left(words, stem) : bisect_left(words, stem + "\U0010ffff")]
    return tuple((banned + word[len(stem) :], is_english(word)) for word in found if len(word) > len(stem))


@functools.cache
def glued_forms(banned: str, *, before: bool = True, after: bool = True) -> frozenset[str]:
    """The words that count as ``banned`` glued (see :func:`glued_to`): a :data:`GLUE_HEADS` word or ``banned``
    itself glued before it (``before``) or after it (``after``), that are not English or are glued words."""
    heads = (*GLUE_HEADS, banned)
    forms = {head + banned for head in heads if before} | {banned + head for head in heads if after}
    return frozenset(w for w in forms if glued_word(w) or not is_english(w))
