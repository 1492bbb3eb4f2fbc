"""Constraint selection (ParaBank §3.2, Tab. 3): the candidate pool and the 37 systems' constraint sets.

**Pool.** The reference's purely alphabetic spaCy tokens, lowercased, deduplicated by that lowercase
form (the first occurrence gives the position and the POS), that either have
``min_idf <= IDF <= max_idf`` (IDF looked up with the lowercase form; defaults 7.0 / 17.0, settings
``PARAFORGE_MIN_IDF`` / ``PARAFORGE_MAX_IDF``) or are one of the prepositions *about, as, at, by,
for, from, in, into, of, on, onto, over, to, with* whatever their IDF (a preposition missing from the
IDF table counts as IDF 0). Tokens missing from the IDF table are otherwise not in the pool.
"highest" orders the pool by IDF descending, "lowest" ascending; ties go to the earlier token.

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

import hashlib
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple, Union

from django.conf import settings

from .morphology import all_variants, capitalised, random_verb_inflection
from .ppdb import coarse_pos_of_spacy
from .systems import SYSTEMS, System, get_system

PREPOSITIONS = frozenset("about as at by for from in into of on onto over to with".split())

Phrase = tuple[str, ...]
Phrases = tuple[Phrase, ...]


# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class TaggedSentence:
    """A reference as spaCy saw it: its text and its (token text, universal POS) pairs, spaces dropped."""

    text: str
    tokens: tuple[tuple[str, str], ...]


def _phrases_to_json(phrases: Phrases) -> list[list[str]]:
    return [list(p) for p in phrases]


def _phrases_from_json(value: Any, field: str) -> Phrases:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and p and all(isinstance(t, str) and t for t in p) for p in value
    ):
        raise ValueError(f"{field!r} must be a list of non-empty lists of tokens")
    return tuple(tuple(p) for p in value)


@dataclass(slots=True)
class ConstraintSet:
    """The constraints one system puts on one decoding of one reference."""

    system: int
    name: str
    positive: Phrases = ()
    negative: Phrases = ()
    bos_avoid: Phrases = ()

    is_constraint_set: ClassVar[bool] = True

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "name": self.name, "positive": _phrases_to_json(self.positive),
                "negative": _phrases_to_json(self.negative), "bos_avoid": _phrases_to_json(self.bos_avoid)}

    @staticmethod
    def from_json(value: Mapping[str, Any] | str) -> ConstraintSet | NoConstraintSet:
        """Inverse of ``to_json`` of either class (a ``no_constraint_set`` key gives a NoConstraintSet)."""
        data = json.loads(value) if isinstance(value, str) else value
        if not isinstance(data, Mapping) or not isinstance(data.get("system"), int):
            raise ValueError("a constraint set is an object with an integer 'system'")
        name = str(data.get("name") or get_system(data["system"]).name)
        if data.get("no_constraint_set") is not None:
            return NoConstraintSet(data["system"], name, str(data["no_constraint_set"]))
        return ConstraintSet(data["system"], name, _phrases_from_json(data.get("positive", []), "positive"),
                             _phrases_from_json(data.get("negative", []), "negative"),
                             _phrases_from_json(data.get("bos_avoid", []), "bos_avoid"))


@dataclass(slots=True)
class NoConstraintSet:
    """"No constraint set" for this reference under this system, and why (reported, never invented)."""

    system: int
    name: str
    reason: str

    is_constraint_set: ClassVar[bool] = False
    positive: ClassVar[Phrases] = ()
    negative: ClassVar[Phrases] = ()
    bos_avoid: ClassVar[Phrases] = ()

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "name": self.name, "positive": [], "negative": [], "bos_avoid": [],
                "no_constraint_set": self.reason}

    from_json = staticmethod(ConstraintSet.from_json)


Selected = Union[ConstraintSet, NoConstraintSet]


# ------------------------------------------------------------------------------------------ pool


class PoolToken(NamedTuple):
    word: str  # lowercase
    idf: float
    position: int  # index of its first occurrence among the reference's tokens
    pos: str  # spaCy universal POS of that occurrence


def build_pool(tokens: Sequence[tuple[str, str]], idf: Mapping[str, float], *, min_idf: float | None = None,
               max_idf: float | None = None) -> list[PoolToken]:
    """The candidate pool, highest IDF first (ties: earlier token first)."""
    lo = settings.PARAFORGE_MIN_IDF if min_idf is None else min_idf
    hi = settings.PARAFORGE_MAX_IDF if max_idf is None else max_idf
    seen: set[str] = set()
    pool: list[PoolToken] = []
    for position, (text, pos) in enumerate(tokens):
        if not text.isalpha():
            continue
        word = text.lower()
        if word in seen:
            continue
        seen.add(word)
        value = idf.get(word)
        if word in PREPOSITIONS:
            value = 0.0 if value is None else value
        elif value is None or not lo <= value <= hi:
            continue
        pool.append(PoolToken(word, value, position, pos))
    pool.sort(key=lambda t: (-t.idf, t.position))
    return pool


# ------------------------------------------------------------------------------------- selection


@lru_cache(maxsize=200_000)
def negative_phrases(word: str, lex_all: bool = False) -> Phrases:
    """Single-token negative phrases for ``word``: its lowercase and capitalised forms, and with
    ``lex_all`` those of every morphological variant."""
    forms = all_variants(word) if lex_all else (word,)
    out: dict[Phrase, None] = {}
    for form in forms:
        out[(form,)] = None
        out[(capitalised(form),)] = None
    return tuple(out)


def _draw_slots() -> dict[int, tuple[int, int]]:
    """Each system that draws gets its own fixed words of a sentence's draw table: (start, size)."""
    slots, start = {}, 0
    for system in SYSTEMS:
        size = system.count if system.selection == "random" else 1 if (
            system.lex == "verb" or system.selection == "ppdb") else 0
        if size:
            slots[system.number] = (start, size)
            start += size
    assert start <= 32, start
    return slots


