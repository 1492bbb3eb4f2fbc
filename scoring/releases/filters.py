"""Release filters from the related papers, parsed from ``--filters`` and applied to one reference at a time.

Syntax: comma- (or space-) separated ``key=value`` items; a range is ``LO-HI``, ``LO-`` or ``-HI``
(bounds inclusive)::

    len=5-40          reference length in tokens (the record's "length"; Wieting et al. 2017 §5.5)
    plen=3-30         paraphrase length in words (after lowercasing and stripping punctuation)
    overlap=0.2-0.8   unigram overlap bounds (Wieting et al. §5.7: shared n-grams / n-grams of the
                      shorter sentence); overlap1 / overlap2 / overlap3 for orders 1-3
    score=60          minimum score (the same as --min-score): the released ``score``, calibrated when the
                      regressor has a calibration map (``scoring.releases.rows``); unscored pairs then drop
    rerank=dissimilar order each reference's paraphrases most dissimilar first (word Levenshtein
                      distance, ties by model score: Wubben et al., generation.decoding.rerank);
                      rerank=score orders by the released ``score``, highest first (ties by ``raw_score``)
    top=5             keep the first K paraphrases of each reference (after rerank)
    bleu=10-70        sentence BLEU (0-100) of the paraphrase against its reference, the smoothed
                      sentence-level variant Wieting et al. §5.7 use (see ``sentence_bleu``)
    repetition=-0.1   maximum unigram repetition rate of the paraphrase (Wieting et al. §5.6, see
                      ``repetition_rate``); repetition3 for trigrams (repetition1 = repetition)
    copies=keep       keep paraphrases identical to their reference (``is_copy``) and near-copies of it
                      (``copy_kind``), which are left out by default (``copies=drop``;
                      ``export_release --keep-copies``)
    non_words=keep    keep paraphrases holding a non-word (``generation.screening``: what a HIT batch leaves
                      out), left out by default (``non_words=drop``; ``export_release --keep-non-words``);
                      kept, their score is emptied and their ``caveat`` says why
    entailment=0.75   bidirectional entailment (Klemen & Robnik-Sikonja): P(entailment) >= 0.75 in both
                      directions, or entailment=argmax; needs an NLI model (--entailment-model DIR,
                      scoring.releases.entailment)

A paraphrase identical to its reference is not a paraphrase (the decoder's unconstrained or lightly constrained
systems often return the reference itself, and a regressor scores such a copy near 100, so it would top every
sorted release): unless ``copies=keep``, it is left out before every other filter. The rule is ``is_copy``, in
``generation.screening`` with the non-word rule, which a HIT batch applies too. A release also leaves out a
**near-copy** (``copy_kind``, ``NEAR_COPY_RULE``): equal to its reference once punctuation is dropped too, or
within ``NEAR_COPY_EDITS`` character edit of it ("A woman is eating." / "A Women is eating"; "rate cut" / "rate
cuts"): a one-character change is a slip or a different fact, never a paraphrase, and the regressor scores it
near 100, so it would top a release sorted by score. Slips further from the reference (a wrong inflection in a
real rewording) stay in: the non-word screen cannot see them, and the card says so.
A pair too short to have an n-gram of order n passes that order's bounds (nothing to measure).
Every number is written in digits 0-9 (``api.numbers``: no ``١٢``, ``1_0``, ``nan`` or ``inf``, and a value of
thousands of digits is refused, not read): a bound is a finite number from 0 to ``MAX_LENGTH_BOUND`` (len, plen),
0 to 1 (overlap, repetition) or 0 to 100 (bleu), and ``top`` a whole number from 1 to ``MAX_TOP``.
Entailment runs last (after the cheap filters), batched over each reference's remaining paraphrases.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections import Counter
from typing import Any

from api.numbers import ascii_float, ascii_int, shown
from generation.copies import (  # noqa: F401 (re-exported)
    COPY,
    COPY_RULE,
    NEAR_COPY,
    NEAR_COPY_EDITS,
    NEAR_COPY_RULE,
    copy_key,
    copy_kind,
    is_copy,
)
from scoring.diversity import normalize, tokens

RERANKS = ("dissimilar", "score")
_RANGE = re.compile(r"^\s*([^-\s]+)?\s*-\s*([^-\s]+)?\s*$")  # each bound: api.numbers.ascii_float
# the largest bound of a length filter (len, plen: tokens or words); the fraction and BLEU filters have theirs
MAX_LENGTH_BOUND = 1_000_000
MAX_TOP = 1_000_000  # top=K: more paraphrases than any reference has
_OVERLAP_KEYS = {"overlap": 1, "overlap1": 1, "overlap2": 2, "overlap3": 3}
_REPETITION_KEYS = {"repetition": 1, "repetition1": 1, "repetition3": 3}
_KNOWN = (
    "len, plen, overlap, overlap1-3, bleu, repetition, repetition3, entailment, score, rerank, top, copies, non_words"
)
COPIES = ("drop", "keep")
BLEU_ORDER = 4
MIN_REPEAT_CHARS = 3


class FilterError(ValueError):
    """A --filters item that cannot be understood."""


Range = tuple[float | None, float | None]


@dataclasses.dataclass(frozen=True)
class ReleaseFilters:
    length: Range | None = None
    paraphrase_length: Range | None = None
    overlap: tuple[tuple[int, Range], ...] = ()
    min_score: float | None = None
    rerank: str | None = None
    top: int | None = None
    bleu: Range | None = None
    repetition: tuple[tuple[int, Range], ...] = ()
    entailment: float | str | None = None  # a threshold on P(entailment) or "argmax"
    keep_copies: bool = False  # paraphrases identical to their reference (is_copy) or near it (copy_kind) stay in
    keep_non_words: bool = False  # paraphrases with a non-word (generation.screening) stay in, marked
    # the loaded NLI model (scoring.releases.entailment.EntailmentJudge) that entailment= runs on
    judge: Any = dataclasses.field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The manifest's record of the filters (JSON)."""

        def rng(r):
            return None if r is None else {"min": r[0], "max": r[1]}

        entailment = None
        if self.entailment is not None:
            entailment = {
                "rule": self.entailment,
                "directions": "both",
                "model": self.judge.manifest() if self.judge is not None else None,
            }
        return {
            "length": rng(self.length),
            "paraphrase_length": rng(self.paraphrase_length),
            "overlap": {str(n): rng(r) for n, r in self.overlap},
            "min_score": self.min_score,
            "rerank": self.rerank,
            "top": self.top,
            "bleu": rng(self.bleu),
            "repetition": {str(n): rng(r) for n, r in self.repetition},
            "entailment": entailment,
            "keep_copies": self.keep_copies,
            "keep_non_words": self.keep_non_words,
        }


