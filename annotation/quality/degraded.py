"""Degraded checks that look like the candidates around them (issues 36 and 46).

A degraded check is a *real candidate* of the HIT's reference (its source) with a span of tokens replaced by
a phrase of an unrelated sentence, as WMT's direct assessment makes its bad references. The old copy (the
reference with one 2-6-word run swapped, same length, same first and last word) was found by its text alone:
"same length as the reference, one contiguous differing run of 2-6 words" picked 22 of 22 checks and 0 of
216 real candidates.

What a text-only detector sees of a sentence next to its reference is its :class:`TextShape` (length
difference, contiguous runs of differing words, first and last word kept). The damage is drawn so that a
check's shape follows the real candidates' own: for each check one real candidate of the reference is drawn
as a *target* and, among ``PROPOSALS`` random degradations (source, span length and place, donor phrase,
inserted length), the one whose shape is nearest the target's is kept. So the check's length and edge words
are distributed like the real candidates', whatever those are.

A reader of whole pages and whole batches saw more (issue 46): the source sat on the same HIT (a sentence
that repeats another item of the page but for one run), and the phrase came from another reference of the
batch (a bigram shared with a reference on another page). So the caller gives as ``sources`` the
reference's real candidates *not* on the check's HIT wherever it has any (``annotation.batches.making``), and as
``donors`` sentences from outside the batch (the packaged corpus); and the phrase is drawn so that its
words' frequency (wordfreq's Zipf scale) follows the words it replaces: no rare foreign word stands out.
The damage stays plain to a reader: 2 or more tokens of the source go, a phrase with a content word (4+
letters) new to the source and the reference comes in, where any draw has one (else, as in made-up test
data, a word new to the source): a careful rater scores it clearly below the real candidates the per-rater
test compares it with (``annotation.quality.workers``).

Every draw comes from the ``rng`` given (seeded by the caller): the same batch gives the same checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import random
import re
from collections.abc import Iterable, Sequence

MIN_DEGRADED_TOKENS = 4  # a source shorter than this has no span whose loss is clear and leaves it a sentence
PROPOSALS = 96  # random degradations tried per check; the nearest to the target's shape is kept
PHRASE_DRAWS = 6  # donor phrases drawn per degradation; the nearest in word frequency to the span it replaces
_END_PUNCT = re.compile(r"[.!?;:]+$")
_WORD = re.compile(r"\w+")


@dataclasses.dataclass(frozen=True, slots=True)
class TextShape:
    """What a sentence's text alone says next to its reference (whitespace tokens)."""

    length_difference: int  # tokens of the sentence minus tokens of the reference
    edit_runs: int  # contiguous runs of tokens where the two differ (difflib's non-equal opcodes)
    same_first: bool  # the first token is the reference's
    same_last: bool  # the last token is the reference's
    longest_run: int = 0  # tokens of the reference in its longest differing run (matched too, not a feature)

    def features(self) -> list[float]:
        """As numbers, for a classifier (bench/quality.py and the tests train one on them)."""
        return [float(self.length_difference), float(self.edit_runs), float(self.same_first), float(self.same_last)]

    def distance(self, other: TextShape) -> int:
        return (
            abs(self.length_difference - other.length_difference)
            + 2 * abs(self.edit_runs - other.edit_runs)
            + 2 * (self.same_first != other.same_first)
            + 2 * (self.same_last != other.same_last)
            + min(abs(self.longest_run - other.longest_run), 3)
        )


def edit_runs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """(i1, i2, j1, j2) of each contiguous run where token lists ``a`` and ``b`` differ."""
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def text_shape(reference: str, text: str) -> TextShape:
    """The sentence's shape next to its reference."""
    a, b = reference.split(), text.split()
    runs = edit_runs(a, b)
    return TextShape(
        length_difference=len(b) - len(a),
        edit_runs=len(runs),
        same_first=bool(a and b and a[0] == b[0]),
        same_last=bool(a and b and a[-1] == b[-1]),
        longest_run=max((i2 - i1 for i1, i2, _, _ in runs), default=0),
    )


def reference_rule_flags(reference: str, text: str) -> bool:
    """The rule that found every old degraded copy: as many tokens as the reference and one contiguous run of
    2-6 differing tokens (kept here to measure that it no longer works: tests and bench/quality.py)."""
    a, b = reference.split(), text.split()
    if len(a) != len(b):
        return False
    runs = edit_runs(a, b)
    return len(runs) == 1 and 2 <= runs[0][1] - runs[0][0] <= 6


@dataclasses.dataclass(frozen=True, slots=True)
class Detectability:
    """How well a text-only detector separates checks from real candidates (AUC 0.5: chance)."""

    checks: int
    real: int
    rule_finds: int  # checks the text rule flags
    rule_flags_real: int  # real candidates it flags
    rule_auc: float
    classifier_auc: float  # a logistic regression on ``TextShape.features``, cross-validated