_SLOTS = _draw_slots()


def seed_key(seed: int, text: str) -> bytes:
    return f"{seed}\x1f{text}".encode()


def draw_table(seed: int, text: str) -> tuple[int, ...]:
    """32 32-bit words from BLAKE2b over (seed, reference text); each system draws from its own slot."""
    key = seed_key(seed, text)
    return struct.unpack(">32I", hashlib.blake2b(key, digest_size=64, person=b"draws-0").digest()
                         + hashlib.blake2b(key, digest_size=64, person=b"draws-1").digest())


class SeededDraws:
    """Reproducible random draws for one (seed, system, reference text).

    A system's draws are its own fixed words of the sentence's :func:`draw_table` (then, if it ever
    needed more, a hash chain of (seed, system, text)): independent of every other system and sentence,
    so a reference gets the same constraints whatever else is selected and in whatever order or batch.
    Not ``random.Random``: seeding a Mersenne Twister costs ~7 us per system and sentence, more than
    the rest of the selection; the modulo bias here is below 1e-7 for pools of < 400 tokens.
    """

    __slots__ = ("_words", "_next", "_seed", "_system", "_text")

    def __init__(self, seed: int, system: int, text: str, table: tuple[int, ...] | None = None) -> None:
        start, size = _SLOTS.get(system, (0, 0))
        if size:
            table = table if table is not None else draw_table(seed, text)
            self._words = table[start:start + size]
        else:
            self._words = ()
        self._next = 0
        self._seed, self._system, self._text = seed, system, text

    def below(self, n: int) -> int:
        """A number in range(n)."""
        if self._next >= len(self._words):  # beyond the system's slot: extend by a hash chain
            digest = hashlib.blake2b(seed_key(self._seed, self._text) + struct.pack(">I", self._next),
                                     digest_size=32, person=b"system%d" % self._system).digest()
            self._words = self._words + struct.unpack(">8I", digest)
        word = self._words[self._next]
        self._next += 1
        return word % n

    def choice(self, options: Sequence):
        return options[self.below(len(options))]

    def sample(self, population: Sequence, k: int) -> list:
        """``k`` distinct elements in draw order (partial Fisher-Yates)."""
        items = list(population)
        for j in range(k):
            r = j + self.below(len(items) - j)
            items[j], items[r] = items[r], items[j]
        return items[:k]


def rng_for(seed: int, system: int, text: str) -> SeededDraws:
    """The draws of ``system`` for a reference and seed (what the selection uses)."""
    return SeededDraws(seed, system, text)


