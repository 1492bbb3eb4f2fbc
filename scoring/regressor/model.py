"""A trained regressor in use: ``regressor_load(name).predict(pairs)`` -> scores clipped to 0-100, NaN for
skipped pairs (a reference of more than 100 subword tokens).

Loaded once per process and reloaded when retrained under the same name. A regressor fitted on the STS-tuned
head's features (recipe v4) refuses to load beside another head: its features would shift silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..encoder_head import head_info
from ..features import pair_features
from ..models import Regressor
from .errors import RegressorError
from .recipes import one_thread
from .store import model_file_read


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
    fitted = FittedRegressor(
        name=row.name,
        signature=row.signature,
        metrics=row.metrics,
        estimator=model.estimator,
        features=model.features,
        with_embeddings=model.with_embeddings,
        families=model.families,
    )
    for old in [k for k in _CACHE if k[1] == name]:
        del _CACHE[old]
    _CACHE[cache_key] = fitted
    return fitted
