"""Re-ranking a beam's outputs: the most faithful first (``keep_facts``, a backward model; with ``avoid_copies``
copies, outputs holding a non-word and extensions last, outputs the length limit ended or that loop dropped), or by
word-level Levenshtein distance to the reference (``rerank_dissimilar``; ties: model score)."""

from __future__ import annotations

from collections.abc import Callable, Collection

from rapidfuzz.distance import Levenshtein

from ..copies import COPY, EXTENDS, NEAR_COPY, REPEATS, copy_kind, extends, repeats
from ..english import NON_WORD, text_non_words
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


CUT_OFF, EMPTY = "cut off", "empty"
# why avoid_copies puts an output back, and how far: a copy, a near-copy or an output holding a non-word (what the
# HIT screen and a release leave out) before what a reader would call no sentence of its own (the reference with
# words added, an empty output). An output the length limit ended (CUT_OFF) or that loops (REPEATS) is not put back
# but dropped: no sentence at all (rerank_faithful)
AVOIDED_RANK = {None: 0, COPY: 1, NEAR_COPY: 1, NON_WORD: 1, EXTENDS: 2, EMPTY: 2}
DROPPED = (CUT_OFF, REPEATS)
COPIES = (COPY, NEAR_COPY)  # what decode searches again for, with the first word avoided at the start
# a reference's reason when avoid_copies dropped its whole beam for running on (decode's DecodeResult.reason)
RAN_ON = "every hypothesis ran on to max_length or repeated itself (avoid_copies drops such outputs)"


def avoided(reference: str, text: str, *, cut_off: bool) -> str | None:
    """Why ``avoid_copies`` puts an output back or drops it: ``"cut off"`` (``cut_off``: the length limit ended it,
    not its end-of-sequence token, whatever else it is), ``"empty"`` (no text at all), ``"copy"``, ``"near-copy"``
    (the release's rules), ``"repeats"`` (it loops: "... Edited excerpts: RBA delivers ... Edited excerpts: ...",
    what a decoder-only model writes when it runs on), ``"non-word"`` (a word neither English nor its reference's,
    ``generation.english.text_non_words``: "Bank delivers ratecut"), ``"extends"`` (the reference with words added;
    ``generation.copies``); None: none of these."""
    if cut_off:
        return CUT_OFF
    if not text.strip():
        return EMPTY
    if kind := copy_kind(reference, text):
        return kind
    if repeats(reference, text):
        return REPEATS
    if text_non_words(text, reference):
        return NON_WORD
    return EXTENDS if extends(reference, text) else None


def rerank_faithful(
    outputs: list[dict],
    reference: str,
    *,
    keep_facts: bool,
    avoid_copies: bool = False,
    cut_off: Collection[int] = (),
    backward: Callable[[list[str]], list[float]] | None = None,
) -> list[dict]:
    """A beam's outputs, the most faithful first: with ``avoid_copies`` those :func:`avoided` last, the copies
    before the rest (``AVOIDED_RANK``; each output gains ``"avoided"``, the reason or None), and those the length
    limit ended (``cut_off``: their positions) or that loop dropped (``DROPPED``), since a run-on is no paraphrase
    to show or release (a beam of nothing else gives none); with ``keep_facts`` those that change fewest of
    ``reference``'s facts first (``generation.facts.FACT_RULE``; each output gains ``"fact_changes"``, ``["+27",
    "-nasdaq"]``), then, with ``backward`` (a backward model's NLL per token of the input given each text, asked
    once, of the outputs kept: a dropped run-on is the longest text to read back), by forward plus backward NLL per
    token (ParaBank 2's score; each output gains ``"backward_nll"``); other ties in the order given (the search's:
    best score first)."""
    for i, o in enumerate(outputs):
        if keep_facts:
            o["fact_changes"] = fact_changes(reference, o["text"])
        if avoid_copies:
            o["avoided"] = avoided(reference, o["text"], cut_off=i in cut_off)

    if avoid_copies:
        outputs = [o for o in outputs if o["avoided"] not in DROPPED]
    if backward is not None and outputs:
        for o, nll in zip(outputs, backward([o["text"] for o in outputs])):
            o["backward_nll"] = nll

    def key(o: dict) -> tuple[int, int, float]:
        put_back = AVOIDED_RANK[o["avoided"]] if avoid_copies else 0
        changed = len(o["fact_changes"]) if keep_facts else 0
        return put_back, changed, (forward_nll(o) + o["backward_nll"]) if "backward_nll" in o else 0.0

    return sorted(outputs, key=key)
