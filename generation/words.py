"""The word rule of constraints and decoding: a word is a run of ``\\w`` characters (``re.findall(r"\\w+")``).

The decoder matches constraint phrases against these words of its detokenised output, so selection (which
phrase a reference gives) and PPDB (which paraphrase can be a constraint) must count words the same way.
The rule lives here, below both: no Django, no torch, so the decoder (generation/decoding/, Django-free)
and the selection and PPDB modules import it alike. (generation/vocabulary.py's words are another thing:
the dictionary words of a text as spaCy tokenises it, for screening non-words.)
"""

from __future__ import annotations

import re

WORD_RE = re.compile(r"\w+")


def words_of(text: str) -> list[str]:
    """The words of ``text``, in order."""
    return WORD_RE.findall(text)


def holds_word(text: str) -> bool:
    """Whether ``text`` holds at least one word (``"$"``, ``","`` and ``"--"`` do not: to the decoder a
    phrase of them is empty)."""
    return WORD_RE.search(text) is not None
