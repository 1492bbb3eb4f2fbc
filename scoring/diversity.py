"""Lexical diversity of paraphrases against their references (ParaBank §5.4, Tab. 4 bottom).

* Text is normalised first (ParaBank footnote 6): lowercased, every Unicode punctuation character
  (category P*) deleted, then split on whitespace.
* BLEU without brevity penalty: the normalised references of a system x length cell are concatenated
  into one reference paragraph and the paraphrases, in the same order, into one hypothesis paragraph;
  sacrebleu's n-gram statistics (1-4-grams, no smoothing, one segment) give the precisions and the
  brevity penalty is forced to 1 (``BLEU.compute_bleu`` with ref_len = sys_len). Lower = more diverse.
* Unigram precision: the (clipped) 1-gram precision of the same paragraphs, as a percentage.
* PINC (Chen & Dolan 2011): per pair, the mean over n = 1..4 of 1 - |n-grams(ref) ∩ n-grams(para)| /
  |n-grams(para)| (n-gram sets; orders the paraphrase is too short for are left out), x 100; a cell's
  PINC is the mean over its pairs. Higher = more diverse.
* Word-level Levenshtein distance between the normalised token lists (casing ignored, as in
  Wubben et al.), binned 0 (identical after normalisation), 1, 2, 3, 4, 5+.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Hashable, Sequence

from rapidfuzz.distance import Levenshtein

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
    """sacrebleu's BLEU for the diversity table, made once: sacrebleu loads when a table is computed, not with
    the app (issue 37)."""
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


def bleu_no_bp(references: Sequence[str], paraphrases: Sequence[str]) -> BleuStats:
    """BLEU (0-100) with no brevity penalty between the concatenated references and paraphrases."""
    if len(references) != len(paraphrases):
        raise ValueError(f"{len(references)} references for {len(paraphrases)} paraphrases")
    ref = " ".join(t for t in (normalize(r) for r in references) if t)
    hyp = " ".join(t for t in (normalize(p) for p in paraphrases) if t)
    if not hyp or not ref:
        n_hyp = len(hyp.split())
        return BleuStats(
            0.0,
            [0.0] * MAX_ORDER,
            [0] * MAX_ORDER,
            [max(n_hyp - n, 0) for n in range(MAX_ORDER)],
            n_hyp,
            len(ref.split()),
        )
    stats = _bleu().corpus_score([hyp], [[ref]])
    no_bp = _bleu().compute_bleu(
        correct=list(stats.counts),
        total=list(stats.totals),
        sys_len=stats.sys_len,
        ref_len=stats.sys_len,
        smooth_method="none",
        max_ngram_order=MAX_ORDER,
    )
    return BleuStats(
        float(no_bp.score), list(no_bp.precisions), list(stats.counts), list(stats.totals), stats.sys_len, stats.ref_len
    )


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


def levenshtein_bins(pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    bins = dict.fromkeys(LEVENSHTEIN_BINS, 0)
    for ref, para in pairs:
        bins[levenshtein_bin(word_levenshtein(ref, para))] += 1
    return bins


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
