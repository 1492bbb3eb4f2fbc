"""``manage.py paraphrase``'s settings: one frozen :class:`ParaphraseParams`, from which the command's options
(``jobs.params.add_arguments``) and its checks are derived, as a job kind's are (``jobs.params``).

Why: the command used to declare its options by hand and keep its own copies of the diverse mode's rules (the
options it refuses without ``--diverse``, those it cannot honour with it) beside the generate job's; here the
decoder's options are :class:`~generation.decode_options.DecodeOptions`' fields and the diverse mode's are
:class:`~generation.decode_options.DiverseOptions`', flattened, and the rules read their ``scope`` lists.

Checks that need nothing but the values run when a :class:`ParaphraseParams` is made (a
:class:`ParaphraseParamsError`, or the nested groups' :class:`~generation.decode_options.DecodeOptionsError`:
both ``ParamsError``, whose ``option_message`` the command shows); those that read a file or a model (the
input, the constraint lines, the IDF table, the system's number, the prompt template, the model folder) stay
in the command, which says them in the order it reads them. This module imports no Django, torch or model
library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.params import (
    ParamsError,
    check_bounds,
    fail,
    field_param,
    fields_in_scope,
    from_values,
    param,
    true_false_or_unset,
)

from .decode_options import (
    BACKWARD_HELP,
    DIVERSE_HELP,
    DIVERSE_ONLY,
    MAX_SEED,
    NOT_JOB_OPTIONS,
    DecodeOptions,
    DiverseOptions,
    diverse_settings_given,
    with_shared_settings,
)
from .model_source import MODEL_HELP
from .prompts import PROMPT_TEMPLATE_HELP

# The command's own scopes (``jobs.params.param``'s ``scope``): the constraints beam search decodes under (the
# diverse mode draws its own negative sets, so it refuses them), and what ``--system`` reads (inert without it)
CONSTRAINTS, SYSTEM_INPUT = "constraints", "system input"
DEFAULT_DECODE = DecodeOptions()


class ParaphraseParamsError(ParamsError):
    """``paraphrase`` settings that cannot work together (``--system`` without ``--idf``, a diverse option
    without ``--diverse``, ...): ``str()`` names them as fields, :attr:`option_message` as options."""


def _fail(template: str, *fields: str, **values: Any) -> ParaphraseParamsError:
    return fail(template, *fields, error=ParaphraseParamsError, **values)  # type: ignore[return-value]


def _text(value: Any) -> str | None:
    """An optional file or number as given; an empty one is none (as the command has always read it)."""
    return str(value) if value else None


@dataclass(frozen=True, kw_only=True)
class ParaphraseParams:
    """What ``paraphrase`` decodes and how, checked when made. Declared in the order ``--help`` lists the
    options (``--backward-model`` aside: the command puts it before ``--max-nll``, and DecodeOptions' process
    knobs ``--int8`` and ``--rerank-dissimilar`` last).

    ``diverse_options``: the diverse mode's settings. A :class:`DiverseOptions`, or a mapping of the diverse
    options a user gave (:func:`from_options`: a command's, raw), which is made into one here once the other
    checks have passed; given without ``diverse`` it is refused (a mapping: naming its first option, even one
    at its default, as the command always has; a DiverseOptions: naming its first setting off the default, one
    wholly at the defaults reads as none). With ``diverse`` and none given, the defaults. ``seed``,
    ``max_length`` and ``batch_size`` are the command's one value each, the sampler's too."""

    model: str = field(metadata=param(help=MODEL_HELP))
    prompt_template: str | None = field(
        default=None,
        metadata=param(help=PROMPT_TEMPLATE_HELP + " (beam search and --diverse alike: each prompt runs once)"),
    )
    input: str = field(metadata=param(help="one input per line: source or source<TAB>reference"))
    output: str = field(metadata=param(help="JSON lines, one per input line"))
    constraints: str | None = field(
        default=None, metadata=param(help="JSON lines, one constraint object per input line", scope=CONSTRAINTS)
    )
    system: str | None = field(
        default=None,
        metadata=param(help="ParaBank system number (1-37): select constraints from each reference", scope=CONSTRAINTS),
    )
    idf: str | None = field(
        default=None, metadata=param(help="IDF table (token<TAB>idf) for --system", scope=SYSTEM_INPUT)
    )
    seed: int = field(
        default=0,
        metadata=param(
            help="seed of --system's random choices of words (with --diverse: of its draws)",
            minimum=0,
            maximum=MAX_SEED,
        ),
    )
    ppdb: str | None = field(
        default=None, metadata=param(help="PPDB 2.0 lexical file for systems 35-37", scope=SYSTEM_INPUT)
    )
    decode: DecodeOptions = field(default=DEFAULT_DECODE, metadata=param(flatten=True))
    diverse: bool = field(default=False, metadata=param(help=DIVERSE_HELP))
    diverse_options: DiverseOptions | Mapping[str, Any] | None = field(
        default=None, metadata=param(flatten=True, kind=DiverseOptions)
    )
    backward_model: str | None = field(default=None, metadata=param(help=BACKWARD_HELP))

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if not isinstance(self.decode, DecodeOptions):
            raise ParaphraseParamsError(f"decode must be DecodeOptions, not {type(self.decode).__name__}")
        for name in ("model", "input", "output"):
            put(name, str(getattr(self, name)))
        for name in ("constraints", "system", "idf", "ppdb"):
            put(name, _text(getattr(self, name)))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise _fail("{0} must be an integer, not {value!r}", "seed", value=self.seed)
        put("diverse", bool(true_false_or_unset("diverse", self.diverse, error=ParaphraseParamsError)))
        if self.constraints and self.system:
            raise _fail("give either {0} or {1}, not both", "constraints", "system")
        if self.system and not self.idf:
            raise _fail("{0} needs {1} IDF.tsv", "system", "idf")
        put("diverse_options", self._checked_diverse_options())
        put("backward_model", _text(self.backward_model))
        check_bounds(self, error=ParaphraseParamsError)

    def _checked_diverse_options(self) -> DiverseOptions | None:
        """The diverse mode's options (None without ``diverse``): its own settings refused without it
        (``backward_model`` is either mode's); with it, the constraints it cannot honour (:data:`NOT_WITH_DIVERSE`)
        and the decoder's process knobs (``int8``, ``rerank_dissimilar``: beam search's) off their defaults."""
        options = self.diverse_options
        if not self.diverse:
            given = diverse_settings_given(options)
            if given:
                raise _fail("{0} needs {1}", given[0], "diverse")
            return None
        clash = [n for n in NOT_WITH_DIVERSE if getattr(self, n)]
        clash += [n for n in NOT_JOB_OPTIONS if getattr(self.decode, n) != getattr(DEFAULT_DECODE, n)]
        if clash:
            raise _fail("{1} samples its own negative constraints: leave out {0}", clash[0], "diverse")
        return with_shared_settings(options, self.decode, self.seed, owner="the command", error=ParaphraseParamsError)


# What --diverse refuses of paraphrase's own settings (beside DecodeOptions' process knobs)
NOT_WITH_DIVERSE = fields_in_scope(ParaphraseParams, CONSTRAINTS)


def from_options(values: Mapping[str, Any]) -> ParaphraseParams:
    """A checked :class:`ParaphraseParams` from a command's parsed options (absent or None: the default).
    Unlike ``jobs.params.from_values`` it hands the diverse options over as given (a mapping), so that one given
    without ``--diverse`` is refused as such, whatever its value, after the checks that come before it."""
    own = {
        f.name: values[f.name]
        for f in dataclasses.fields(ParaphraseParams)
        if not field_param(f)["flatten"] and values.get(f.name) is not None
    }
    diverse = {n: values[n] for n in DIVERSE_ONLY if values.get(n) is not None}
    return ParaphraseParams(**own, decode=from_values(DecodeOptions, values), diverse_options=diverse or None)
