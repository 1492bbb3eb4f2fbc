"""Features of (reference, paraphrase) pairs for the similarity regressor (ParaBank §5.1).

A pair is a dict: ``reference``, ``paraphrase``, optional ``nll`` (float or None) and optional
``constraints`` — either one constraint set ``{"positive": [[tok, ...], ...], "negative": [...],
"bos_avoid": [...]}`` or a resource candidate's ``{system: constraint set}`` (their phrases are united).

Lexical features use the diversity module's normalisation (lowercase, punctuation deleted, whitespace
tokens), so "what the regressor sees" matches Tab. 4's diversity figures:

* lengths: ``ref_len``, ``para_len`` (words), ``len_ratio`` (para/ref), ``len_diff`` (absolute);
* n-gram overlap for n = 1..4 from sacrebleu's n-gram statistics: ``prec_n`` (clipped matches over the
  paraphrase's n-grams, BLEU's precision) and ``rec_n`` (the same matches over the reference's);
* ``bleu``: sacrebleu's sentence BLEU (exp smoothing, effective order); ``pinc`` (0-100);
* ``lev``: word Levenshtein distance, ``lev_norm``: divided by the longer length;
* ``char_sim``: 1 - character edit distance / longer length; ``char3_jaccard``: Jaccard of the sets of
  character trigrams; ``identical``: equal after normalisation;
* ``nll``, ``nll_per_word`` (0 when unknown) and ``nll_missing`` (1 when unknown);
* constraints: how many positive / negative / beginning-of-sentence-avoid phrases there were and how
  many the paraphrase obeyed (positive: the phrase occurs; negative: it does not; bos_avoid: the
  paraphrase does not start with it);
* ``cosine``: cosine of the pair's all-MiniLM-L6-v2 sentence embeddings, and ``align_p``, ``align_r``,
  ``align_f``: BERTScore-like greedy alignment of their token vectors (``with_embeddings=True`` only).

Pairs whose reference has more than 100 of the encoder's subword tokens are skipped as in the paper:
their row is NaN and ``keep`` is False.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from .diversity import _levenshtein, normalize, pinc
from .embeddings import MAX_REFERENCE_SUBWORDS, pair_similarities, subword_lengths

MAX_ORDER = 4
LEXICAL_FEATURES = (
    ["ref_len", "para_len", "len_ratio", "len_diff"]
    + [f"prec_{n}" for n in range(1, MAX_ORDER + 1)]
    + [f"rec_{n}" for n in range(1, MAX_ORDER + 1)]
    + ["bleu", "pinc", "lev", "lev_norm", "char_sim", "char3_jaccard", "identical",
       "nll", "nll_per_word", "nll_missing",
       "cons_pos", "cons_pos_obeyed", "cons_neg", "cons_neg_obeyed", "cons_bos", "cons_bos_obeyed"]
)
EMBEDDING_FEATURES = ["cosine", "align_p", "align_r", "align_f"]


def feature_names(*, with_embeddings: bool) -> list[str]:
    return list(LEXICAL_FEATURES) + (EMBEDDING_FEATURES if with_embeddings else [])


@dataclasses.dataclass
class FeatureBatch:
    names: list[str]
    matrix: np.ndarray   # n x len(names), float64; NaN rows where keep is False
    keep: np.ndarray     # bool: the reference has at most 100 subword tokens


class PairError(ValueError):
    """A pair that is not a (reference, paraphrase[, nll, constraints]) dict; names its position."""


def _check(i: int, pair: Mapping[str, Any]) -> tuple[str, str, float | None, Any]:
    if not isinstance(pair, Mapping):
        raise PairError(f"pair {i}: expected a dict, got {type(pair).__name__}")
    ref, para = pair.get("reference"), pair.get("paraphrase")
    if not isinstance(ref, str) or not isinstance(para, str):
        raise PairError(f"pair {i}: 'reference' and 'paraphrase' must be strings")
    nll = pair.get("nll")
    if nll is not None:
        try:
            nll = float(nll)
        except (TypeError, ValueError):
            raise PairError(f"pair {i}: nll {nll!r} is not a number") from None
        if math.isnan(nll):
            nll = None
        elif math.isinf(nll):
            raise PairError(f"pair {i}: nll is infinite")
    return ref, para, nll, pair.get("constraints")


_BLEU_SMOOTH = "exp"


def _ngram_stats(ref: str, para: str) -> tuple[list[int], list[int], list[int]]:
    """Per order: clipped matches, paraphrase n-grams, reference n-grams (sacrebleu's counting)."""
    ref_counts, _ = extract_all_word_ngrams(ref, 1, MAX_ORDER)
    para_counts, _ = extract_all_word_ngrams(para, 1, MAX_ORDER)
    correct, para_total, ref_total = [0] * MAX_ORDER, [0] * MAX_ORDER, [0] * MAX_ORDER
    for ngram, count in para_counts.items():
        n = len(ngram) - 1
        para_total[n] += count
        other = ref_counts.get(ngram)
        if other:
            correct[n] += min(count, other)
    for ngram, count in ref_counts.items():
        ref_total[len(ngram) - 1] += count
    return correct, para_total, ref_total


def _phrases(constraints: Any) -> dict[str, set[tuple[str, ...]]]:
    """Positive, negative and bos_avoid phrases (lowercased token tuples) of one set or of {system: set}."""
    out: dict[str, set] = {"positive": set(), "negative": set(), "bos_avoid": set()}
    if not constraints:
        return out
    if not isinstance(constraints, Mapping):
        raise PairError("constraints must be a dict")
    sets = [constraints] if any(k in constraints for k in out) else list(constraints.values())
    for cset in sets:
        if not isinstance(cset, Mapping):
            continue
        for kind in out:
            for phrase in cset.get(kind) or ():
                toks = phrase.split() if isinstance(phrase, str) else phrase
                toks = tuple(normalize(" ".join(str(t) for t in toks)).split())
                if toks:
                    out[kind].add(toks)
    return out


def _contains(tokens: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(tokens[i:i + n]) == phrase for i in range(len(tokens) - n + 1))


def _constraint_counts(para_tokens: list[str], constraints: Any) -> list[float]:
    ph = _phrases(constraints)
    pos = sum(_contains(para_tokens, p) for p in ph["positive"])
    neg = sum(not _contains(para_tokens, p) for p in ph["negative"])
    bos = sum(tuple(para_tokens[:len(p)]) != p for p in ph["bos_avoid"])
    return [len(ph["positive"]), pos, len(ph["negative"]), neg, len(ph["bos_avoid"]), bos]


def _char3(text: str) -> set[str]:
    padded = f"  {text} "
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


def lexical_row(reference: str, paraphrase: str, nll: float | None = None, constraints: Any = None) -> list[float]:
    """The lexical features of one pair, in LEXICAL_FEATURES order."""
    ref_n, para_n = normalize(reference), normalize(paraphrase)
    ref_t, para_t = ref_n.split(), para_n.split()
    lr, lp = len(ref_t), len(para_t)
    correct, para_total, ref_total = _ngram_stats(ref_n, para_n)
    prec = [c / t if t else 0.0 for c, t in zip(correct, para_total)]
    rec = [c / t if t else 0.0 for c, t in zip(correct, ref_total)]
    if lp:
        bleu = BLEU.compute_bleu(correct=correct, total=para_total, sys_len=lp, ref_len=lr,
                                 smooth_method=_BLEU_SMOOTH, effective_order=True).score
    else:
        bleu = 0.0
    pinc_value = pinc(reference, paraphrase)
    lev = _levenshtein(ref_t, para_t)
    longest_chars = max(len(ref_n), len(para_n))
    char_sim = 1.0 - _levenshtein(list(ref_n), list(para_n)) / longest_chars if longest_chars else 1.0
    g_ref, g_para = _char3(ref_n), _char3(para_n)
    union = len(g_ref | g_para)
    row = [lr, lp, lp / max(lr, 1), abs(lp - lr), *prec, *rec, bleu,
           100.0 if pinc_value is None else pinc_value, lev, lev / max(lr, lp, 1), char_sim,
           len(g_ref & g_para) / union if union else 1.0, float(ref_n == para_n),
           0.0 if nll is None else nll, 0.0 if nll is None else nll / max(lp, 1), float(nll is None)]
    row += _constraint_counts(para_t, constraints)
    return row


def pair_features(pairs: Sequence[Mapping[str, Any]], *, with_embeddings: bool, batch_size: int = 64) -> FeatureBatch:
    """The feature matrix of a batch of pairs (embeddings encoded in batches, each distinct text once)."""
    checked = [_check(i, p) for i, p in enumerate(pairs)]
    names = feature_names(with_embeddings=with_embeddings)
    n = len(checked)
    matrix = np.full((n, len(names)), np.nan, dtype=np.float64)
    keep = subword_lengths([c[0] for c in checked]) <= MAX_REFERENCE_SUBWORDS
    rows = np.flatnonzero(keep)
    for i in rows:
        ref, para, nll, constraints = checked[i]
        matrix[i, :len(LEXICAL_FEATURES)] = lexical_row(ref, para, nll, constraints)
    if with_embeddings and len(rows):
        matrix[rows, len(LEXICAL_FEATURES):] = pair_similarities([checked[i][0] for i in rows],
                                                                 [checked[i][1] for i in rows], batch_size=batch_size)
    return FeatureBatch(names, matrix, keep)