def _bound(key: str, text: str | None, highest: float) -> float | None:
    """One bound of a range: digits 0-9 (``api.numbers.ascii_float``: no ``١٢``, ``1_0``, ``nan`` or a value
    that overflows to infinity), 0 to ``highest``, so every bound is a finite number a manifest can record."""
    if text is None:
        return None
    try:
        value = ascii_float(text, name=f"{key}'s bound")
    except ValueError as exc:
        raise FilterError(str(exc)) from None
    if not 0 <= value <= highest:
        what = "fractions between 0 and 1" if highest == 1 else f"between 0 and {highest}"
        raise FilterError(f"{key} bound {shown(text)}: {key} bounds are {what}")
    return value


def _parse_range(key: str, text: str, highest: float = MAX_LENGTH_BOUND) -> Range:
    m = _RANGE.match(text)
    if not m or (m.group(1) is None and m.group(2) is None):
        raise FilterError(f"{key}={shown(text)}: expected a range LO-HI, LO- or -HI")
    lo, hi = _bound(key, m.group(1), highest), _bound(key, m.group(2), highest)
    if lo is not None and hi is not None and lo > hi:
        raise FilterError(f"{key}={shown(text)}: the lower bound is above the upper bound")
    return lo, hi


def _parse_fraction_range(key: str, text: str) -> Range:
    """A range of fractions (overlap, repetition): bounds between 0 and 1."""
    return _parse_range(key, text, highest=1)


