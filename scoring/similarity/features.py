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

Optional feature families (``families=``, the recipes of ``train_regressor --recipe v2|v3|v4``), appended
after those, in ``FAMILIES`` order:

* ``nll2``: the NLL treated as the per-token score it is (ParaBank's NLL column and our decoder's beam
  score are length-normalised): ``nll_valid`` (known and >= 0; ParaBank writes -1 for PARANMT, which no
  decoder scored), ``nll_total`` (times the paraphrase's words) and, against the reference's other
  candidates with a valid NLL, ``nll_rel_min`` (minus the group's lowest), ``nll_rank`` (percentile
  rank, 0 = the decoder's best) and ``nll_z`` (z-score in the group);
* ``systems``: what the constraints' keys say (a resource's candidate is merged across the systems
  that produced it, ``{system: set}``): ``sys_n`` systems that produced this text (the decoders agree),
  ``sys_n_rel`` (over the group's largest), ``sys_baseline`` (system 28, no constraint, among them) and
  how many of them are of each kind of Tab. 3 (``sys_neg_high``, ``sys_neg_low``, ``sys_neg_rand``,
  ``sys_pos``, ``sys_bos``, ``sys_ppdb``); a key that is not one of the 37 systems counts for nothing,
  ParaBank 2's ranks ("r1", "r2", ...) included: a rank's output looks like an imported baseline's (whose
  systems the training pairs leave out), an output of no Tab. 3 system, and adding a column for it would
  change every recipe's features and so every stored regressor;
* ``group``: each of ``GROUP_BASE`` relative to the reference's other candidates in the batch:
  minus the group's mean (``grp_X_dmean``), minus its best (``grp_X_dmax``), percentile rank
  (``grp_X_rank``), and ``grp_size``; the embedding columns only ``with_embeddings``;
* ``agree`` (``with_embeddings`` only): how much the candidate agrees with the reference's other
  candidates (the systems' consensus, as minimum-Bayes-risk decoding uses it): mean and largest cosine of
  its embedding with theirs, and cosine with their centroid; the pair's own cosine when it has none;
* ``sts`` (``with_embeddings`` only; recipe ``v4``): ``cosine`` and the alignment's three again, from
  the encoder's STS-tuned top layers (``scoring.similarity.encoder_head``: ``sts_cosine``, ``sts_align_p``,
  ``sts_align_r``, ``sts_align_f``), computed in the same forward pass.

A group is the pairs of one ``pair_features`` call that share the reference text: the scoring job's
batches hold whole resource records, ``score_pairs`` never cuts a run of lines with one reference,
training batches never split a reference.

Pairs whose reference has more than 100 of the encoder's subword tokens are skipped as in the paper:
their row is NaN and ``keep`` is False.

The lexical rows are a pure function of each pair, and on a GPU worker they, not the encoder, bound a chunk's rate
(about 7,900 pairs/s per core). Inside a ``with cpu_workers_on(n)`` block (``scoring.similarity.lexical_processes``; a
scoring job sets it from its ``ScoringDevice.cpu_workers``), ``pair_features`` hands them to ``n`` lexical processes
before the encoder's forward passes start and collects them after, so they overlap with the GPU work; outside, and with
``n`` = 1, they are computed here as before. Either way the matrix is the same, value for value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from scoring.diversity import normalize, pinc, sequence_levenshtein
from scoring.similarity.embeddings import MAX_REFERENCE_SUBWORDS, SentenceEncoder, pair_similarities, subword_lengths
from scoring.similarity.encoder_head import load_head
from scoring.similarity.lexical_processes import collect, current_cpu_workers, lexical_processes

MAX_ORDER = 4
LEXICAL_FEATURES = (
    ["ref_len", "para_len", "len_ratio", "len_diff"]
    + [f"prec_{n}" for n in range(1, MAX_ORDER + 1)]
    + [f"rec_{n}" for n in range(1, MAX_ORDER + 1)]
    + [
        "bleu",
        "pinc",
        "lev",
        "lev_norm",
        "char_sim",
        "char3_jaccard",
        "identical",
        "nll",
        "nll_per_word",
        "nll_missing",
        "cons_pos",
        "cons_pos_obeyed",
        "cons_neg",
        "cons_neg_obeyed",
        "cons_bos",
        "cons_bos_obeyed",
    ]
)
EMBEDDING_FEATURES = ["cosine", "align_p", "align_r", "align_f"]

FAMILIES = ("nll2", "systems", "group", "agree", "sts")
NLL2_FEATURES = ["nll_valid", "nll_total", "nll_rel_min", "nll_rank", "nll_z"]
SYSTEM_KINDS = {
    "sys_neg_high": ("negative", "highest"),
    "sys_neg_low": ("negative", "lowest"),
    "sys_neg_rand": ("negative", "random"),
    "sys_pos": ("positive", None),
    "sys_bos": ("positional", None),
    "sys_ppdb": ("ppdb", None),
}
SYSTEM_FEATURES = ["sys_n", "sys_n_rel", "sys_baseline", *SYSTEM_KINDS]
GROUP_LEXICAL = ["bleu", "char_sim", "lev_norm", "prec_1", "rec_1", "len_ratio"]
GROUP_EMBEDDING = ["cosine", "align_f"]
AGREE_FEATURES = ["agree_mean", "agree_max", "agree_centroid"]
STS_FEATURES = [f"sts_{f}" for f in EMBEDDING_FEATURES]


def group_base(*, with_embeddings: bool) -> list[str]:
    return GROUP_LEXICAL + (GROUP_EMBEDDING if with_embeddings else [])


def family_names(family: str, *, with_embeddings: bool) -> list[str]:
    """The feature names one optional family adds."""
    if family == "nll2":
        return list(NLL2_FEATURES)
    if family == "systems":
        return list(SYSTEM_FEATURES)
    if family == "group":
        return [
            f"grp_{f}_{s}" for f in group_base(with_embeddings=with_embeddings) for s in ("dmean", "dmax", "rank")
        ] + ["grp_size"]
    if family == "agree":
        return list(AGREE_FEATURES) if with_embeddings else []
    if family == "sts":
        return list(STS_FEATURES) if with_embeddings else []
    raise ValueError(f"unknown feature family {family!r} (one of {', '.join(FAMILIES)})")


def check_families(families: Sequence[str]) -> tuple[str, ...]:
    """The families in canonical order, each once; an unknown one is a ValueError."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown feature family {unknown[0]!r} (one of {', '.join(FAMILIES)})")
    return tuple(f for f in FAMILIES if f in set(families))


def feature_names(*, with_embeddings: bool, families: Sequence[str] = ()) -> list[str]:
    names = list(LEXICAL_FEATURES) + (EMBEDDING_FEATURES if with_embeddings else [])
    for family in check_families(families):
        names += family_names(family, with_embeddings=with_embeddings)
    return names


@dataclasses.dataclass
class FeatureBatch:
    names: list[str]
    matrix: np.ndarray  # n x len(names), float64; NaN rows where keep is False
    keep: np.ndarray  # bool: the reference has at most 100 subword tokens


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


def constraint_phrases(constraints: Any) -> dict[str, set[tuple[str, ...]]]:
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
    return any(tuple(tokens[i : i + n]) == phrase for i in range(len(tokens) - n + 1))


def _constraint_counts(para_tokens: list[str], constraints: Any) -> list[float]:
    ph = constraint_phrases(constraints)
    pos = sum(_contains(para_tokens, p) for p in ph["positive"])
    neg = sum(not _contains(para_tokens, p) for p in ph["negative"])
    bos = sum(tuple(para_tokens[: len(p)]) != p for p in ph["bos_avoid"])
    return [len(ph["positive"]), pos, len(ph["negative"]), neg, len(ph["bos_avoid"]), bos]


def _char3(text: str) -> set[str]:
    padded = f"  {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def lexical_row(reference: str, paraphrase: str, nll: float | None = None, constraints: Any = None) -> list[float]:
    """The lexical features of one pair, in LEXICAL_FEATURES order."""
    ref_n, para_n = normalize(reference), normalize(paraphrase)
    ref_t, para_t = ref_n.split(), para_n.split()
    lr, lp = len(ref_t), len(para_t)
    correct, para_total, ref_total = _ngram_stats(ref_n, para_n)
    prec = [c / t if t else 0.0 for c, t in zip(correct, para_total)]
    rec = [c / t if t else 0.0 for c, t in zip(correct, ref_total)]
    if lp:
        bleu = BLEU.compute_bleu(
            correct=correct, total=para_total, sys_len=lp, ref_len=lr, smooth_method=_BLEU_SMOOTH, effective_order=True
        ).score
    else:
        bleu = 0.0
    pinc_value = pinc(reference, paraphrase)
    lev = sequence_levenshtein(ref_t, para_t)
    longest_chars = max(len(ref_n), len(para_n))
    char_sim = 1.0 - sequence_levenshtein(list(ref_n), list(para_n)) / longest_chars if longest_chars else 1.0
    g_ref, g_para = _char3(ref_n), _char3(para_n)
    union = len(g_ref | g_para)
    row = [
        lr,
        lp,
        lp / max(lr, 1),
        abs(lp - lr),
        *prec,
        *rec,
        bleu,
        100.0 if pinc_value is None else pinc_value,
        lev,
        lev / max(lr, lp, 1),
        char_sim,
        len(g_ref & g_para) / union if union else 1.0,
        float(ref_n == para_n),
        0.0 if nll is None else nll,
        0.0 if nll is None else nll / max(lp, 1),
        float(nll is None),
    ]
    row += _constraint_counts(para_t, constraints)
    return row


def lexical_rows(pairs: Sequence[tuple[str, str, float | None, Any]]) -> list[list[float]]:
    """``lexical_row`` of each (reference, paraphrase, nll, constraints): one lexical process's unit of work
    (``scoring.similarity.lexical_processes``)."""
    return [lexical_row(ref, para, nll, constraints) for ref, para, nll, constraints in pairs]


def short_references(references: Sequence[str]) -> np.ndarray:
    """Whether each reference has at most ``MAX_REFERENCE_SUBWORDS`` subword tokens, each distinct text tokenized
    once: a resource's reference is shared by all its candidates, and on a GPU worker this tokenizing is the
    scoring process's own work."""
    unique = list(dict.fromkeys(references))
    short = dict(zip(unique, (subword_lengths(unique) <= MAX_REFERENCE_SUBWORDS).tolist()))
    return np.fromiter((short[r] for r in references), dtype=bool, count=len(references))


def pair_features(
    pairs: Sequence[Mapping[str, Any]],
    *,
    with_embeddings: bool,
    batch_size: int = 64,
    families: Sequence[str] = (),
    sentence_encoder: SentenceEncoder | None = None,
) -> FeatureBatch:
    """The feature matrix of a batch of pairs (embeddings encoded in batches, each distinct text once);
    ``families``: the optional families to append (module docstring; ``sts`` runs the shipped STS-B head,
    ``scoring.similarity.encoder_head``, on the packaged MiniLM only); ``sentence_encoder``: the encoder of the
    embedding columns (None: the packaged MiniLM, ``scoring.similarity.embeddings.encoder_resolve``)."""
    families = check_families(families)
    checked = [_check(i, p) for i, p in enumerate(pairs)]
    names = feature_names(with_embeddings=with_embeddings, families=families)
    n = len(checked)
    matrix = np.full((n, len(names)), np.nan, dtype=np.float64)
    keep = short_references([c[0] for c in checked])
    rows = np.flatnonzero(keep)
    n_base = len(LEXICAL_FEATURES) + (len(EMBEDDING_FEATURES) if with_embeddings else 0)
    workers = current_cpu_workers()
    pending = None
    if workers > 1 and len(rows):  # sent off before the encoder's passes, collected after them
        pending = lexical_processes(workers).submit([checked[i] for i in rows])
    else:
        for i in rows:
            ref, para, nll, constraints = checked[i]
            matrix[i, : len(LEXICAL_FEATURES)] = lexical_row(ref, para, nll, constraints)
    vectors = head_sims = None
    if with_embeddings and len(rows):
        sims = pair_similarities(
            [checked[i][0] for i in rows],
            [checked[i][1] for i in rows],
            batch_size=batch_size,
            with_vectors="agree" in families,
            head=load_head() if "sts" in families else None,
            sentence_encoder=sentence_encoder,
        )
        if "agree" in families:
            sims, vectors = sims
        sims, head_sims = sims[:, : len(EMBEDDING_FEATURES)], sims[:, len(EMBEDDING_FEATURES) :]
        matrix[rows, len(LEXICAL_FEATURES) : n_base] = sims
    if pending is not None:
        matrix[rows, : len(LEXICAL_FEATURES)] = np.asarray(collect(pending), dtype=np.float64)
    if families and len(rows):
        base_names = names[:n_base]
        kept = [checked[i] for i in rows]
        side = RowSideData(
            references=[c[0] for c in kept],
            nlls=[c[2] for c in kept],
            constraints=[c[3] for c in kept],
            vectors=vectors,
            head_sims=head_sims,
        )
        extra = family_matrix(
            matrix[rows, :n_base], base_names, side, families=families, with_embeddings=with_embeddings
        )
        matrix[np.ix_(rows, np.arange(n_base, len(names)))] = extra
    return FeatureBatch(names, matrix, keep)


# --- optional families ----------------------------------------------------------------------------------


def _percentile_rank(x: np.ndarray) -> np.ndarray:
    """Average-rank percentile in (0, 1]: (rank - 0.5) / n, ties sharing their mean rank."""
    from scipy.stats import rankdata

    return (rankdata(x) - 0.5) / len(x)


def _system_row(constraints: Any, systems_table: Mapping[str, Any]) -> list[float]:
    keys = [str(k) for k in constraints] if isinstance(constraints, Mapping) else []
    known = [systems_table[k] for k in keys if k in systems_table]
    row = [float(len(known)), 0.0, float(any(s.kind == "none" for s in known))]
    for kind, selection in SYSTEM_KINDS.values():
        row.append(float(sum(s.kind == kind and (selection is None or s.selection == selection) for s in known)))
    return row


def _systems_table() -> dict[str, Any]:
    from generation.constraints.systems import SYSTEMS

    return {str(s.number): s for s in SYSTEMS}


@dataclasses.dataclass(frozen=True)
class RowSideData:
    """What the optional families read of each row beside its base features, row for row: its reference (rows
    sharing it are a group), NLL and constraints, and the encoder pass's extras, the sentence vectors (``agree``)
    and the STS head's four similarities (``sts``), None when that pass did not make them. One object, so that
    ``family_matrix`` is called with the rows' data, not five lists that must line up."""

    references: Sequence[str]
    nlls: Sequence[float | None]
    constraints: Sequence[Any]
    vectors: np.ndarray | None = None
    head_sims: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.references)
        given = {
            "nlls": self.nlls,
            "constraints": self.constraints,
            "vectors": self.vectors,
            "head_sims": self.head_sims,
        }
        uneven = [name for name, rows in given.items() if rows is not None and len(rows) != n]
        if uneven:
            raise ValueError(f"{', '.join(uneven)}: not one row per reference ({n})")


