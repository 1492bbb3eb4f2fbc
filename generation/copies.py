"""When a paraphrase is its reference again: the one copy rule (``COPY_RULE``) and near-copy rule
(``NEAR_COPY_RULE``) of the whole product, the reference with words added (``EXTENDS_RULE``), and a paraphrase that
loops (``REPEATS_RULE``). Releases leave copies and near-copies out (``scoring.releases.filters``), HIT batches leave
copies out (``annotation.batches``), and the decoder's ``avoid_copies`` puts copies, near-copies and extensions last
in a beam and drops loops (``generation.decoding.rerank``). Django-free and torch-free, so the decoder package can
read it."""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections import Counter

from rapidfuzz.distance import Levenshtein

COPY_RULE = (
    "a paraphrase is a copy of its reference when both are equal after Unicode NFKC normalisation, case folding "
    "and collapsing every run of whitespace to one space (leading and trailing whitespace dropped); punctuation "
    "and every other character count"
)
COPY, NEAR_COPY, EXTENDS, REPEATS = "copy", "near-copy", "extends", "repeats"
NEAR_COPY_EDITS = 1  # characters inserted, deleted or replaced (Levenshtein), after punctuation is dropped
NEAR_COPY_RULE = (
    "a paraphrase is a near-copy of its reference when it is not a copy but both are equal, or at most "
    f"{NEAR_COPY_EDITS} character edit (insertion, deletion or replacement) apart, after Unicode NFKC "
    "normalisation, case folding, dropping every punctuation mark and collapsing whitespace"
)

EXTENDS_RULE = (
    "a paraphrase extends its reference when it is not a copy or a near-copy but holds the whole reference, word "
    "for word, with words added before or after it, compared as the near-copy rule compares (NFKC, case folding, "
    "no punctuation, whitespace collapsed)"
)

REPEAT_WORDS, REPEAT_TIMES = 4, 3
REPEATS_RULE = (
    f"a paraphrase repeats itself when a run of {REPEAT_WORDS} words occurs in it at least {REPEAT_TIMES} times, "
    "and more often than in its reference, compared as the near-copy rule compares (NFKC, case folding, no "
    "punctuation, whitespace collapsed)"
)


def copy_key(text: str) -> str:
    """The text as ``is_copy`` compares it (``COPY_RULE``)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_copy(reference: str, paraphrase: str) -> bool:
    """Whether ``paraphrase`` is its reference again (``COPY_RULE``): "The cat sat." and " the  CAT sat." are
    copies; "The cat sat" (no full stop) is not. Only case and spacing are forgiven, because a change of
    punctuation can be a change of meaning ("Let's eat, Grandma."), and the overlap and BLEU filters exist for
    near-copies."""
    return copy_key(reference) == copy_key(paraphrase)


@functools.cache
def _punctuation() -> dict[int, None]:
    """Every Unicode punctuation mark (categories P*) as a ``str.translate`` table that deletes it: built once
    (about 0.2 s), then a sentence loses its punctuation in about 2 us instead of 18 one character at a time."""
    return {cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P")}


def _without_punctuation(key: str) -> str:
    return " ".join(key.translate(_punctuation()).split())


def copy_kind(reference: str, paraphrase: str) -> str | None:
    """``COPY`` (``is_copy``), ``NEAR_COPY`` (``NEAR_COPY_RULE``) or None: each text normalised once, since a
    release asks this of every pair."""
    a, b = copy_key(reference), copy_key(paraphrase)
    if a == b:
        return COPY
    a, b = _without_punctuation(a), _without_punctuation(b)
    return NEAR_COPY if Levenshtein.distance(a, b, score_cutoff=NEAR_COPY_EDITS) <= NEAR_COPY_EDITS else None


def extends(reference: str, paraphrase: str) -> bool:
    """Whether ``paraphrase`` is ``reference`` with words added around it (``EXTENDS_RULE``): "Evolution is not an
    opinion. Evolution is not an opinion.", "You people think of everything. Well, at least a lot of it." for "You
    people think of everything." Never a paraphrase (at best the reference and a statement more): what a
    decoder-only model writes when it does not stop at the end of the sentence."""
    a = _without_punctuation(copy_key(reference))
    b = _without_punctuation(copy_key(paraphrase))
    return bool(a) and a != b and f" {a} " in f" {b} "


def repeats(reference: str, paraphrase: str) -> bool:
    """Whether ``paraphrase`` loops (``REPEATS_RULE``): "Reserve Bank of India delivers rate cut for 2nd time. Edited
    excerpts: RBA delivers rate cut for 2nd time. Edited excerpts: ..." for "RBA delivers another rate cut", what
    a decoder-only model writes when it runs on and then ends. A sentence that says "the more you ..." three times
    does not: its runs of four words differ."""
    counts = _word_runs(paraphrase)
    if not counts or max(counts.values()) < REPEAT_TIMES:
        return False
    in_reference = _word_runs(reference)
    return any(n >= REPEAT_TIMES and n > in_reference[run] for run, n in counts.items())


def _word_runs(text: str) -> Counter[tuple[str, ...]]:
    words = _without_punctuation(copy_key(text)).split()
    return Counter(tuple(words[i : i + REPEAT_WORDS]) for i in range(len(words) - REPEAT_WORDS + 1))