def _parse_entailment(text: str) -> float | str:
    from scoring.releases.entailment import ARGMAX

    if text.strip().lower() == ARGMAX:
        return ARGMAX
    try:
        value = ascii_float(text, name="entailment")  # digits 0-9 only
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise FilterError(
            f"entailment={shown(text)}: expected argmax or a probability threshold in (0, 1] written in digits "
            "0-9, e.g. 0.75 or 0.90"
        )
    return value


def parse_filters(
    spec: str | list[str] | None,
    *,
    min_score: float | None = None,
    entailment_model: str | None = None,
    load_model: bool = True,
    confined: bool = False,
    keep_copies: bool = False,
    keep_non_words: bool = False,
) -> ReleaseFilters:
    """Parse ``--filters`` items (see the module docstring); ``min_score`` is ``--min-score``, ``keep_copies``
    is ``--keep-copies`` (the same as ``copies=keep``), ``keep_non_words`` is ``--keep-non-words`` (``non_words=keep``),
    ``entailment_model`` is ``--entailment-model`` (loaded here, so a bad folder fails before any writing;
    with ``load_model=False`` only its folder is checked and the filters carry no judge: for validating
    a request whose export runs elsewhere). ``confined``: a folder typed into a web form, taken only under
    the allowed model roots (``scoring.releases.entailment.allowed_entailment_model``); the command line takes any."""
    if isinstance(spec, (list, tuple)):
        spec = ",".join(spec)
    items = [i for i in re.split(r"[,\s]+", spec or "") if i]
    values: dict[str, Any] = {}
    overlap: dict[int, Range] = {}
    repetition: dict[int, Range] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise FilterError(f"filter {shown(item)}: expected key=value")
        if (
            key in values
            or (key in _OVERLAP_KEYS and _OVERLAP_KEYS[key] in overlap)
            or (key in _REPETITION_KEYS and _REPETITION_KEYS[key] in repetition)
        ):
            raise FilterError(f"filter {shown(key)} given twice")
        if key == "len":
            values[key] = _parse_range(key, value)
        elif key == "plen":
            values[key] = _parse_range(key, value)
        elif key in _OVERLAP_KEYS:
            overlap[_OVERLAP_KEYS[key]] = _parse_fraction_range(key, value)
        elif key in _REPETITION_KEYS:
            repetition[_REPETITION_KEYS[key]] = _parse_fraction_range(key, value)
        elif key == "bleu":
            values[key] = _parse_range(key, value, highest=100)
        elif key == "entailment":
            values[key] = _parse_entailment(value)
        elif key == "score":
            try:
                values[key] = ascii_float(value, name="score")  # float("١٢") is 12.0: digits 0-9 only
            except ValueError as exc:
                raise FilterError(str(exc)) from None
        elif key == "rerank":
            if value not in RERANKS:
                raise FilterError(f"rerank={shown(value)}: one of {', '.join(RERANKS)}")
            values[key] = value
        elif key in ("copies", "non_words"):
            if value not in COPIES:
                raise FilterError(f"{key}={shown(value)}: one of {', '.join(COPIES)}")
            values[key] = value
        elif key == "top":
            try:  # int() of 4,301 digits raises: ascii_int reads at most 19
                values[key] = ascii_int(value, name="top", minimum=1, maximum=MAX_TOP)
            except ValueError:
                raise FilterError(
                    f"top={shown(value)}: expected a positive integer (1 to {MAX_TOP}) written in digits 0-9"
                ) from None
        else:
            raise FilterError(f"unknown filter {shown(key)} (known: {_KNOWN})")
    if keep_copies and values.get("copies") == "drop":
        raise FilterError("--keep-copies and copies=drop disagree: give one")
    if keep_non_words and values.get("non_words") == "drop":
        raise FilterError("--keep-non-words and non_words=drop disagree: give one")
    if min_score is not None and "score" in values and float(min_score) != values["score"]:
        raise FilterError(f"--min-score {min_score} and score={values['score']} disagree: give it once")
    score = float(min_score) if min_score is not None else values.get("score")
    if score is not None and not 0.0 <= score <= 100.0:  # NaN fails too
        raise FilterError(f"minimum score {score}: predicted similarities run from 0 to 100")
    judge = None
    if "entailment" in values and not entailment_model:
        raise FilterError(f"entailment={values['entailment']}: give the NLI model with --entailment-model DIR")
    if entailment_model and "entailment" not in values:
        raise FilterError("--entailment-model given without an entailment=argmax|THRESHOLD filter")
    if entailment_model:
        from scoring.releases.entailment import (
            EntailmentJudge,
            EntailmentModelError,
            allowed_entailment_model,
            entailment_model_folder,
        )

        try:
            typed = entailment_model
            if confined:  # messages name the folder as typed, never by the server's path
                entailment_model = allowed_entailment_model(entailment_model)
            if load_model:
                judge = EntailmentJudge(entailment_model, shown_as=typed if confined else None)
            else:
                entailment_model_folder(entailment_model)
        except EntailmentModelError as exc:
            raise FilterError(str(exc)) from None
    return ReleaseFilters(
        length=values.get("len"),
        paraphrase_length=values.get("plen"),
        overlap=tuple(sorted(overlap.items())),
        min_score=score,
        rerank=values.get("rerank"),
        top=values.get("top"),
        bleu=values.get("bleu"),
        repetition=tuple(sorted(repetition.items())),
        entailment=values.get("entailment"),
        judge=judge,
        keep_copies=keep_copies or values.get("copies") == "keep",
        keep_non_words=keep_non_words or values.get("non_words") == "keep",
    )


