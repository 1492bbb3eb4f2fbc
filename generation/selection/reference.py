"""Reference constraint selection: ParaBank §3.2 and Tab. 3 written out plainly, as the specification.

Slow on purpose (nothing cached, nothing unrolled): what it returns is what selection means. The fast
path in :mod:`.fast` must return exactly the same for every input, which
tests/generation/test_constraints_property.py checks on random ones, and the snapshot in
tests/generation/data/ is derived from this module, never from the fast path.

1. **The pool** (§3.2 "IDF Criteria", "Prepositions", "For all constraints, only lowercased alphabetical
   tokens are considered"): each purely alphabetic token of the reference, lowercased, whose IDF lies in
   ``[min_idf, max_idf]`` (7.0-17.0 by default), or that is one of the 14 prepositions whatever its IDF
   (0 if missing); a word appearing twice counts once, at its first qualifying occurrence (which gives
   its POS). "Highest" orders the pool by IDF descending, "lowest" ascending, ties to the earlier token.
2. **A system** is a row of :data:`generation.constraints.systems.SYSTEMS`; its ``selection`` picks the selector
   below. A row needing more pool tokens than the pool has gets "no constraint set" with the reason.
3. **Negative phrases** of a word (§3.2 "Morphological Variants"): the word and its capitalised form;
   with Lex "all", also every morphological variant of it and their capitalised forms. Phrases banned by
   two chosen words are banned once.
4. **Spellings**: a banned word also gets banned as the reference writes it when that is neither lowercase
   nor capitalised ("RBA").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..constraints.ppdb import coarse_pos_of_spacy
from ..constraints.systems import SYSTEMS, System, get_system
from ..morphology import all_variants, capitalised, random_verb_inflection
from .values import (
    NO_PPDB_FILE,
    NO_WORD_REASON,
    PREPOSITIONS,
    ConstraintSet,
    NoConstraintSet,
    Phrases,
    PoolToken,
    SeededDraws,
    Selected,
    TaggedSentence,
    no_ppdb_match_reason,
    odd_case_forms,
    pool_too_small_reason,
    positional_phrase,
    reference_too_short_reason,
    resolve_ppdb,
    settings_idf_window,
    with_surface_forms,
)


def joins_pool(text: str, idf: Mapping[str, float], min_idf: float, max_idf: float) -> float | None:
    """The IDF a token joins the pool with, or None if it stays out."""
    if not text.isalpha():
        return None
    word = text.lower()
    value = idf.get(word)
    if value is not None and min_idf <= value <= max_idf:
        return value
    if word in PREPOSITIONS:
        return 0.0 if value is None else value
    return None


def build_pool(
    tokens: Sequence[tuple[str, str]], idf: Mapping[str, float], min_idf: float, max_idf: float
) -> list[PoolToken]:
    """The candidate pool, highest IDF first; ties keep reference order (a stable sort)."""
    pool: dict[str, PoolToken] = {}
    for position, (text, pos) in enumerate(tokens):
        value = joins_pool(text, idf, min_idf, max_idf)
        if value is not None and text.lower() not in pool:
            pool[text.lower()] = PoolToken(text.lower(), value, position, pos)
    return sorted(pool.values(), key=lambda token: token.idf, reverse=True)


def negative_phrases(word: str, lex_all: bool = False) -> Phrases:
    """The one-token phrases that ban ``word``: it and its capitalised form, and with Lex "all" the same
    for every morphological variant (lemminflect), each phrase once."""
    forms = all_variants(word) if lex_all else (word,)
    return tuple(dict.fromkeys((spelling,) for form in forms for spelling in (form, capitalised(form))))


def banning(words: Iterable[str], lex_all: bool) -> Phrases:
    """The negative phrases of several words, in order; with Lex "all" a variant two share is banned once
    (plain phrases of distinct lowercase words never repeat)."""
    phrases = tuple(phrase for word in words for phrase in negative_phrases(word, lex_all))
    return tuple(dict.fromkeys(phrases)) if lex_all else phrases


@dataclass
class Reference:
    """One reference as the selectors see it."""

    tagged: TaggedSentence
    pool: list[PoolToken]  # highest IDF first
    seed: int
    ppdb: Any  # None, or an object with lookup(word, coarse POS, relation)

    def ordered(self, selection: str) -> list[PoolToken]:
        """The pool in a ranked system's order: "highest" or "lowest" IDF first (ties: earlier token)."""
        return self.pool if selection == "highest" else sorted(self.pool, key=lambda token: token.idf)

    def draws(self, system: System) -> SeededDraws:
        """The system's own reproducible draws for this reference and seed."""
        return SeededDraws(self.seed, system.number, self.tagged.text)


