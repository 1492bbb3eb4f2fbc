"""What both selection implementations share: the values they take and give, the pool's rule
constants, the "no constraint set" reasons, and the seeded draws (so that the reference and the fast
path agree on every random choice by construction, not by coincidence)."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from django.conf import settings

from ..constraints.ppdb import open_ppdb
from ..constraints.systems import SYSTEMS, get_system
from ..morphology import capitalised
from ..nlp import load_pipeline
from ..words import holds_word

# §3.2 "Prepositions": in the pool whatever their IDF (a preposition missing from the table counts as 0).
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
        return {
            "system": self.system,
            "name": self.name,
            "positive": _phrases_to_json(self.positive),
            "negative": _phrases_to_json(self.negative),
            "bos_avoid": _phrases_to_json(self.bos_avoid),
        }

    @staticmethod
    def from_json(value: Mapping[str, Any] | str) -> ConstraintSet | NoConstraintSet:
        """Inverse of ``to_json`` of either class (a ``no_constraint_set`` key gives a NoConstraintSet)."""
        data = json.loads(value) if isinstance(value, str) else value
        if not isinstance(data, Mapping) or not isinstance(data.get("system"), int):
            raise ValueError("a constraint set is an object with an integer 'system'")
        name = str(data.get("name") or get_system(data["system"]).name)
        if data.get("no_constraint_set") is not None:
            return NoConstraintSet(data["system"], name, str(data["no_constraint_set"]))
        return ConstraintSet(
            data["system"],
            name,
            _phrases_from_json(data.get("positive", []), "positive"),
            _phrases_from_json(data.get("negative", []), "negative"),
            _phrases_from_json(data.get("bos_avoid", []), "bos_avoid"),
        )


@dataclass(slots=True)
class NoConstraintSet:
    """ "No constraint set" for this reference under this system, and why (reported, never invented)."""

    system: int
    name: str
    reason: str

    is_constraint_set: ClassVar[bool] = False
    positive: ClassVar[Phrases] = ()
    negative: ClassVar[Phrases] = ()
    bos_avoid: ClassVar[Phrases] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "name": self.name,
            "positive": [],
            "negative": [],
            "bos_avoid": [],
            "no_constraint_set": self.reason,
        }

    from_json = staticmethod(ConstraintSet.from_json)


Selected = ConstraintSet | NoConstraintSet


class PoolToken(NamedTuple):
    word: str  # lowercase
    idf: float
    position: int  # index of its first occurrence among the reference's tokens
    pos: str  # spaCy universal POS of that occurrence


# ------------------------------------------------------------------------------ reasons (reported)


def pool_too_small_reason(pool_words: Sequence[str], needed: int) -> str:
    """Why a system that needs ``needed`` pool tokens has no constraint set."""
    return f"pool too small: {len(pool_words)} token(s) ({', '.join(pool_words) or 'empty'}), system needs {needed}"


def reference_too_short_reason(tokens: int, needed: int) -> str:
    """Why a positional system that bans the first ``needed`` tokens has no constraint set."""
    return f"reference has {tokens} token(s), system needs {needed}"


NO_WORD_REASON = "reference has no word (only punctuation): no start to keep the output from"


def positional_phrase(tokens: Sequence[str], count: int) -> Phrase | None:
    """What systems 32-34 keep the output from starting with: the reference's first ``count`` tokens as
    written, carried on through the first token that holds a word when none of them does (``"``, ``--``).
    Why: the decoder matches words, so a phrase of punctuation alone bans nothing it can see (it was an
    empty phrase, an error that failed the whole job), and the rule is about how the output begins in
    words - ``"The figures ...`` gives ``('"', 'The')``: not starting with "The". None when the reference
    holds no word at all (then there is no constraint set). Words as the decoder counts them: generation/words.py."""
    phrase = tuple(tokens[:count])
    if any(holds_word(t) for t in phrase):
        return phrase
    for end in range(count, len(tokens)):
        if holds_word(tokens[end]):
            return tuple(tokens[: end + 1])
    return None


NO_PPDB_FILE = "no PPDB file given"


def no_ppdb_match_reason(relation: str) -> str:
    """Why a PPDB system found nothing for any pool token."""
    return f"no PPDB {relation} paraphrase with a matching POS for any pool token"


def odd_case_forms(texts: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The reference's spellings that are neither lowercase nor capitalised ("RBA", "iPhone"), by
    lowercase word, in reference order: banning "rba" and "Rba" alone would leave "RBA" free."""
    odd: dict[str, tuple[str, ...]] = {}
    for text in texts:
        low = text.lower()
        if text != low and text != capitalised(low) and text not in odd.get(low, ()):
            odd[low] = odd.get(low, ()) + (text,)
    return odd


def with_surface_forms(c: ConstraintSet, odd: Mapping[str, tuple[str, ...]]) -> ConstraintSet:
    """``c`` with every banned single word also banned as the reference spells it (odd_case_forms)."""
    negative = c.negative
    forms = [form for phrase in negative if len(phrase) == 1 and phrase[0] in odd for form in odd[phrase[0]]]
    if not forms:
        return c
    have = set(negative)
    extra = tuple([(form,) for form in forms if (form,) not in have])
    if not extra:
        return c
    return ConstraintSet(c.system, c.name, c.positive, negative + tuple(dict.fromkeys(extra)), c.bos_avoid)


# ------------------------------------------------------------------------------------- IDF window


def checked_idf_window(min_idf: float | None = None, max_idf: float | None = None) -> tuple[float, float]:
    """The pool's IDF bounds (settings' defaults for None). ValueError for NaN or min > max: either would
    leave every pool empty and each system would report "pool too small" instead of the mistake."""
    lo = settings.PARAFORGE_MIN_IDF if min_idf is None else min_idf
    hi = settings.PARAFORGE_MAX_IDF if max_idf is None else max_idf
    if math.isnan(lo) or math.isnan(hi):
        raise ValueError("min-idf and max-idf must be numbers, not nan")
    if lo > hi:
        raise ValueError(f"min-idf ({lo:g}) > max-idf ({hi:g}): no token could join the pool")
    return lo, hi


def settings_idf_window(min_idf: float | None = None, max_idf: float | None = None) -> tuple[float, float]:
    """The pool's IDF bounds, the settings' (PARAFORGE_MIN_IDF / PARAFORGE_MAX_IDF) for None; unchecked."""
    return (
        settings.PARAFORGE_MIN_IDF if min_idf is None else min_idf,
        settings.PARAFORGE_MAX_IDF if max_idf is None else max_idf,
    )


# ------------------------------------------------------------------------------------ seeded draws


def _draw_slots() -> dict[int, tuple[int, int]]:
    """Each system that draws gets its own fixed words of a sentence's draw table: (start, size)."""
    slots, start = {}, 0
    for system in SYSTEMS:
        size = (
            system.count
            if system.selection == "random"
            else 1
            if (system.lex == "verb" or system.selection == "ppdb")
            else 0
        )
        if size:
            slots[system.number] = (start, size)
            start += size
    assert start <= 32, start
    return slots


SLOTS = _draw_slots()


def seed_key(seed: int, text: str) -> bytes:
    """What a reference's draws hash: the seed and the text, so they depend on nothing else."""
    return f"{seed}\x1f{text}".encode()


DRAWS_0 = hashlib.blake2b(digest_size=64, person=b"draws-0")
DRAWS_1 = hashlib.blake2b(digest_size=64, person=b"draws-1")
_UNPACK_TABLE = struct.Struct(">32I").unpack
UNPACK_HALF = struct.Struct(">16I").unpack


def draw_table(seed: int, text: str) -> tuple[int, ...]:
    """32 32-bit words from BLAKE2b over (seed, reference text); each system draws from its own slot.
    (Copies of two keyed-up hashers: the same digests as hashing from scratch, for less set-up.)"""
    key = f"{seed}\x1f{text}".encode()
    first, second = DRAWS_0.copy(), DRAWS_1.copy()
    first.update(key)
    second.update(key)
    return _UNPACK_TABLE(first.digest() + second.digest())


class SeededDraws:
    """Reproducible random draws for one (seed, system, reference text).

    A system's draws are its own fixed words of the sentence's :func:`draw_table` (then, if it ever
    needed more, a hash chain of (seed, system, text)): independent of every other system and sentence,
    so a reference gets the same constraints whatever else is selected and in whatever order or batch.
    Not ``random.Random``: seeding a Mersenne Twister costs ~7 us per system and sentence, more than
    the rest of the selection; the modulo bias here is below 1e-7 for pools of < 400 tokens.
    (Selection reads the slot's words directly where they suffice; it uses this class otherwise.)
    """

    __slots__ = ("_words", "_next", "_seed", "_system", "_text")

    def __init__(self, seed: int, system: int, text: str, table: tuple[int, ...] | None = None) -> None:
        start, size = SLOTS.get(system, (0, 0))
        if size:
            table = table if table is not None else draw_table(seed, text)
            self._words = table[start : start + size]
        else:
            self._words = ()
        self._next = 0
        self._seed, self._system, self._text = seed, system, text

    def below(self, n: int) -> int:
        """A number in range(n)."""
        if self._next >= len(self._words):  # beyond the system's slot: extend by a hash chain
            digest = hashlib.blake2b(
                seed_key(self._seed, self._text) + struct.pack(">I", self._next),
                digest_size=32,
                person=b"system%d" % self._system,
            ).digest()
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


# ----------------------------------------------------------------------------------------- input


def tag_sentences(texts: Sequence[str], *, nlp=None, batch_size: int = 256) -> list[TaggedSentence]:
    """Tokenise and POS-tag references with spaCy (``nlp.pipe``, batched)."""
    if nlp is None:
        nlp = load_pipeline(tagger=True)
    texts = list(texts)
    return [
        TaggedSentence(text, tuple((tok.text, tok.pos_) for tok in doc if not tok.is_space))
        for text, doc in zip(texts, nlp.pipe(texts, batch_size=batch_size))
    ]


def as_tagged(sentence: str | TaggedSentence | Sequence[tuple[str, str]], *, nlp=None) -> TaggedSentence:
    """Any accepted input as a TaggedSentence (raw text is tagged with spaCy here)."""
    if isinstance(sentence, TaggedSentence):
        return sentence
    if isinstance(sentence, str):
        return tag_sentences([sentence], nlp=nlp)[0]
    tokens = tuple((str(t), str(p)) for t, p in sentence)
    return TaggedSentence(" ".join(t for t, _ in tokens), tokens)


def resolve_ppdb(ppdb: Any) -> Any:
    """A PPDB source with ``lookup`` (None stays None); a path is opened as an index."""
    if ppdb is None or hasattr(ppdb, "lookup"):
        return ppdb
    return open_ppdb(ppdb)
