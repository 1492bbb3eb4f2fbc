"""The ``export_release`` job kind's parameters: one frozen class from which ``manage.py export_release``'s options,
the admin's and the API's export form, the JSON an export job stores and the worker's reading of it are all built
(``jobs.params``). A setting of a release is one field here.

Stored as (``jobs.params.to_json``, in this order): ``resource`` (id), ``version`` (set when the job starts: the
next free ``vN`` unless given), ``format``, ``filters`` (the ``--filters`` text), ``min_score``, ``regressor``
(name or null: the latest completed scoring), ``entailment_model``, ``license`` (null: NOASSERTION),
``keep_copies``, ``keep_non_words``, and ``layout`` only when it is not the default ``paraforge`` (so an export
job's JSON is what it always was unless ParaBank 2's layout is asked for). Jobs stored before a setting existed
lack its key (``entailment_model``, ``license``, ``keep_copies``, ``keep_non_words``, ``layout`` came later):
``jobs.params.from_values`` reads the default for it, so they still run as they did.

Where a release goes is not a setting of it: the command's ``--out`` and ``--upload`` are its own, and a job
always writes to the configured storage (``scoring.releases.job``). The filters text is parsed where it is used
(``release_filters``): parsing can load an NLI model, which only the export itself should pay for.
"""

from __future__ import annotations

import dataclasses

from django import forms

from api.numbers import MAX_INT
from jobs.params import check_bounds, param
from scoring.releases.card import LICENSE_HELP
from scoring.releases.checks import format_check, layout_check, release_version_check
from scoring.releases.columns import FORMATS, LAYOUTS, PARAFORGE
from scoring.releases.filters import ReleaseFilters, parse_filters

FILTERS_HELP = (
    "key=value items, comma- or space-separated: len=LO-HI (reference tokens), "
    "plen=LO-HI (paraphrase words), overlap[1-3]=LO-HI (n-gram overlap fraction), "
    "bleu=LO-HI (smoothed sentence BLEU 0-100), repetition[1|3]=LO-HI (repetition rate "
    "fraction), entailment=argmax|P (both directions; needs --entailment-model), "
    "score=X, rerank=dissimilar|score, top=K, copies=keep|drop; e.g. "
    "len=5-40,overlap=0.2-0.8,rerank=dissimilar"
)
WIDE = {"size": 60}  # the form's text boxes for a filters text or a folder