class _Context:
    """Everything the systems share for one reference, computed once."""

    __slots__ = ("text", "tokens", "pool", "_ascending", "seed", "ppdb", "_too_small", "_ranked", "_key")

    def __init__(self, sentence: TaggedSentence, pool: list[PoolToken], seed: int, ppdb) -> None:
        self.text = sentence.text
        self.tokens = sentence.tokens
        self.pool = pool
        self._ascending: list[PoolToken] | None = None
        self.seed = seed
        self.ppdb = ppdb
        self._too_small: dict[int, str] = {}
        self._ranked: list[list[Phrases] | None] = [None, None, None, None]
        self._key: tuple[int, ...] | None = None

    def draws(self, system: int) -> SeededDraws:
        if self._key is None:
            self._key = draw_table(self.seed, self.text)
        return SeededDraws(self.seed, system, self.text, self._key)

    def ranked_negatives(self, highest: bool, lex_all: bool) -> list[Phrases]:
        """Negative phrases of the first three pool tokens in highest (or lowest) IDF order."""
        code = (0 if highest else 2) + lex_all
        found = self._ranked[code]
        if found is None:
            ordered = self.pool if highest else self.ascending
            found = self._ranked[code] = [negative_phrases(t.word, lex_all) for t in ordered[:3]]
        return found

    @property
    def ascending(self) -> list[PoolToken]:
        if self._ascending is None:
            self._ascending = sorted(self.pool, key=lambda t: (t.idf, t.position))
        return self._ascending


def _too_small(system: System, ctx: _Context) -> NoConstraintSet:
    needed = system.pool_needed
    reason = ctx._too_small.get(needed)
    if reason is None:
        words = ", ".join(t.word for t in ctx.pool) or "empty"
        reason = ctx._too_small[needed] = f"pool too small: {len(ctx.pool)} token(s) ({words}), system needs {needed}"
    return NoConstraintSet(system.number, system.name, reason)


def _negatives(chosen: Iterable[PoolToken], lex_all: bool) -> Phrases:
    phrases: Phrases = ()
    for token in chosen:
        phrases += negative_phrases(token.word, lex_all)
    return tuple(dict.fromkeys(phrases)) if lex_all else phrases


# One routine per *selection* (and kind) of a System row; each gets a system whose pool needs are met.

def _select_none(system: System, ctx: _Context) -> Selected:
    return ConstraintSet(system.number, system.name)


def _select_position(system: System, ctx: _Context) -> Selected:
    n = system.count
    if len(ctx.tokens) < n:
        return NoConstraintSet(system.number, system.name, f"reference has {len(ctx.tokens)} token(s), system needs {n}")
    return ConstraintSet(system.number, system.name, (), (), (tuple(t for t, _ in ctx.tokens[:n]),))


def _select_ranked_negative(system: System, ctx: _Context) -> Selected:
    code, highest, lex_all, idx = _RANKED.get(id(system)) or _ranked_args(system)
    ranked = ctx._ranked[code] or ctx.ranked_negatives(highest, lex_all)
    if len(idx) == 1:
        negative = ranked[idx[0]]
    elif len(idx) == 2:
        negative = ranked[idx[0]] + ranked[idx[1]]
    else:
        negative = ranked[idx[0]] + ranked[idx[1]] + ranked[idx[2]]
    if lex_all and len(idx) > 1:
        negative = tuple(dict.fromkeys(negative))
    return ConstraintSet(system.number, system.name, (), negative, ())


def _ranked_args(s: System) -> tuple[int, bool, bool, tuple[int, ...]]:
    """(cache slot, highest?, lex all?, zero-based ranks) of a ranked system, derived from its row."""
    highest, lex_all = s.selection == "highest", s.lex == "all"
    return (0 if highest else 2) + lex_all, highest, lex_all, tuple(r - 1 for r in s.ranks)


_RANKED = {id(s): _ranked_args(s) for s in SYSTEMS if s.selection in ("highest", "lowest")}


def _select_ranked_positive(system: System, ctx: _Context) -> Selected:
    token = (ctx.pool if system.selection == "highest" else ctx.ascending)[system.ranks[0] - 1]
    form = token.word
    if token.pos == "VERB" and system.lex == "verb":
        form = random_verb_inflection(form, ctx.draws(system.number))
    return ConstraintSet(system.number, system.name, ((form,),), (), ())


def _select_random(system: System, ctx: _Context) -> Selected:
    chosen = ctx.draws(system.number).sample(ctx.pool, system.count)
    return ConstraintSet(system.number, system.name, (), _negatives(chosen, system.lex == "all"), ())


def _handler(system: System):
    if system.selection in ("highest", "lowest"):
        return _select_ranked_positive if system.kind == "positive" else _select_ranked_negative
    return {None: _select_none, "position": _select_position, "random": _select_random,
            "ppdb": _select_ppdb}[system.selection]


