"""The facts a paraphrase should keep: the one rule of ``keep_facts`` (``generation.decoding.rerank_faithful``)
and of the figures that count changed facts (``bench/paraphraser.py``).

A text's **facts** are its numbers and its names:

* a **number** is a run of digits, with the full stops and commas inside it ("977.59", "1,498" read as
  "1498", "$20.26" as "20.26", "27-year-old" as "27"), or a number word ("seven" is "7", "hundred" is "100"; not
  "one", which is also a pronoun);
* a **name** is a word written with a capital where no sentence starts (``english.written_names``: "Nasdaq",
  "Liberia", "Hyderabad"; none in a title-case headline, where a capital says nothing).

An output **changes** a fact of its reference when it adds a number or a name the reference does not hold, or
drops one the reference holds (:func:`fact_changes`). Names match loosely, since a paraphrase may write a
name's other form: they share their first four letters or more, and one is a start of the other ("Korea",
"Korean") or each has at most three letters after the shared part ("Britain", "British"; "Islamiah",
"Islamiyah"); a shorter word matches only itself ("UK"; "Canada" is no form of "can"). A name
of the output also matches any word of the reference, capital or not ("pakistan" written lower-case, then
"Pakistan"). An acronym matches the words it is spelled out in, on either side: a run of capitalised words
whose initials, "of", "and", "the" and "for" skipped, spell its capitals ("RBA" and "Reserve Bank of Australia",
"BoE" and "Bank of England"; an acronym in the run gives its capitals: "US Geological Survey" and "USGS").
Numbers match exactly.

Why: a 270M paraphraser fine-tuned on a few thousand pairs fills in what it does not keep. Judged by hand,
half its outputs under ParaBank's system 15 changed a fact: an age added ("27-year-old British citizen"), an
index renamed ("Nasdaq 100" for "Nasdaq Composite"), a closing price or a place dropped. Beam search keeps
hypotheses that differ in exactly these, and the model's score does not prefer the faithful one. A rule
this plain misses facts of other kinds (a negation, "the world's highest" for "the tallest US") and the names
of a title-case output ("Royal Bank of Canada Rate Cut"); it orders hypotheses, and never leaves a reference
without an output.

No Django, no torch: the decoder imports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .english import written_names
from .words import words_of

FACT_RULE = (
    "an output changes a fact of its reference when it adds or drops a number (digits, or a number word from "
    "two to trillion) or a name (a word written with a capital where no sentence starts; none in a title-case "
    "text); names match when they share their first four letters or more and one starts the other or each has "
    "at most three letters more, and an acronym matches the capitalised words that spell it"
)
ABBREVIATION = re.compile(r"\b(?:[A-Za-z]\.){2,}")  # "U.S.", "e.g."
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_UNITS = "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
NUMBER_WORDS = {
    "one": "1",  # read only in a compound ("twenty-one"); alone it is also a pronoun
    **{w: str(n) for n, w in enumerate(_UNITS, 2)},
    "seventeen": "17",
    "eighteen": "18",
    "nineteen": "19",
    **{w: str(n) for n, w in zip(range(20, 100, 10), _TENS)},
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "billion": "1000000000",
    "trillion": "1000000000000",
}
COMPOUND_NUMBER = re.compile(rf"\b({'|'.join(_TENS)})(?:-({'|'.join(_UNITS[:8])}|one))?\b", re.IGNORECASE)
NAME_PREFIX = 4  # letters two forms of a name share at least; a shorter word ("UK", "can") matches only itself
NAME_ENDING = 3  # letters each may have after the shared part
ACRONYM_JOINERS = frozenset({"of", "and", "the", "for"})  # skipped in a spelled-out acronym ("Bank of England")


def numbers(text: str) -> list[str]:
    """The numbers of ``text`` (module docstring), each once, in order: digits without their thousands commas,
    number words as digits."""
    found = [m.group().replace(",", "") for m in NUMBER.finditer(text)]
    for tens, unit in COMPOUND_NUMBER.findall(text):  # "twenty-seven" is 27, not 20 and 7
        found.append(str(int(NUMBER_WORDS[tens.lower()]) + (int(NUMBER_WORDS[unit.lower()]) if unit else 0)))
    text = COMPOUND_NUMBER.sub(" ", text)
    found += [NUMBER_WORDS[w] for w in (x.lower() for x in words_of(text)) if w in NUMBER_WORDS and w != "one"]
    return list(dict.fromkeys(found))


def name_words(text: str) -> list[str]:
    """The words of ``text`` (``words.words_of``) with an abbreviation's full stops dropped first ("U.S." is
    "US", as a reference may write it)."""
    return words_of(ABBREVIATION.sub(lambda m: m.group().replace(".", ""), text))


def names(words: Sequence[str]) -> list[str]:
    """The names among a text's ``words`` (:func:`name_words`; ``english.written_names``), lower-cased, each
    once, in order."""
    found = written_names(words)
    return list(dict.fromkeys(w.lower() for w in words if w.lower() in found))


def same_name(a: str, b: str) -> bool:
    """Whether two lower-cased words are forms of one name (module docstring)."""
    if min(len(a), len(b)) < NAME_PREFIX:
        return a == b
    if a.startswith(b) or b.startswith(a):
        return True
    shared = 0
    for x, y in zip(a, b):
        if x != y:
            break
        shared += 1
    return shared >= NAME_PREFIX and len(a) - shared <= NAME_ENDING and len(b) - shared <= NAME_ENDING


def acronym_letters(word: str) -> str | None:
    """The capitals an acronym is read by ("RBA", "USGS"; "BoE": "BE"), None for a word that is no acronym: letters
    only, a capital first, two capitals at least."""
    capitals = "".join(c for c in word if c.isupper())
    return capitals if len(capitals) >= 2 and word.isalpha() and word[0].isupper() else None


def spelled_out(acronym: str, written: Sequence[str]) -> set[str]:
    """The words (lower-cased) of the first run of ``written`` whose initials spell ``acronym`` (module
    docstring), two words at least; empty when no run does."""
    for start in range(len(written)):
        letters, run = "", []
        for word in written[start:]:
            if run and word.lower() in ACRONYM_JOINERS:
                continue
            if not word[:1].isupper():
                break
            letters += acronym_letters(word) or word[0]
            run.append(word.lower())
            if not acronym.startswith(letters):
                break
            if letters == acronym:
                if len(run) >= 2:
                    return set(run)
                break
    return set()


def acronyms_spelled_out(written: Sequence[str], other: Sequence[str]) -> tuple[set[str], set[str]]:
    """The acronyms of ``written`` that ``other`` spells out, and the words of ``other`` that spell them, both
    lower-cased."""
    acronyms: set[str] = set()
    spelling: set[str] = set()
    for word in dict.fromkeys(written):
        letters = acronym_letters(word)
        run = spelled_out(letters, other) if letters else set()
        if run:
            acronyms.add(word.lower())
            spelling |= run
    return acronyms, spelling


def fact_changes(reference: str, output: str) -> list[str]:
    """The facts ``output`` changes against ``reference`` (``FACT_RULE``): "+x" for one it adds, "-x" for one it
    drops, numbers first, each in order of appearance. [] when it keeps them all."""
    ref_numbers, out_numbers = numbers(reference), numbers(output)
    ref_written, out_written = name_words(reference), name_words(output)
    ref_words, out_words = {w.lower() for w in ref_written}, {w.lower() for w in out_written}
    changes = [f"+{n}" for n in out_numbers if n not in ref_numbers]
    changes += [f"-{n}" for n in ref_numbers if n not in out_numbers]
    ref_acronyms, out_spelling = acronyms_spelled_out(ref_written, out_written)
    out_acronyms, ref_spelling = acronyms_spelled_out(out_written, ref_written)
    out_kept, ref_kept = out_acronyms | out_spelling, ref_acronyms | ref_spelling
    changes += [
        f"+{n}" for n in names(out_written) if n not in out_kept and not any(same_name(n, w) for w in ref_words)
    ]
    changes += [
        f"-{n}" for n in names(ref_written) if n not in ref_kept and not any(same_name(n, w) for w in out_words)
    ]
    return changes