@dataclasses.dataclass(frozen=True)
class ReleaseExportParams:
    """What to release, and how: the settings of one export. ``resource`` is the resource's id (a form checking
    its settings before it knows the resource leaves it None; a job always has it)."""

    resource: int | None = dataclasses.field(
        default=None, metadata=param(help="the resource's id", cli=False, form=False, minimum=1, maximum=MAX_INT)
    )
    version: str | None = dataclasses.field(
        default=None,
        metadata=param(
            help="release version (default: v1, v2, ...)",
            form_options={
                "required": True,
                "max_length": 64,
                "help_text": "letters, digits, '.', '_' or '-', starting with a letter or digit",
            },
        ),
    )
    format: str = dataclasses.field(
        default="tsv",
        metadata=param(
            help="pairs file format (default tsv); parquet writes typed pairs.parquet and "
            "judgments.parquet and a README.md dataset card for the Hugging Face hub",
            choices=FORMATS,
            form_options={"required": True, "help_text": ""},
        ),
    )
    filters: str = dataclasses.field(
        default="",
        metadata=param(
            help=FILTERS_HELP,
            nargs="+",
            form_options={
                "help_text": "e.g. len=5-40,overlap=0.2-0.8,rerank=dissimilar,top=5",
                "widget": forms.TextInput(attrs=WIDE),
                "initial": None,
            },
        ),
    )
    min_score: float | None = dataclasses.field(
        default=None,
        metadata=param(
            help="keep only pairs with a predicted similarity >= X (0-100)",
            form_options={"help_text": "predicted similarity 0-100"},
            minimum=0,
            maximum=100,
        ),
    )
    regressor: str | None = dataclasses.field(
        default=None,
        metadata=param(help="which scoring to release (default: the latest completed one)", form=False),
    )
    entailment_model: str | None = dataclasses.field(
        default=None,
        metadata=param(
            help="local Hugging Face NLI sequence-classification folder for entailment=...",
            form_options={
                "max_length": 500,
                "widget": forms.TextInput(attrs=WIDE),
                "help_text": "for entailment=argmax or entailment=THRESHOLD: a local NLI model folder (Hugging Face "
                "sequence classifier) that the workers can read, under the model folders "
                "(PARAFORGE_MODEL_ROOTS; a path relative to one, or absolute)",
            },
        ),
    )
    license: str | None = dataclasses.field(
        default=None, metadata=param(help=LICENSE_HELP, form_options={"max_length": 100})
    )
    keep_copies: bool = dataclasses.field(
        default=False,
        metadata=param(
            help="keep paraphrases identical to their reference (after Unicode NFKC, case folding and whitespace "
            "collapsing) and near-copies (the same but for punctuation and one character), which are left out by "
            "default; counted in the manifest either way",
            form_options={
                "help_text": "keep paraphrases identical to their reference (same text after case folding and "
                "whitespace collapsing) and near-copies (the same but for punctuation and one character), which a "
                "release leaves out by default (the filter copies=keep)"
            },
        ),
    )
    keep_non_words: bool = dataclasses.field(
        default=False,
        metadata=param(
            help="keep paraphrases holding a non-word (a word neither English, nor in the corpus, nor in the "
            "reference: what a HIT batch leaves out), which are left out by default; kept, each has an empty "
            "score and the caveat non_words; counted in the manifest either way",
            form_options={
                "help_text": "keep paraphrases holding a non-word (what a HIT batch leaves out), each with an empty "
                "score and the caveat non_words; a release leaves them out by default (the filter non_words=keep)"
            },
        ),
    )

    layout: str = dataclasses.field(
        default=PARAFORGE,
        metadata=param(
            help="how the pairs are laid out: paraforge (a pair per row, or a reference per JSONL line) or "
            "parabank2 (ParaBank 2's TSV: a line per reference, its score, the reference and up to 5 paraphrases in "
            "rank order; format tsv only)",
            choices=LAYOUTS,
            stored="non_default",
            form_options={
                "help_text": "paraforge: a pair per row; parabank2: ParaBank 2's TSV, a line per reference with its "
                "score, the reference and up to 5 paraphrases in rank order (format tsv only)"
            },
        ),
    )

    def __post_init__(self) -> None:
        """The command's ``--filters`` words joined into one text; an empty model folder or licence is none given
        (as jobs have always stored them), an empty layout the default (an API call or a form without one); the
        version's, the format's and the layout's rules (``scoring.releases.checks``)."""
        if isinstance(self.filters, (list, tuple)):
            object.__setattr__(self, "filters", ",".join(self.filters))
        for name in ("entailment_model", "license"):
            if not getattr(self, name):
                object.__setattr__(self, name, None)
        for name in ("keep_copies", "keep_non_words"):
            object.__setattr__(self, name, bool(getattr(self, name)))
        if not self.layout:
            object.__setattr__(self, "layout", PARAFORGE)
        if self.version is not None:
            release_version_check(self.version)
        format_check(self.format)
        layout_check(self.format, self.layout)
        check_bounds(self)

    def release_filters(self, *, load_model: bool = True, confined: bool = False) -> ReleaseFilters:
        """The filters these settings ask for (``filters.parse_filters``: ``load_model=False`` only checks the NLI
        model's folder; ``confined``: a folder typed into a web form, taken only under the model roots)."""
        return parse_filters(
            self.filters,
            min_score=self.min_score,
            entailment_model=self.entailment_model,
            load_model=load_model,
            confined=confined,
            keep_copies=self.keep_copies,
            keep_non_words=self.keep_non_words,
        )