def _inside(value: float, bounds: Range | None) -> bool:
    if bounds is None:
        return True
    lo, hi = bounds
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _overlap_of_tokens(ref: list[str], para: list[str], n: int) -> float | None:
    a = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
    b = Counter(tuple(para[i : i + n]) for i in range(len(para) - n + 1))
    denominator = min(sum(a.values()), sum(b.values()))
    if denominator == 0:
        return None
    return sum((a & b).values()) / denominator


def ngram_overlap(reference: str, paraphrase: str, n: int) -> float | None:
    """Wieting et al. (2017) §5.7: n-grams shared by both (clipped counts) / n-grams of whichever sentence
    has fewer; None when either is too short for order ``n``."""
    return _overlap_of_tokens(tokens(reference), tokens(paraphrase), n)


@functools.cache
def _sentence_bleu():
    """sacrebleu's BLEU with no tokenizer and no smoothing, made once: sacrebleu loads when the BLEU filter
    runs, not with the app (issue 37)."""
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="none", lowercase=False, smooth_method="none", effective_order=False)


def sentence_bleu(reference: str, paraphrase: str) -> float:
    """Smoothed sentence BLEU (0-100) of ``paraphrase`` against ``reference``, both normalised as in
    ``diversity.tokens``. Wieting et al. (2017) §5.7: "We use a smoothed sentence-level BLEU variant from
    Nakov et al. (2012) that uses smoothing for all n-gram lengths and also smooths the brevity penalty."
    So, from sacrebleu's clipped n-gram statistics (1-4-grams, no sacrebleu smoothing): every order's
    precision is (matches + 1) / (n-grams + 1), unigrams included (sacrebleu's add-k smooths only n > 1),
    and BP = min(1, exp(1 - (r + 1) / (c + 1))) with r, c the reference and paraphrase lengths.
    An empty paraphrase (or reference) scores 0."""
    ref, hyp = normalize(reference), normalize(paraphrase)
    if not hyp or not ref:
        return 0.0
    stats = _sentence_bleu().corpus_score([hyp], [[ref]])
    log_precision = sum(math.log((stats.counts[n] + 1) / (stats.totals[n] + 1)) for n in range(BLEU_ORDER))
    c, r = stats.sys_len, stats.ref_len
    brevity = 1.0 if c >= r else math.exp(1 - (r + 1) / (c + 1))
    return 100 * brevity * math.exp(log_precision / BLEU_ORDER)


