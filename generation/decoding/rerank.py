"""Re-ranking a beam's outputs: the most faithful first (``keep_facts``, a backward model), or by word-level
Levenshtein distance to the reference (``rerank_dissimilar``; ties: model score)."""

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


def forward_nll(output: dict) -> float:
    """An output's negative log-likelihood per token under the model that wrote it (its ``score`` over its tokens
    and the token that ended it): the diverse mode's score, comparable with :func:`backward.backward_nll`."""
    return -output["score"] / (len(output["tokens"]) + 1)


def rerank_faithful(outputs: list[dict], reference: str, *, keep_facts: bool) -> list[dict]:
    """A beam's outputs, the most faithful first: with ``keep_facts`` those that change fewest of ``reference``'s
    facts (``generation.facts.FACT_RULE``; each output gains ``"fact_changes"``, ``["+27", "-nasdaq"]``), then,
    where each output has its ``"backward_nll"`` (a backward model read the input back from it), by forward plus
    backward NLL per token (ParaBank 2's score); other ties in the order given (the search's: best score first)."""
    for o in outputs:
        if keep_facts:
            o["fact_changes"] = fact_changes(reference, o["text"])

    def key(o: dict) -> tuple[int, float]:
        changed = len(o["fact_changes"]) if keep_facts else 0
        return changed, (forward_nll(o) + o["backward_nll"]) if "backward_nll" in o else 0.0

    return sorted(outputs, key=key)
