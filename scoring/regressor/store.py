"""Where a regressor lives and in what format: its name rule, its storage key and the model file.

A name names a file (``regressors/<name>.joblib``), so it is printable ASCII only, with no separator and not
hidden. The file is a joblib dict (``FORMAT_VERSION`` 1: ``format``, ``estimator``, ``features``,
``with_embeddings``, ``families``, and since issue 41 ``encoder``: the sentence encoder's name and weights' sha256,
absent in older files, which used the packaged all-MiniLM-L6-v2); its ``Regressor`` row (``scoring.models``) keeps
the signature and the metrics. One module reads and writes both sides of the file, so the format cannot drift
between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from typing import Any

from annotation.models import Campaign
from infra.storage import get_storage
from scoring.models import Regressor
from scoring.regressor.errors import RegressorError

FORMAT_VERSION = 1
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


def regressor_train_check(*, campaign: str, name: str, replace: bool = False) -> tuple[str, Campaign]:
    """What is trained, checked before any work (the settings checked themselves when made,
    ``RegressorTrainOptions``): (the cleaned name, the campaign) or a RegressorError. The train-regressor job
    and the admin's form run it before starting a job."""
    name = regressor_name_check(name)
    found = Campaign.objects.filter(name=campaign).first()
    if found is None:
        raise RegressorError(f"no campaign named {campaign!r}")
    if Regressor.objects.filter(name=name).exists() and not replace:
        raise RegressorError(f"a regressor named {name!r} exists (use --replace to overwrite it)")
    return name, found


def storage_key(name: str) -> str:
    return f"regressors/{name}.joblib"


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """What the model file holds: the fitted estimator and the features it reads, in order, and the sentence
    ``encoder`` of the embedding features (``{"name", "sha256"}``; None: the packaged MiniLM, as before issue 41)."""

    estimator: Any
    features: list[str]
    with_embeddings: bool
    families: tuple[str, ...] = ()
    encoder: dict[str, str] | None = None


def model_file_write(key: str, model: ModelFile) -> None:
    payload = {
        "format": FORMAT_VERSION,
        "estimator": model.estimator,
        "features": list(model.features),
        "with_embeddings": model.with_embeddings,
        "families": list(model.families),
    }
    if model.encoder is not None:
        payload["encoder"] = dict(model.encoder)
    import joblib  # with numpy: loaded when a model is written or read, not with the app

    with get_storage().open_write(key) as fh:
        joblib.dump(payload, fh, compress=3)


def model_file_read(name: str, key: str) -> ModelFile:
    """The model file of regressor ``name``; a RegressorError when it is missing or of another format."""
    import joblib

    try:
        with contextlib.closing(get_storage().open_read(key)) as fh:
            payload = joblib.load(io.BytesIO(fh.read()))
    except FileNotFoundError as exc:
        raise RegressorError(f"regressor {name!r}: its model file is missing ({exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise RegressorError(f"regressor {name!r}: {key} is not a format-{FORMAT_VERSION} regressor file")
    return ModelFile(
        estimator=payload["estimator"],
        features=payload["features"],
        with_embeddings=payload["with_embeddings"],
        families=tuple(payload.get("families", ())),
        encoder=payload.get("encoder"),
    )
