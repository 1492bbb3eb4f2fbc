"""Lexical diversity of paraphrases against their references (ParaBank §5.4, Tab. 4 bottom).

* Text is normalised first (ParaBank footnote 6): lowercased, every Unicode punctuation character
  (category P*) deleted, then split on whitespace.
* BLEU without brevity penalty: the normalised references of a system x length cell are concatenated
  into one reference paragraph and the paraphrases, in the same order, into one hypothesis paragraph;
  sacrebleu's n-gram statistics (1-4-grams, no smoothing, one segment; counted here as sacrebleu counts
  them, :class:`Paragraphs`, so that a paragraph compared many times is counted once) give the precisions
  and the brevity penalty is forced to 1 (``BLEU.compute_bleu`` with ref_len = sys_len). Lower = more diverse.
* Unigram precision: the (clipped) 1-gram precision of the same paragraphs, as a percentage.
* PINC (Chen & Dolan 2011): per pair, the mean over n = 1..4 of 1 - |n-grams(ref) ∩ n-grams(para)| /
  |n-grams(para)| (n-gram sets; orders the paraphrase is too short for are left out), x 100; a cell's
  PINC is the mean over its pairs. Higher = more diverse.
* Word-level Levenshtein distance between the normalised token lists (casing ignored, as in
  Wubben et al.), binned 0 (identical after normalisation), 1, 2, 3, 4, 5+.

ParaBank 2's view (Hu et al. 2019b, Tab. 2; the ``pairwise`` table, :func:`pairwise_rows`), per system:

* 1-BLEU against the reference: 100 - the BLEU above over all of the system's pairs as one cell (every
  length together). Higher = further from the reference.
* Intersection over union: per pair, |A ∩ B| / |A ∪ B| of the two normalised texts' token *sets* (1 when
  both are empty), the mean over the system's pairs. Lower = further from the reference.
* Pairwise 1-BLEU between two systems: for every reference both systems have an output of, each output of
  the system listed first (``generation.constraints.systems.system_sort_key``: numbers, then ranks) is a
  reference and each output of the other a hypothesis (every combination when a system has several outputs for a
  reference); 100 -
  the BLEU above over all those pairs as one cell. One figure per unordered pair (rank 1 vs rank 3; sys17 vs
  sys34), so the matrix is symmetric; none (null) for a system with itself or two systems without a shared
  reference. An output the two systems share (one merged candidate) counts as identical (1-BLEU 0). Higher =
  the systems' paraphrases of the same sentence differ more.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import statistics
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from rapidfuzz.distance import Levenshtein

if TYPE_CHECKING:
    import numpy as np

MAX_ORDER = 4
LEVENSHTEIN_BINS = ("0", "1", "2", "3", "4", "5+")


class _PunctuationTable(dict):
    """str.translate table deleting Unicode punctuation, filled lazily."""

    def __missing__(self, code: int):
        value = None if unicodedata.category(chr(code)).startswith("P") else code
        self[code] = value
        return value


_PUNCTUATION = _PunctuationTable()


@functools.cache
def _bleu():
    """sacrebleu's BLEU for the diversity tables' scores, made once: sacrebleu loads when a table is computed, not
    with the app (issue 37)."""
    from sacrebleu.metrics import BLEU

    return BLEU(
        tokenize="none", lowercase=False, smooth_method="none", effective_order=False, max_ngram_order=MAX_ORDER
    )


def normalize(text: str) -> str:
    """Lowercase, delete punctuation, collapse whitespace."""
    return " ".join(text.lower().translate(_PUNCTUATION).split())


def tokens(text: str) -> list[str]:
    return normalize(text).split()


@dataclasses.dataclass
class BleuStats:
    bleu: float
    precisions: list
    counts: list
    totals: list
    hyp_len: int
    ref_len: int

    @property
    def unigram_precision(self) -> float:
        return self.precisions[0]


@dataclasses.dataclass(frozen=True)
class Paragraph:
    """One side of a BLEU cell: its texts' normalised tokens concatenated, as its distinct 1-4-grams (ids in the
    vocabulary of the :class:`Paragraphs` that made it), their counts and orders (n - 1)."""

    length: int
    ids: np.ndarray
    counts: np.ndarray
    orders: np.ndarray


class Paragraphs:
    """Paragraphs made with one n-gram vocabulary, so that any two of them can be compared, each made once (a
    system compared with 36 others is counted once, not 36 times)."""

    def __init__(self) -> None:
        self.vocabulary: dict[tuple[str, ...], int] = {}
        self._made: dict[tuple[str, ...], Paragraph] = {}

    def of(self, texts: Sequence[str]) -> Paragraph:
        key = tuple(texts)
        if key not in self._made:
            import numpy as np  # loads when a table is computed, not with the app (issue 37)

            toks = [t for text in key for t in tokens(text)]
            ngrams: Counter = Counter()
            for n in range(1, MAX_ORDER + 1):  # sacrebleu's extract_all_word_ngrams, with the loop in C
                ngrams.update(zip(*(toks[i:] for i in range(n))))
            vocabulary, size = self.vocabulary, len(ngrams)
            self._made[key] = Paragraph(
                len(toks),
                np.fromiter((vocabulary.setdefault(g, len(vocabulary)) for g in ngrams), np.int64, size),
                np.fromiter(ngrams.values(), np.int64, size),
                np.fromiter((len(g) - 1 for g in ngrams), np.int64, size),
            )
        return self._made[key]


def bleu_no_bp(references: Sequence[str], paraphrases: Sequence[str]) -> BleuStats:
    """BLEU (0-100) with no brevity penalty between the concatenated references and paraphrases."""
    if len(references) != len(paraphrases):
        raise ValueError(f"{len(references)} references for {len(paraphrases)} paraphrases")
    paragraphs = Paragraphs()
    return paragraph_bleu(paragraphs.of(references), paragraphs.of(paraphrases))


def paragraph_bleu(ref: Paragraph, hyp: Paragraph) -> BleuStats:
    """:func:`bleu_no_bp` of two paragraphs of one :class:`Paragraphs`: sacrebleu's clipped n-gram statistics
    (one segment, one reference) and its score with the brevity penalty forced to 1."""
    totals = [max(hyp.length - n, 0) for n in range(MAX_ORDER)]
    if not hyp.length or not ref.length:
        return BleuStats(0.0, [0.0] * MAX_ORDER, [0] * MAX_ORDER, totals, hyp.length, ref.length)
    import numpy as np  # as in Paragraphs.of

    _, at_hyp, at_ref = np.intersect1d(hyp.ids, ref.ids, assume_unique=True, return_indices=True)
    clipped = np.minimum(hyp.counts[at_hyp], ref.counts[at_ref])
    counts = [int(c) for c in np.bincount(hyp.orders[at_hyp], weights=clipped, minlength=MAX_ORDER)]
    no_bp = _bleu().compute_bleu(
        correct=counts,
        total=totals,
        sys_len=hyp.length,
        ref_len=hyp.length,
        smooth_method="none",
        max_ngram_order=MAX_ORDER,
    )
    return BleuStats(float(no_bp.score), list(no_bp.precisions), counts, totals, hyp.length, ref.length)


def _ngrams(toks: list[str], n: int) -> set:
    return {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def pinc(reference: str, paraphrase: str, max_order: int = MAX_ORDER) -> float | None:
    """PINC x 100 of one pair; None when the paraphrase is empty after normalisation."""
    ref, para = tokens(reference), tokens(paraphrase)
    terms = []
    for n in range(1, max_order + 1):
        p = _ngrams(para, n)
        if p:
            terms.append(1.0 - len(p & _ngrams(ref, n)) / len(p))
    return 100.0 * statistics.fmean(terms) if terms else None


def word_levenshtein(a: str, b: str) -> int:
    """Word-level edit distance (insert, delete, substitute one word) between normalised texts."""
    return sequence_levenshtein(tokens(a), tokens(b))


def sequence_levenshtein(x: Sequence[Hashable], y: Sequence[Hashable]) -> int:
    """Edit distance of two token (or character) lists; rapidfuzz's C++ bit-parallel Levenshtein, many
    times faster than the pure-Python one it replaced (``scoring.similarity.features`` calls this per pair)."""
    return Levenshtein.distance(x, y)


def levenshtein_bin(distance: int) -> str:
    return "5+" if distance >= 5 else str(distance)


def diversity_rows(data) -> list[dict]:
    """Per system (``data`` is an aggregation.CampaignData): BLEU-no-BP per length bucket in ``by_length``,
    ``avg`` the mean of the bucket BLEUs, ``std`` null, ``n`` the number of candidates; extra keys
    ``unigram_precision`` and ``pinc`` per bucket and ``levenshtein_bins``. Every candidate of the
    system in the campaign counts, judged or not."""
    rows = []
    distance, pinc_of = {}, {}  # per candidate, shared by every system that produced it
    for c in data.candidates:
        distance[c.id] = sequence_levenshtein(tokens(c.reference_text), tokens(c.text))
        pinc_of[c.id] = pinc(c.reference_text, c.text)
    for system in data.systems:
        cells: dict[int, list] = defaultdict(list)
        for c in data.of_system(system):
            cells[c.bucket].append(c)
        bleu, unigram, pinc_cell = {}, {}, {}
        for b in data.buckets:
            cands = cells.get(b, [])
            if not cands:
                bleu[str(b)] = unigram[str(b)] = pinc_cell[str(b)] = None
                continue
            stats = bleu_no_bp([c.reference_text for c in cands], [c.text for c in cands])
            bleu[str(b)], unigram[str(b)] = stats.bleu, stats.unigram_precision
            values = [pinc_of[c.id] for c in cands if pinc_of[c.id] is not None]
            pinc_cell[str(b)] = statistics.fmean(values) if values else None
        present = [v for v in bleu.values() if v is not None]
        everyone = [c for b in data.buckets for c in cells.get(b, [])]
        bins = dict.fromkeys(LEVENSHTEIN_BINS, 0)
        for c in everyone:
            bins[levenshtein_bin(distance[c.id])] += 1
        rows.append(
            {
                "system": system,
                "by_length": bleu,
                "avg": statistics.fmean(present) if present else None,
                "std": None,
                "n": len(everyone),
                "unigram_precision": unigram,
                "pinc": pinc_cell,
                "levenshtein_bins": bins,
            }
        )
    return rows


def intersection_over_union(a: str, b: str) -> float:
    """|A ∩ B| / |A ∪ B| of the normalised token sets of ``a`` and ``b``; 1.0 when both are empty."""
    x, y = set(tokens(a)), set(tokens(b))
    return len(x & y) / len(x | y) if x | y else 1.0


def one_minus_bleu(references: Sequence[str], paraphrases: Sequence[str]) -> float | None:
    """100 - :func:`bleu_no_bp` of the paraphrases against the references (one cell), never below 0 (identical
    text's BLEU can come out a hair over 100); None for no pair."""
    return _one_minus(bleu_no_bp(references, paraphrases)) if references else None


def _one_minus(stats: BleuStats) -> float:
    return max(0.0, 100.0 - stats.bleu)


def pairwise_one_minus_bleu(
    first: dict[int, list[str]], second: dict[int, list[str]], paragraphs: Paragraphs | None = None
) -> tuple[float | None, int]:
    """(1-BLEU, pairs) between two systems' outputs keyed by reference id: ``first``'s outputs are the references,
    ``second``'s the hypotheses, every combination for each shared reference, references in id order (one cell
    whose text is concatenated, so the order is fixed; module docstring). ``paragraphs`` keeps each side's
    n-grams for the next call."""
    left, right = [], []
    for ref in sorted(first.keys() & second.keys()):
        for a, b in itertools.product(first[ref], second[ref]):
            left.append(a)
            right.append(b)
    if not left:
        return None, 0
    paragraphs = Paragraphs() if paragraphs is None else paragraphs
    return _one_minus(paragraph_bleu(paragraphs.of(left), paragraphs.of(right))), len(left)


def pairwise_rows(data) -> list[dict]:
    """ParaBank 2's diversity view per system (``data`` is an aggregation.CampaignData; rules in the module
    docstring): ``ref_1_bleu`` and ``ref_iou`` against the reference, ``pairwise`` {other system: 1-BLEU or
    null}, ``pairs`` {other system: output pairs compared}, ``avg`` the mean of the row's pairwise figures,
    ``std`` null, ``n`` the system's candidates. Every candidate of the system in the campaign counts, judged
    or not; systems in ``data.systems`` order."""
    systems = data.systems
    outputs: dict[str, dict[int, list[str]]] = {}
    for system in systems:
        by_ref: dict[int, list[str]] = defaultdict(list)
        for c in data.of_system(system):
            by_ref[c.reference_id].append(c.text)
        outputs[system] = dict(by_ref)
    between: dict[tuple[str, str], tuple[float | None, int]] = {}
    paragraphs = Paragraphs()
    for first, second in itertools.combinations(systems, 2):  # in systems order: the first is the reference
        between[first, second] = between[second, first] = pairwise_one_minus_bleu(
            outputs[first], outputs[second], paragraphs
        )
    rows = []
    for system in systems:
        cands = data.of_system(system)
        pairwise = {o: (None if o == system else between[system, o][0]) for o in systems}
        present = [v for v in pairwise.values() if v is not None]
        rows.append(
            {
                "system": system,
                "ref_1_bleu": one_minus_bleu([c.reference_text for c in cands], [c.text for c in cands]),
                "ref_iou": statistics.fmean(intersection_over_union(c.reference_text, c.text) for c in cands)
                if cands
                else None,
                "pairwise": pairwise,
                "pairs": {o: (0 if o == system else between[system, o][1]) for o in systems},
                "avg": statistics.fmean(present) if present else None,
                "std": None,
                "n": len(cands),
            }
        )
    return rows