# One selector per kind of Tab. 3 row; each gets a row whose pool needs are met.


def ranked_negative(system: System, ref: Reference) -> Selected:
    """Systems 1-21: ban the tokens at the row's IDF ranks (1st, 2nd, 3rd highest or lowest)."""
    ordered = ref.ordered(system.selection)
    words = [ordered[rank - 1].word for rank in system.ranks]
    return ConstraintSet(system.number, system.name, negative=banning(words, system.lex == "all"))


def random_negative(system: System, ref: Reference) -> Selected:
    """Systems 22-27: ban ``count`` pool tokens drawn at random (seeded), in draw order."""
    chosen = ref.draws(system).sample(ref.pool, system.count)
    return ConstraintSet(system.number, system.name, negative=banning([t.word for t in chosen], system.lex == "all"))


def ranked_positive(system: System, ref: Reference) -> Selected:
    """Systems 29-31: require the token at the row's rank; a verb (Lex "verb") as one random other
    inflection of its lemma, if it has any (§3.2: "only one variant of the selected token is used")."""
    token = ref.ordered(system.selection)[system.ranks[0] - 1]
    form = token.word
    if system.lex == "verb" and token.pos == "VERB":
        form = random_verb_inflection(token.word, ref.draws(system))
    return ConstraintSet(system.number, system.name, positive=((form,),))


def positional(system: System, ref: Reference) -> Selected:
    """Systems 32-34: the output must not start with the reference's first ``count`` tokens, as written
    (carried on through the first word when they are all punctuation: ``positional_phrase``)."""
    tokens = ref.tagged.tokens
    if len(tokens) < system.count:
        return NoConstraintSet(system.number, system.name, reference_too_short_reason(len(tokens), system.count))
    phrase = positional_phrase([text for text, _ in tokens], system.count)
    if phrase is None:
        return NoConstraintSet(system.number, system.name, NO_WORD_REASON)
    return ConstraintSet(system.number, system.name, bos_avoid=(phrase,))


def ppdb_pair(system: System, ref: Reference) -> Selected:
    """Systems 35-37: the first pool token (highest IDF first) with a PPDB paraphrase of the row's
    relation whose coarse POS matches its own: ban the token, require one such paraphrase (seeded)."""
    if ref.ppdb is None:
        return NoConstraintSet(system.number, system.name, NO_PPDB_FILE)
    for token in ref.pool:
        options = ref.ppdb.lookup(token.word, coarse_pos_of_spacy(token.pos), system.ppdb_relation)
        if options:
            paraphrase = ref.draws(system).choice(options)
            return ConstraintSet(
                system.number, system.name, positive=(tuple(paraphrase.split()),), negative=negative_phrases(token.word)
            )
    return NoConstraintSet(system.number, system.name, no_ppdb_match_reason(system.ppdb_relation))


def no_constraints(system: System, ref: Reference) -> Selected:
    """System 28, the baseline."""
    return ConstraintSet(system.number, system.name)


def selector_for(system: System) -> Callable[[System, Reference], Selected]:
    """The selector a row's kind and selection call for."""
    if system.selection in ("highest", "lowest"):
        return ranked_positive if system.kind == "positive" else ranked_negative
    selections = {"random": random_negative, "position": positional, "ppdb": ppdb_pair, None: no_constraints}
    return selections[system.selection]


def select(system: System, ref: Reference) -> Selected:
    """One row's constraint set for one reference, or "no constraint set" and why."""
    if len(ref.pool) < system.pool_needed:
        return NoConstraintSet(
            system.number, system.name, pool_too_small_reason([t.word for t in ref.pool], system.pool_needed)
        )
    return selector_for(system)(system, ref)


def select_for_all_systems(
    sentence: TaggedSentence,
    idf: Mapping[str, float],
    *,
    seed: int = 0,
    ppdb: Any = None,
    systems: Iterable[int | System] | None = None,
    min_idf: float | None = None,
    max_idf: float | None = None,
) -> list[Selected]:
    """Every requested system's result for a tagged reference, in the order asked (default: all 37)."""
    lo, hi = settings_idf_window(min_idf, max_idf)
    rows = SYSTEMS if systems is None else [s if isinstance(s, System) else get_system(s) for s in systems]
    ref = Reference(sentence, build_pool(sentence.tokens, idf, lo, hi), int(seed), resolve_ppdb(ppdb))
    odd = odd_case_forms(text for text, _ in sentence.tokens)
    results = [select(system, ref) for system in rows]
    return [with_surface_forms(r, odd) if r.is_constraint_set else r for r in results]