def repetition_rate(text: str, n: int = 1) -> float | None:
    """Wieting et al. (2017) §5.6: "the repetition percentage of unigrams and trigrams ... is defined as the
    percentage of words that are repetitions (i.e., have already appeared in the sentence). For unigrams, we
    only consider words consisting of at least 3 characters." Here as a fraction: n-grams of the sentence
    that already appeared earlier in it / its n-grams (unigrams: only words of >= 3 characters). None when
    the sentence has no such n-gram."""
    words = tokens(text)
    if n == 1:
        grams = [w for w in words if len(w) >= MIN_REPEAT_CHARS]
    else:
        grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return None
    return (len(grams) - len(set(grams))) / len(grams)


def _keep(f: ReleaseFilters, ref_tokens: list[str], candidate: dict[str, Any], reference: str) -> bool:
    if f.min_score is not None and (candidate.get("score") is None or candidate["score"] < f.min_score):
        return False
    for n, bounds in f.repetition:
        value = repetition_rate(candidate["text"], n)
        if value is not None and not _inside(value, bounds):
            return False
    if f.bleu is not None and not _inside(sentence_bleu(reference, candidate["text"]), f.bleu):
        return False
    if f.paraphrase_length is None and not f.overlap:
        return True
    para = tokens(candidate["text"])
    if f.paraphrase_length is not None and not _inside(len(para), f.paraphrase_length):
        return False
    for n, bounds in f.overlap:
        value = _overlap_of_tokens(ref_tokens, para, n)
        if value is not None and not _inside(value, bounds):
            return False
    return True


def score_order(candidate: dict[str, Any]) -> tuple[float, float]:
    """How released pairs are ordered by score (``rerank=score``, the parabank2 layout): the released score,
    highest first, then the raw prediction (pairs a calibration map's flat step gives one score keep the
    regressor's order); unscored pairs last."""
    score = candidate.get("score")
    raw = candidate.get("raw_score", score)
    return (-score if score is not None else math.inf, -raw if raw is not None else math.inf)


def filter_candidates(f: ReleaseFilters, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidates of one (scored) shard record that pass ``f``, in release order."""
    if f.length is not None and not _inside(record.get("length") or 0, f.length):
        return []
    reference = record["reference"]
    ref_tokens = tokens(reference) if f.overlap else []
    kept = [
        c
        for c in record.get("candidates") or []
        if (f.keep_copies or copy_kind(reference, c["text"]) is None) and _keep(f, ref_tokens, c, reference)
    ]
    if f.entailment is not None and kept:
        if f.judge is None:
            raise FilterError(f"entailment={f.entailment}: no NLI model loaded (--entailment-model DIR)")
        entailed = f.judge.keep_both_ways(record["reference"], [c["text"] for c in kept], f.entailment)
        kept = [c for c, ok in zip(kept, entailed) if ok]
    if f.rerank == "dissimilar" and kept:
        from generation.decoding.rerank import rerank_dissimilar  # imports torch: only when asked for

        # rerank_dissimilar wants a higher-is-better model score: the negated NLL (unknown NLL last)
        outputs = [
            {"text": c["text"], "score": -c["nll"] if c.get("nll") is not None else float("-inf"), "c": c} for c in kept
        ]
        kept = [o["c"] for o in rerank_dissimilar(outputs, record["reference"])]
    elif f.rerank == "score":
        kept = sorted(kept, key=score_order)
    if f.top is not None:
        kept = kept[: f.top]
    return kept
