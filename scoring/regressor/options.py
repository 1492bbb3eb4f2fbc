"""How a regressor is trained: :class:`RegressorTrainOptions`, the settings that travel together from the
command, the admin's and the API's form and the job's params to ``regressor_train``, checked once, when made.

What is trained (the campaign, the regressor's name) and whether an existing one may be overwritten stay
separate arguments: they need the database to check, these settings do not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..aggregation import ESTIMATES
from ..embeddings import DEFAULT_ENCODER, EncoderError, SentenceEncoder, encoder_resolve
from .errors import RegressorError
from .recipes import DEFAULT_RECIPE, RECIPES

CV_FOLDS = 5  # outer folds of the nested grouped CV train_regressor reports


@dataclass(frozen=True)
class RegressorTrainOptions:
    """One training's settings: ``test_fraction`` (share of references held out), ``seed``,
    ``with_embeddings`` (the sentence-embedding features), ``min_judgments`` (None: the campaign's minimum per
    worker), ``target`` (an estimate of ``ESTIMATES``), ``recipe`` (of ``RECIPES``) and ``cv_folds`` (outer
    folds of the nested CV; 0 skips it) and ``encoder`` (the sentence encoder, ``scoring.embeddings.encoder_resolve``:
    the packaged ``all-MiniLM-L6-v2`` by default; another one must be installed when the settings are made, and a
    local folder is kept as its absolute path). A setting that cannot work is a RegressorError when made, its
    message naming the option as the command spells it."""

    test_fraction: float = 0.2
    seed: int = 0
    with_embeddings: bool = True
    min_judgments: int | None = None
    target: str = "raw"
    recipe: str = DEFAULT_RECIPE
    cv_folds: int = CV_FOLDS
    encoder: str = DEFAULT_ENCODER

    def __post_init__(self) -> None:
        if self.min_judgments is not None and int(self.min_judgments) < 0:
            raise RegressorError("--min-judgments must be >= 0")
        if self.target not in ESTIMATES:
            raise RegressorError(f"--target must be one of {', '.join(ESTIMATES)}, not {self.target!r}")
        if self.recipe not in RECIPES:
            raise RegressorError(f"--recipe must be one of {', '.join(RECIPES)}, not {self.recipe!r}")
        if not 0.0 < self.test_fraction < 1.0:
            raise RegressorError(f"--test-fraction must be between 0 and 1, got {self.test_fraction}")
        if not isinstance(self.cv_folds, int) or self.cv_folds == 1 or self.cv_folds < 0:
            raise RegressorError(f"--cv-folds must be 0 (no cross-validation) or at least 2, got {self.cv_folds}")
        if not isinstance(self.encoder, str) or not self.encoder.strip():
            raise RegressorError(f"--encoder must name a sentence encoder, not {self.encoder!r}")
        name = self.encoder.strip()
        if name != DEFAULT_ENCODER:
            if "sts" in RECIPES[self.recipe]:
                raise RegressorError(
                    f"--recipe {self.recipe} adds the STS-tuned head of {DEFAULT_ENCODER}: it needs --encoder "
                    f"{DEFAULT_ENCODER}, not {name!r}"
                )
            name = self.sentence_encoder().name  # installed (or found) now; a folder as its absolute path
        object.__setattr__(self, "encoder", name)

    def sentence_encoder(self) -> SentenceEncoder:
        """The encoder these settings name, resolved (its folder and weights' sha256), or a RegressorError naming the
        command that installs it."""
        try:
            return encoder_resolve(self.encoder.strip())
        except EncoderError as exc:
            raise RegressorError(f"--encoder: {exc}") from None

    def job_params(self) -> dict[str, Any]:
        """The settings' part of a training job's ``params["train"]``, flat as every job has stored them;
        ``recipe``, ``cv_folds`` and ``encoder`` only when not the default, as before those options existed."""
        params: dict[str, Any] = {
            "test_fraction": self.test_fraction,
            "seed": self.seed,
            "with_embeddings": self.with_embeddings,
            "min_judgments": self.min_judgments,
            "target": self.target,
        }
        if self.recipe != DEFAULT_RECIPE:
            params["recipe"] = self.recipe
        if self.cv_folds != CV_FOLDS:
            params["cv_folds"] = self.cv_folds
        if self.encoder != DEFAULT_ENCODER:
            params["encoder"] = self.encoder
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RegressorTrainOptions:
        """The settings of a job's ``params["train"]`` (its other keys ignored); a setting a job stored before
        it existed is the default, as it was then."""
        return cls(**{f.name: params[f.name] for f in fields(cls) if f.name in params})
