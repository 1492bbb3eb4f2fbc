"""Constraint selection (ParaBank §3.2, Tab. 3): the candidate pool and the 37 systems' constraint sets.

The public API; the work is in :mod:`generation.selection`:

- :mod:`generation.selection.reference` is the specification (the pool, then one selector per kind
  of Tab. 3 row): read it to know what a system selects;
- :mod:`generation.selection.fast` is what runs here, tuned for throughput and held equal to the
  reference by a property test and by the snapshot derived from the reference.

**Output.** One :class:`ConstraintSet` per (reference, system) -- tuples of phrases, each phrase a
tuple of tokens: ``positive`` (must appear), ``negative`` (must not appear) and ``bos_avoid`` (the
output must not start with it) -- or a :class:`NoConstraintSet` with the reason when the system
cannot apply (pool too small, reference too short, no PPDB paraphrase). ``to_json()`` gives the
plain value the decoder consumes.

**Randomness** (systems 22-27, the verb inflection of 29-31, the PPDB paraphrase of 35-37) comes from
:class:`SeededDraws`, a hash of (seed, system, reference text): reproducible per sentence and system,
whatever the order or batch in which sentences are processed and whichever other systems run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..selection.fast import (
    PoolToken,
    SystemList,
    build_pool,
    clear_caches,
    lex_all_index,
    load_selection_tables,
    negative_phrases,
    resolve_systems,
    select_for_all_systems,
)
from ..selection.values import (
    PREPOSITIONS,
    ConstraintSet,
    NoConstraintSet,
    Phrase,
    Phrases,
    SeededDraws,
    Selected,
    TaggedSentence,
    as_tagged,
    checked_idf_window,
    draw_table,
    seed_key,
    tag_sentences,
)
from .systems import System

__all__ = [
    "PREPOSITIONS",
    "ConstraintSet",
    "NoConstraintSet",
    "Phrase",
    "Phrases",
    "PoolToken",
    "SeededDraws",
    "Selected",
    "SystemList",
    "TaggedSentence",
    "as_tagged",
    "build_pool",
    "checked_idf_window",
    "clear_caches",
    "draw_table",
    "lex_all_index",
    "load_selection_tables",
    "negative_phrases",
    "resolve_systems",
    "seed_key",
    "select_constraints",
    "select_for_all_systems",
    "tag_sentences",
]


def select_constraints(
    system: int | System,
    sentence: str | TaggedSentence | Sequence[tuple[str, str]],
    idf: Mapping[str, float],
    **kwargs: Any,
) -> Selected:
    """The constraint set of one system for one reference (same keywords as select_for_all_systems)."""
    return select_for_all_systems(sentence, idf, systems=[system], **kwargs)[0]
