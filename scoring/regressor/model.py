"""A trained regressor in use: ``regressor_load(name).predict(pairs)`` -> scores clipped to 0-100, NaN for
skipped pairs (a reference of more than 100 subword tokens).

Loaded once per process and reloaded when retrained under the same name. A regressor fitted on the STS-tuned
head's features (recipe v4) refuses to load beside another head: its features would shift silently; so does one
whose sentence encoder (issue 41: stored with it, absent meaning the packaged MiniLM) is not installed here, or
has other weights than it was trained with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scoring.models import Regressor
from scoring.regressor.errors import RegressorError
from scoring.regressor.recipes import one_thread
from scoring.regressor.store import model_file_read
from scoring.similarity.embeddings import EncoderError, SentenceEncoder, encoder_resolve
from scoring.similarity.encoder_head import head_info
from scoring.similarity.features import pair_features


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
        sentence_encoder: SentenceEncoder | None = None,
    ):
        self.name, self.signature, self.metrics = name, signature, metrics
        self.estimator, self.features, self.with_embeddings = estimator, features, with_embeddings
        self.families = tuple(families)
        self.sentence_encoder = sentence_encoder  # None: the packaged MiniLM

    def predict(self, pairs: Sequence[Mapping[str, Any]], *, batch_size: int = 64) -> np.ndarray:
        """Scores of ``pairs``; with group features (recipe v2) a pair is compared with the pairs of THIS
        call that share its reference, so give a reference's candidates in one call."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        fb = pair_features(
            pairs,
            with_embeddings=self.with_embeddings,
            batch_size=batch_size,
            families=self.families,
            sentence_encoder=self.sentence_encoder,
        )
        if fb.names != self.features:
            raise RegressorError(f"regressor {self.name!r} was trained on other features than this code computes")
        out = np.full(len(pairs), np.nan)
        if fb.keep.any():
            with one_thread():
                out[fb.keep] = np.clip(self.estimator.predict(fb.matrix[fb.keep]), 0.0, 100.0)
        return out

    def __repr__(self) -> str:
        return f"<FittedRegressor {self.name} {self.signature.get('string', '')}>"


_CACHE: dict[tuple, FittedRegressor] = {}


def head_check(name: str, signature: Mapping[str, Any]) -> None:
    """A v4 regressor was fitted on one exact STS-tuned head: another one would shift its features
    silently, so loading it with a different head file is an error, not a drift."""
    trained = (signature.get("encoder_head") or {}).get("sha256")
    if not trained:
        return
    shipped = head_info()["sha256"]
    if trained != shipped:
        raise RegressorError(
            f"regressor {name!r} was trained with the STS-tuned encoder head sha256 {trained[:12]}, "
            f"but this installation ships {shipped[:12]}: retrain it"
        )


def encoder_check(name: str, stored: Mapping[str, Any] | None) -> SentenceEncoder | None:
    """The sentence encoder regressor ``name`` was trained with (``stored``: its name and weights' sha256; None, as
    regressors trained before issue 41 have it: the packaged MiniLM), resolved here; a RegressorError when it is
    not installed (naming the command that installs it) or its weights differ from the ones it was trained with."""
    if not stored:
        return None
    try:
        found = encoder_resolve(stored["name"])
    except EncoderError as exc:
        raise RegressorError(f"regressor {name!r} scores with the sentence encoder {stored['name']}: {exc}") from None
    if found.sha256 != stored.get("sha256"):
        raise RegressorError(
            f"regressor {name!r} was trained with the sentence encoder {stored['name']} of weights sha256 "
            f"{str(stored.get('sha256'))[:12]}, but the one here has {found.sha256[:12]}: install that encoder or "
            "retrain the regressor"
        )
    return found


def regressor_load(name: str) -> FittedRegressor:
    """The named regressor, loaded from storage once per process (reloaded if retrained under that name)."""
    row = Regressor.objects.filter(name=name).first()
    if row is None:
        raise RegressorError(f"no regressor named {name!r} (train one with manage.py train_regressor)")
    cache_key = (row.pk, row.name, row.key, (row.signature or {}).get("trained_at"))
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    model = model_file_read(name, row.key)
    head_check(name, row.signature or {})
    sentence_encoder = None
    if model.with_embeddings:
        sentence_encoder = encoder_check(name, (row.signature or {}).get("sentence_encoder") or model.encoder)
    fitted = FittedRegressor(
        name=row.name,
        signature=row.signature,
        metrics=row.metrics,
        estimator=model.estimator,
        features=model.features,
        with_embeddings=model.with_embeddings,
        families=model.families,
        sentence_encoder=sentence_encoder,
    )
    for old in [k for k in _CACHE if k[1] == name]:
        del _CACHE[old]
    _CACHE[cache_key] = fitted
    return fitted
