"""How a regressor is trained: :class:`RegressorTrainOptions`, the settings of the ``train_regressor`` job kind
(a ``jobs.params`` class), checked once, when made. From them come the command's options, the admin's and the
API's form fields, a training job's stored ``params["train"]`` and the worker's reading of it.

What is trained (the campaign, the regressor's name) and whether an existing one may be overwritten are the job's
``TrainRegressorParams`` (``scoring.regressor.job``): they need the database to check, these settings do not."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.params import ParamsError, check_bounds, param
from scoring.aggregation import ESTIMATES
from scoring.regressor.errors import RegressorError
from scoring.regressor.recipes import DEFAULT_RECIPE, RECIPES
from scoring.similarity.embeddings import DEFAULT_ENCODER, ENCODER_HELP, EncoderError, SentenceEncoder, encoder_resolve

CV_FOLDS = 5  # outer folds of the nested grouped CV train_regressor reports

RECIPE_HELP = (
    f"features and estimators (default {DEFAULT_RECIPE}, the best that passes honest selection, docs/performance.md): "
    "base (lexical + embedding features) or v2 (plus the NLL relative to the reference's other candidates, the "
    "systems that produced the text, group-relative and agreement features, a tuned ridge) or v3 (v2's features; "
    "an RBF-kernel SVR and the mean of ridge, boosting and SVR join the selection) or v4 (v3 plus the features of "
    "the encoder's STS-tuned top layers, scoring.similarity.encoder_head; README 'Similarity regressor')"
)
ASKED = {"required": True}  # a form field with a default that may still not be left empty (the default is shown)


@dataclass(frozen=True)
class RegressorTrainOptions:
    """One training's settings (each field's help says what it is). ``encoder`` is resolved when the settings
    are made (``encoder_resolve``): another encoder than the packaged default must be installed by then, and a
    local folder is kept as its absolute path. A setting that cannot work is a RegressorError when made, its
    message naming the option as the command spells it. Stored as every training job has stored them:
    ``recipe``, ``cv_folds`` and ``encoder`` only when not the default, as before those options existed."""

    test_fraction: float = field(
        default=0.2,
        metadata=param(help="share of references held out for the test, 0-1", form_options=ASKED, minimum=0, maximum=1),
    )
    seed: int = field(default=0, metadata=param(form_options=ASKED, minimum=0, maximum=2**32 - 1))
    with_embeddings: bool = field(
        default=True,
        # the command's flag is --no-embeddings (train_regressor), not the --with-embeddings this would make
        metadata=param(help="sentence-embedding features (slower, more accurate)", cli=False),
    )
    min_judgments: int | None = field(
        default=None,
        metadata=param(
            help="count only workers with at least N judgments (default: the campaign's minimum)",
            minimum=0,
            maximum=1_000_000,
        ),
    )
    target: str = field(
        default="raw",
        metadata=param(
            help="what to predict: raw = mean similarity (ParaBank's, the default) or zscore = the "
            "bias-corrected estimate (worker z-scores mapped back to 0-100)",
            choices=ESTIMATES,
            form_options=ASKED,
        ),
    )
    recipe: str = field(
        default=DEFAULT_RECIPE,
        metadata=param(help=RECIPE_HELP, choices=RECIPES, stored="non_default", form_options=ASKED),
    )
    cv_folds: int = field(
        default=CV_FOLDS,
        metadata=param(
            help="outer folds of the nested grouped cross-validation whose rho and interval are printed "
            f"(spearman_cv, spearman_cv_ci95; default {CV_FOLDS}; 0 skips it: faster, no CV figure)",
            stored="non_default",
            minimum=0,
            maximum=100,  # (each fold refits every model: 100 is past any use and still ends)
        ),
    )
    encoder: str = field(
        default=DEFAULT_ENCODER,
        metadata=param(
            help=f"{ENCODER_HELP} (default {DEFAULT_ENCODER}); stored with the regressor and used whenever it "
            "scores (docs/how-to/train-regressor.md)",
            stored="non_default",
            metavar="NAME_OR_PATH",
            form_options={"max_length": 1000},
        ),
    )

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
        try:
            check_bounds(self)
        except ParamsError as exc:
            raise RegressorError(exc.option_message) from None
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
        """The encoder these settings name, resolved (its folder and weights' sha256), or a RegressorError naming
        the command that installs it."""
        try:
            return encoder_resolve(self.encoder.strip())
        except EncoderError as exc:
            raise RegressorError(f"--encoder: {exc}") from None