def _select_ppdb(system: System, ctx: _Context) -> Selected:
    if ctx.ppdb is None:
        return NoConstraintSet(system.number, system.name, "no PPDB file given")
    prefetch = getattr(ctx.ppdb, "prefetch", None)
    if prefetch is not None:
        prefetch([t.word for t in ctx.pool])
    for token in ctx.pool:  # highest IDF first: the first pool token that has a matching paraphrase
        options = ctx.ppdb.lookup(token.word, coarse_pos_of_spacy(token.pos), system.ppdb_relation)
        if options:
            paraphrase = ctx.draws(system.number).choice(options)
            return ConstraintSet(system.number, system.name, positive=(tuple(paraphrase.split()),),
                                 negative=negative_phrases(token.word))
    return NoConstraintSet(system.number, system.name,
                           f"no PPDB {system.ppdb_relation} paraphrase with a matching POS for any pool token")


# ------------------------------------------------------------------------------------ public API


def tag_sentences(texts: Sequence[str], *, nlp=None, batch_size: int = 256) -> list[TaggedSentence]:
    """Tokenise and POS-tag references with spaCy (``nlp.pipe``, batched)."""
    if nlp is None:
        from .nlp import load_pipeline

        nlp = load_pipeline(tagger=True)
    texts = list(texts)
    return [
        TaggedSentence(text, tuple((tok.text, tok.pos_) for tok in doc if not tok.is_space))
        for text, doc in zip(texts, nlp.pipe(texts, batch_size=batch_size))
    ]


def as_tagged(sentence: str | TaggedSentence | Sequence[tuple[str, str]], *, nlp=None) -> TaggedSentence:
    if isinstance(sentence, TaggedSentence):
        return sentence
    if isinstance(sentence, str):
        return tag_sentences([sentence], nlp=nlp)[0]
    tokens = tuple((str(t), str(p)) for t, p in sentence)
    return TaggedSentence(" ".join(t for t, _ in tokens), tokens)


def _resolve_ppdb(ppdb):
    if ppdb is None or hasattr(ppdb, "lookup"):
        return ppdb
    from .ppdb import open_ppdb

    return open_ppdb(ppdb)


class SystemList(tuple):
    """Systems resolved once (see resolve_systems), each with its selection routine; passing one to
    select_for_all_systems skips the per-call lookup."""

    plan: tuple

    def __new__(cls, rows: Iterable[System]):
        self = super().__new__(cls, rows)
        self.plan = tuple((s, s.pool_needed, _handler(s)) for s in self)
        return self


def resolve_systems(systems: Iterable[int | str | System] | None) -> SystemList:
    """System rows for numbers (or rows); None -> all 37. Raises UnknownSystem for a bad number."""
    if systems is None:
        return _ALL
    if type(systems) is SystemList:
        return systems
    return SystemList(s if isinstance(s, System) else get_system(s) for s in systems)


_ALL = SystemList(SYSTEMS)


def select_for_all_systems(sentence: str | TaggedSentence | Sequence[tuple[str, str]], idf: Mapping[str, float],
                           *, seed: int = 0, ppdb=None, systems: Iterable[int | System] | None = None,
                           min_idf: float | None = None, max_idf: float | None = None,
                           nlp=None) -> list[Selected]:
    """The constraint set (or "no constraint set") of each system, in system order.

    ``sentence``: raw text (tagged here with spaCy), a :class:`TaggedSentence`, or (text, POS) pairs.
    ``ppdb``: a :class:`generation.ppdb.PpdbIndex` or the path of a PPDB 2.0 file; without it the PPDB
    systems report "no PPDB file given". ``systems``: numbers or System rows (default: all 37).
    """
    tagged = as_tagged(sentence, nlp=nlp)
    rows = resolve_systems(systems)
    ctx = _Context(tagged, build_pool(tagged.tokens, idf, min_idf=min_idf, max_idf=max_idf), int(seed),
                   _resolve_ppdb(ppdb))
    size = len(ctx.pool)
    return [handler(system, ctx) if size >= needed else _too_small(system, ctx)
            for system, needed, handler in rows.plan]


def select_constraints(system: int | System, sentence: str | TaggedSentence | Sequence[tuple[str, str]],
                       idf: Mapping[str, float], **kwargs) -> Selected:
    """The constraint set of one system for one reference (same keywords as select_for_all_systems)."""
    return select_for_all_systems(sentence, idf, systems=[system], **kwargs)[0]
