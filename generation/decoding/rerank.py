"""Re-ranking a beam's outputs: by the facts they keep (``keep_facts``), by word-level Levenshtein distance to the
reference (``rerank_dissimilar``; ties: model score)."""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein

from ..facts import fact_changes
from ..words import words_of


def word_levenshtein(a: list[str], b: list[str]) -> int:
    """Word edit distance (insert, delete, substitute one word) between two token lists."""
    return Levenshtein.distance(a, b)


def rerank_dissimilar(outputs: list[dict], reference: str) -> list[dict]:
    """Most dissimilar (largest word edit distance to ``reference``) first; ties by higher model score.
    Each output gains ``"distance"``."""
    ref = words_of(reference.lower())
    for o in outputs:
        o["distance"] = word_levenshtein(words_of(o["text"].lower()), ref)
    return sorted(outputs, key=lambda o: (-o["distance"], -o["score"]))


def rerank_keep_facts(outputs: list[dict], reference: str) -> list[dict]:
    """Those that change fewest of ``reference``'s facts first (``generation.facts.FACT_RULE``), ties in the
    order given (the search's: best score first). Each output gains ``"fact_changes"`` (``["+27", "-nasdaq"]``)."""
    for o in outputs:
        o["fact_changes"] = fact_changes(reference, o["text"])
    return sorted(outputs, key=lambda o: len(o["fact_changes"]))
