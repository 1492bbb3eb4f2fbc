"""The similarity regressor (ParaBank §5.1): predicts a pair's mean human similarity (0-100).

One module per job; this package's names are the public interface (``from scoring.regressor import ...``):

* ``recipes``: what each recipe is (feature families, candidate estimators) and the default recipe;
* ``evaluation``: Spearman's rho, bootstrap intervals over references (also paired, against a baseline), the
  held-out split, the estimator's selection and the nested grouped cross-validation;
* ``data``: a campaign's judgments as training data, and their features in reference-preserving batches;
* ``options``: a training's settings, checked when made (``RegressorTrainOptions``);
* ``train``: training, both measures of generalisation, the signature, saving;
* ``store``: the name rule, the storage key and the model file's format;
* ``model``: a trained regressor loaded for use (``regressor_load(name).predict(pairs)``);
* ``pairs_file``: scoring a TSV file of pairs (``manage.py score_pairs``).

Dependencies run one way: errors <- store; errors, recipes <- options; recipes <- evaluation <- data <- train
(which also uses store and options); recipes, store <- model <- pairs_file. Below the package:
``scoring.similarity.features`` <- ``scoring.similarity.encoder_head`` <- ``scoring.similarity.embeddings``, never the
other way.

The names load lazily (PEP 562): ``from scoring.regressor import RegressorTrainOptions`` imports ``options`` only,
so the admin, the forms and the commands' argument parsing never import numpy, scikit-learn or sacrebleu
(issue 37); ``from scoring.regressor import regressor_train`` imports ``train`` and what it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and readers see; at run time ``__getattr__`` imports each on first use
    from infra.textfiles import PairsFileError
    from scoring.regressor.data import (
        FEATURE_BATCH,
        MIN_CANDIDATES,
        MIN_REFERENCES,
        TrainingData,
        features_in_batches,
        reference_batches,
        training_data,
        training_data_check,
    )
    from scoring.regressor.errors import RegressorError
    from scoring.regressor.evaluation import (
        BOOTSTRAP_RESAMPLES,
        CrossValidation,
        Difference,
        NestedResult,
        bootstrap_interval,
        group_split,
        nested_cv,
        outer_folds,
        paired_difference,
        select_estimator,
        spearman,
    )
    from scoring.regressor.model import FittedRegressor, head_check, regressor_load
    from scoring.regressor.options import CV_FOLDS, RegressorTrainOptions
    from scoring.regressor.pairs_file import pairs_file_score
    from scoring.regressor.recipes import (
        DEFAULT_RECIPE,
        RECIPES,
        RIDGE_ALPHAS,
        candidate_estimators,
        estimator_params,
        one_thread,
    )
    from scoring.regressor.store import (
        FORMAT_VERSION,
        NAME_MAX_LENGTH,
        NAME_RULE,
        ModelFile,
        model_file_read,
        model_file_write,
        regressor_name_check,
        regressor_train_check,
        storage_key,
    )
    from scoring.regressor.train import MODEL_STEPS, regressor_train, signature_string

# public name -> the module that defines it
_WHERE = {
    "PairsFileError": "infra.textfiles",
    **dict.fromkeys(
        "FEATURE_BATCH MIN_CANDIDATES MIN_REFERENCES TrainingData features_in_batches reference_batches "
        "training_data training_data_check".split(),
        f"{__name__}.data",
    ),
    "RegressorError": f"{__name__}.errors",
    **dict.fromkeys(
        "BOOTSTRAP_RESAMPLES CrossValidation Difference NestedResult bootstrap_interval group_split nested_cv "
        "outer_folds paired_difference select_estimator spearman".split(),
        f"{__name__}.evaluation",
    ),
    **dict.fromkeys("FittedRegressor head_check regressor_load".split(), f"{__name__}.model"),
    **dict.fromkeys("CV_FOLDS RegressorTrainOptions".split(), f"{__name__}.options"),
    "pairs_file_score": f"{__name__}.pairs_file",
    **dict.fromkeys(
        "DEFAULT_RECIPE RECIPES RIDGE_ALPHAS candidate_estimators estimator_params one_thread".split(),
        f"{__name__}.recipes",
    ),
    **dict.fromkeys(
        "FORMAT_VERSION NAME_MAX_LENGTH NAME_RULE ModelFile model_file_read model_file_write regressor_name_check "
        "regressor_train_check storage_key".split(),
        f"{__name__}.store",
    ),
    **dict.fromkeys("MODEL_STEPS regressor_train signature_string".split(), f"{__name__}.train"),
}


def __getattr__(name: str) -> Any:
    """The public name ``name``, its module imported on first use (and the name cached here)."""
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "CV_FOLDS",
    "DEFAULT_RECIPE",
    "FEATURE_BATCH",
    "FORMAT_VERSION",
    "MIN_CANDIDATES",
    "MIN_REFERENCES",
    "MODEL_STEPS",
    "NAME_MAX_LENGTH",
    "NAME_RULE",
    "RECIPES",
    "RIDGE_ALPHAS",
    "CrossValidation",
    "Difference",
    "FittedRegressor",
    "ModelFile",
    "NestedResult",
    "PairsFileError",
    "RegressorError",
    "RegressorTrainOptions",
    "TrainingData",
    "bootstrap_interval",
    "candidate_estimators",
    "estimator_params",
    "features_in_batches",
    "group_split",
    "head_check",
    "model_file_read",
    "model_file_write",
    "nested_cv",
    "one_thread",
    "outer_folds",
    "paired_difference",
    "pairs_file_score",
    "reference_batches",
    "regressor_load",
    "regressor_name_check",
    "regressor_train",
    "regressor_train_check",
    "select_estimator",
    "signature_string",
    "spearman",
    "storage_key",
    "training_data",
    "training_data_check",
]