def detectability(items: Sequence[tuple[str, str, bool]], *, seed: int = 0) -> Detectability:
    """The issue's two detectors over (reference, text, is_check) items: the text rule and a logistic
    regression on length difference, edit runs and edge words, its AUC from 5-fold stratified cross-validated
    predictions. One measurement for the test and bench/quality.py (scikit-learn loads here, when measured)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    labels = [int(is_check) for _, _, is_check in items]
    flags = [int(reference_rule_flags(reference, text)) for reference, text, _ in items]
    features = [text_shape(reference, text).features() for reference, text, _ in items]
    guessed = cross_val_predict(
        LogisticRegression(max_iter=1000),
        features,
        labels,
        cv=StratifiedKFold(5, shuffle=True, random_state=seed),
        method="predict_proba",
    )[:, 1]
    return Detectability(
        checks=sum(labels),
        real=len(labels) - sum(labels),
        rule_finds=sum(f for f, y in zip(flags, labels) if y),
        rule_flags_real=sum(f for f, y in zip(flags, labels) if not y),
        rule_auc=float(roc_auc_score(labels, flags)),
        classifier_auc=float(roc_auc_score(labels, guessed)),
    )


def degraded_span_length(n_tokens: int) -> int:
    """The typical number of tokens a check removes from an ``n_tokens`` source (WMT's bad references grow
    the damage with the sentence: 2 up to 5 tokens, 3 up to 8, 4 up to 15, 5 up to 20, then 6); each
    check varies it by one either way."""
    return 2 if n_tokens <= 5 else 3 if n_tokens <= 8 else 4 if n_tokens <= 15 else 5 if n_tokens <= 20 else 6


@functools.lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """The word's frequency on wordfreq's Zipf scale (0: unknown; 7: "the"), case and edge punctuation aside."""
    from wordfreq import zipf_frequency  # its lists load on first use, not with the app

    return zipf_frequency(word.lower().strip(".,;:!?\"'()[]"), "en")


def mean_zipf(tokens: Sequence[str]) -> float:
    """The mean Zipf frequency of whitespace tokens (0 for none)."""
    return sum(zipf(t) for t in tokens) / len(tokens) if tokens else 0.0


def _normal(text: str) -> str:
    return " ".join(text.split())


def _words(tokens: Iterable[str]) -> set[str]:
    return {w.lower() for t in tokens for w in _WORD.findall(t)}


def _fit(phrase: list[str], *, source: list[str], start: int, end: int, first_of_donor: bool) -> list[str]:
    """The donor phrase made to sit in the source: no sentence-final punctuation inside, the source's
    capital letter at its start, its final punctuation at its end (so the seam shows no sentence break)."""
    out = [_END_PUNCT.sub("", t) for t in phrase]
    out = [t for t in out if t]
    if not out:
        return out
    if start == 0:
        if source[0][:1].isupper():
            out[0] = out[0][:1].upper() + out[0][1:]
    elif first_of_donor and out[0][:1].isupper() and out[0][1:2].islower():
        out[0] = out[0][:1].lower() + out[0][1:]  # the donor's sentence-initial capital, not a name
    if end == len(source):
        tail = _END_PUNCT.search(source[-1])
        if tail:
            out[-1] += tail.group(0)
    return out


def _propose(
    source: list[str], donors: Sequence[list[str]], rng: random.Random, *, banned_words: set[str]
) -> tuple[str, bool] | None:
    """One random degradation of ``source`` and whether its damage is plain (a content word new to the source
    and the reference); None when the phrase brings no word new to the source at all."""
    n = len(source)
    base = degraded_span_length(n)
    k = min(max(2, base + rng.choice((-1, 0, 0, 1))), n - 2)
    start = rng.randrange(0, n - k + 1)
    m = max(1, k + rng.choice((-2, -1, 0, 0, 1, 2)))
    removed = mean_zipf(source[start : start + k])
    drawn = []
    for _ in range(PHRASE_DRAWS):
        donor = rng.choice(donors)
        if len(donor) >= m:
            at = rng.randrange(len(donor) - m + 1)
            drawn.append((abs(mean_zipf(donor[at : at + m]) - removed), donor, at))
    if not drawn:
        return None
    _, donor, at = min(drawn, key=lambda d: d[0])
    phrase = _fit(donor[at : at + m], source=source, start=start, end=start + k, first_of_donor=at == 0)
    new = _words(phrase) - _words(source)
    if not phrase or not new:
        return None
    plain = any(len(w) >= 4 for w in new - banned_words)
    return " ".join([*source[:start], *phrase, *source[start + k :]]), plain


def degraded_candidate_text(
    *,
    reference: str,
    sources: Sequence[str],
    peers: Sequence[str],
    donors: Sequence[str],
    avoid: Iterable[str] = (),
    rng: random.Random,
) -> tuple[str, int] | None:
    """(the degraded text, the index in ``sources`` of the candidate it came from), or None when none can be
    made (no source of ``MIN_DEGRADED_TOKENS`` tokens, no donor, every draw taken).

    ``sources``: the real candidates one of which becomes the source (those of the reference on other HITs,
    where there are any); ``peers``: the reference's real candidates whose shapes it imitates (``sources``
    when empty); ``donors``: unrelated sentences whose phrases come in (from outside the batch); ``avoid``:
    texts it must not equal (every candidate of the reference), compared with whitespace normalised."""
    usable = [i for i, s in enumerate(sources) if len(s.split()) >= MIN_DEGRADED_TOKENS]
    own = _normal(reference)
    phrases = sorted({tuple(d.split()) for d in donors if _normal(d) != own and d.split()})
    if not usable or not phrases:
        return None
    donor_tokens = [list(p) for p in phrases]
    forbidden = {_normal(t) for t in avoid} | {own} | {_normal(s) for s in sources}
    banned = _words(reference.split())
    targets = [text_shape(reference, p) for p in (peers or sources)]
    target = rng.choice(targets)
    best: tuple[tuple[bool, int], str, int] | None = None
    for _ in range(PROPOSALS):
        index = rng.choice(usable)
        proposed = _propose(sources[index].split(), donor_tokens, rng, banned_words=banned)
        if proposed is None or proposed[0] in forbidden:
            continue
        text, plain = proposed
        rank = (not plain, text_shape(reference, text).distance(target))  # plain damage first, then the shape
        if best is None or rank < best[0]:
            best = (rank, text, index)
            if rank == (False, 0):
                break
    return None if best is None else (best[1], best[2])
