"""Dissimilarity re-ranking of an n-best list by word-level Levenshtein distance (ties: model score)."""
from __future__ import annotations

from .vocab import words_of


def word_levenshtein(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def rerank_dissimilar(outputs: list[dict], reference: str) -> list[dict]:
    """Most dissimilar (largest word edit distance to ``reference``) first; ties by higher model score.
    Each output gains ``"distance"``."""
    ref = words_of(reference.lower())
    for o in outputs:
        o["distance"] = word_levenshtein(words_of(o["text"].lower()), ref)
    return sorted(outputs, key=lambda o: (-o["distance"], -o["score"]))
