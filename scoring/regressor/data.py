"""A campaign's judgments as training data: the pairs, their targets and references, and their features.

* Target: each candidate's mean similarity over counted workers (``aggregation.load_campaign``: not
  disqualified, at least the minimum of judgments), N/A sliders excluded; or, with ``target="zscore"``,
  the bias-corrected estimate (``aggregation.zscore_estimates``: worker-standardised scores mapped back
  to 0-100), so that a worker's harshness does not become noise in the target. Pure attention-check
  copies (a candidate whose only system is the pseudo-system "0") are left out: they are the reference
  itself and say nothing about paraphrases; so are degraded copies (quality control, made by us, not
  a system). Candidates with no counted numeric judgment (or, for zscore, none from a worker with SD >
  0) are left out; pairs whose reference has more than 100 subword tokens get no features.
* Features batch by batch, never cutting a reference's run of pairs (the group features compare a candidate
  with its reference's other candidates in the batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from annotation.models import ATTENTION_SYSTEM, Campaign, Candidate
from scoring.aggregation import ESTIMATES, load_campaign, zscore_estimates
from scoring.regressor.errors import RegressorError
from scoring.regressor.evaluation import group_split
from scoring.similarity.embeddings import SentenceEncoder
from scoring.similarity.features import feature_names, pair_features

MIN_CANDIDATES = 20  # judged candidates needed to train
MIN_REFERENCES = 5  # and distinct references (so that both parts have some)
FEATURE_BATCH = 256


@dataclasses.dataclass
class TrainingData:
    pairs: list[dict]
    y: np.ndarray
    groups: np.ndarray


def training_data(campaign: Campaign, *, min_judgments: int | None = None, target: str = "raw") -> TrainingData:
    """Judged candidates of a campaign with their mean (or bias-corrected) similarity (see the module docstring)."""
    if target not in ESTIMATES:
        raise RegressorError(f"unknown target {target!r} (one of {', '.join(ESTIMATES)})")
    data = load_campaign(campaign, min_judgments)
    corrected = zscore_estimates(data).means if target == "zscore" else None
    nll = dict(Candidate.objects.filter(reference__campaign=campaign).values_list("pk", "nll"))
    renamed = set((campaign.settings or {}).get("system_names") or {})  # e.g. ParaBank's 35 = PARANMT, no decoder
    pairs, y, groups = [], [], []
    for c in data.candidates:
        if not c.scores or c.systems == frozenset({ATTENTION_SYSTEM}) or c.is_degraded:
            continue
        if corrected is not None and c.id not in corrected:
            continue
        # the systems that produced the text, as a resource's {system: constraint set} (the sets themselves
        # were not kept with the judgments): what the "systems" features read
        systems = {s: {} for s in sorted(c.systems) if s != ATTENTION_SYSTEM and s not in renamed}
        pairs.append(
            {"reference": c.reference_text, "paraphrase": c.text, "nll": nll.get(c.id), "constraints": systems}
        )
        y.append(float(np.mean(c.scores)) if corrected is None else float(corrected[c.id]))
        groups.append(c.reference_id)
    return TrainingData(pairs, np.asarray(y, dtype=np.float64), np.asarray(groups, dtype=np.int64))


def training_data_check(
    groups: np.ndarray, *, campaign: str, minimum: int, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Enough judged candidates (``groups``: each one's reference) to train on and to hold some out: at least
    ``MIN_CANDIDATES`` of ``MIN_REFERENCES`` references, and a split by reference with 2 training references
    and 3 test candidates. Returns the split (train and test rows); a RegressorError naming the figures."""
    n_refs = len(np.unique(groups))
    if len(groups) < MIN_CANDIDATES or n_refs < MIN_REFERENCES:
        raise RegressorError(
            f"campaign {campaign!r} has {len(groups)} judged candidates of {n_refs} references "
            f"(counted workers, min judgments {minimum}); need at least {MIN_CANDIDATES} "
            f"candidates of {MIN_REFERENCES} references"
        )
    train, test = group_split(groups, test_fraction=test_fraction, seed=seed)
    if len(np.unique(groups[train])) < 2 or len(test) < 3:
        raise RegressorError(f"too few references for a {test_fraction} held-out split ({n_refs} references)")
    return train, test


def reference_batches(pairs: Sequence[Mapping], batch: int) -> list[tuple[int, int]]:
    """(start, stop) slices of about ``batch`` pairs that never cut a run of pairs sharing a reference
    (the group features compare a candidate with the reference's others in its batch)."""
    bounds, start = [], 0
    while start < len(pairs):
        stop = min(start + batch, len(pairs))
        while stop < len(pairs) and pairs[stop]["reference"] == pairs[stop - 1]["reference"]:
            stop += 1
        bounds.append((start, stop))
        start = stop
    return bounds


def features_in_batches(
    pairs: Sequence[Mapping],
    *,
    with_embeddings: bool,
    batch: int = FEATURE_BATCH,
    families: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    sentence_encoder: SentenceEncoder | None = None,
):
    """(matrix, keep) over all pairs, computed batch by batch (a reference's run of pairs never cut);
    ``progress(batches done, batches)`` after each batch; ``sentence_encoder``: the embedding columns' (None: the
    packaged MiniLM)."""
    mats, keeps = [], []
    bounds = reference_batches(pairs, batch)
    for start, stop in bounds:
        fb = pair_features(
            pairs[start:stop], with_embeddings=with_embeddings, families=families, sentence_encoder=sentence_encoder
        )
        mats.append(fb.matrix)
        keeps.append(fb.keep)
        if progress is not None:
            progress(len(mats), len(bounds))
    width = len(feature_names(with_embeddings=with_embeddings, families=families))
    if not mats:
        return np.zeros((0, width)), np.zeros(0, dtype=bool)
    return np.vstack(mats), np.concatenate(keeps)
