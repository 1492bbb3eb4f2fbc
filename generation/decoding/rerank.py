"""Dissimilarity re-ranking of an n-best list by word-level Levenshtein distance (ties: model score)."""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein

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