def family_matrix(
    base: np.ndarray, base_names: list[str], side: RowSideData, *, families: Sequence[str], with_embeddings: bool
) -> np.ndarray:
    """The optional families' columns for rows whose base features are ``base`` and side data ``side`` (module
    docstring); groups are rows sharing the reference text."""
    references, nlls, constraints, vectors = side.references, side.nlls, side.constraints, side.vectors
    _, group = np.unique(np.asarray(references, dtype=object).astype(str), return_inverse=True)
    members = [np.flatnonzero(group == g) for g in range(group.max() + 1)] if len(group) else []
    col = {name: base[:, i] for i, name in enumerate(base_names)}
    blocks = []
    n = len(base)
    if "nll2" in families:
        nll = np.array([np.nan if v is None or v < 0 else float(v) for v in nlls], dtype=np.float64)
        valid = ~np.isnan(nll)
        out = np.zeros((n, len(NLL2_FEATURES)))
        out[:, 0] = valid
        out[valid, 1] = nll[valid] * col["para_len"][valid]
        for idx in members:
            v = idx[valid[idx]]
            if not len(v):
                continue
            x = nll[v]
            out[v, 2] = x - x.min()
            out[v, 3] = _percentile_rank(x)
            sd = x.std()
            out[v, 4] = (x - x.mean()) / sd if sd > 0 else 0.0
        blocks.append(out)
    if "systems" in families:
        table = _systems_table()
        out = np.array([_system_row(c, table) for c in constraints], dtype=np.float64).reshape(n, len(SYSTEM_FEATURES))
        for idx in members:
            top = out[idx, 0].max()
            out[idx, 1] = out[idx, 0] / top if top > 0 else 0.0
        blocks.append(out)
    if "group" in families:
        cols = group_base(with_embeddings=with_embeddings)
        out = np.zeros((n, 3 * len(cols) + 1))
        for idx in members:
            for j, name in enumerate(cols):
                x = col[name][idx]
                best = x.min() if name == "lev_norm" else x.max()  # lev_norm: lower is closer
                out[idx, 3 * j] = x - x.mean()
                out[idx, 3 * j + 1] = x - best
                out[idx, 3 * j + 2] = _percentile_rank(x)
            out[idx, -1] = len(idx)
        blocks.append(out)
    if "agree" in families and with_embeddings:
        out = np.zeros((n, len(AGREE_FEATURES)))
        for idx in members:
            if len(idx) == 1:
                out[idx] = col["cosine"][idx][:, None]
                continue
            v = vectors[idx].astype(np.float64)
            sim = v @ v.T
            np.fill_diagonal(sim, np.nan)
            out[idx, 0] = np.nanmean(sim, axis=1)
            out[idx, 1] = np.nanmax(sim, axis=1)
            total = v.sum(axis=0)
            for k, i in enumerate(idx):  # the centroid of the OTHER candidates
                centroid = total - v[k]
                norm = np.linalg.norm(centroid)
                out[i, 2] = float(v[k] @ centroid / norm) if norm > 0 else 0.0
        blocks.append(out)
    if "sts" in families and with_embeddings:
        blocks.append(side.head_sims)
    return np.hstack(blocks) if blocks else np.zeros((n, 0))
