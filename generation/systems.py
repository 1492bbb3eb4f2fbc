"""The 37 constraint systems of ParaBank (Hu et al. 2019, Tab. 3), as data.

Each system is one frozen :class:`System` row; :mod:`generation.constraints` interprets the rows with
one selection routine per *selection* value, never one code path per system number.

| No.      | kind       | selection                                   | Lex  |
|----------|------------|---------------------------------------------|------|
| 1-3      | negative   | 1st / 2nd / 3rd highest IDF                 | none |
| 4-6      | negative   | (1st,2nd) / (2nd,3rd) / (1st,3rd) highest   | none |
| 7        | negative   | (1st,2nd,3rd) highest                       | none |
| 8-14     | negative   | as 1-7                                      | all  |
| 15-21    | negative   | as 1-7 but lowest IDF                       | none |
| 22-24    | negative   | 1 / 2 / 3 random pool tokens                | none |
| 25-27    | negative   | 1 / 2 / 3 random pool tokens                | all  |
| 28       | none       | baseline, no constraints                    |      |
| 29-31    | positive   | 1st / 2nd / 3rd highest IDF                 | verb |
| 32-34    | positional | the first 1 / 2 / 3 reference tokens <BOS>  | none |
| 35-37    | ppdb       | PPDB Equivalence / Forward / Reverse entail.| none |
"""
from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("negative", "positive", "positional", "ppdb", "none")
SELECTIONS = ("highest", "lowest", "random", "position", "ppdb", None)
LEX = ("none", "all", "verb")
PPDB_RELATIONS = ("Equivalence", "ForwardEntailment", "ReverseEntailment")


class UnknownSystem(LookupError):
    pass


@dataclass(frozen=True)
class System:
    number: int
    name: str
    kind: str  # one of KINDS
    selection: str | None  # one of SELECTIONS
    ranks: tuple[int, ...] = ()  # 1-based ranks into the pool ordered by the selection (highest/lowest)
    count: int = 0  # how many random tokens (random) or leading reference tokens (position)
    lex: str = "none"  # one of LEX
    ppdb_relation: str | None = None  # one of PPDB_RELATIONS for kind "ppdb"
    # How many pool tokens the system needs at least (0: it does not use the pool); derived.
    pool_needed: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        assert self.kind in KINDS and self.selection in SELECTIONS and self.lex in LEX, self
        assert self.ppdb_relation in (None, *PPDB_RELATIONS), self
        needed = {"highest": max(self.ranks, default=0), "lowest": max(self.ranks, default=0),
                  "random": self.count, "ppdb": 1}.get(self.selection, 0)
        object.__setattr__(self, "pool_needed", needed)

    @property
    def sign(self) -> str:
        """Tab. 3's column: ⊖ negative, ⊕ positive, ⊕⊖ both, '' none."""
        return {"negative": "⊖", "positional": "⊖", "positive": "⊕", "ppdb": "⊕⊖", "none": ""}[self.kind]


_ORD = {1: "1st", 2: "2nd", 3: "3rd"}


def _ranks_label(ranks: tuple[int, ...]) -> str:
    if len(ranks) == 1:
        return _ORD[ranks[0]]
    return "(" + ",".join(_ORD[r] for r in ranks) + ")"


_RANK_SETS = ((1,), (2,), (3,), (1, 2), (2, 3), (1, 3), (1, 2, 3))


def _build() -> tuple[System, ...]:
    rows: list[System] = []
    n = 0

    def add(**kw) -> None:
        nonlocal n
        n += 1
        rows.append(System(number=n, **kw))

    for selection, lex in (("highest", "none"), ("highest", "all"), ("lowest", "none")):
        for ranks in _RANK_SETS:  # 1-7, 8-14, 15-21
            suffix = ", lex all" if lex == "all" else ""
            add(name=f"neg {_ranks_label(ranks)} {selection} IDF{suffix}", kind="negative",
                selection=selection, ranks=ranks, lex=lex)
    for lex in ("none", "all"):  # 22-24, 25-27
        for count in (1, 2, 3):
            suffix = ", lex all" if lex == "all" else ""
            add(name=f"neg {count} random token{'s' if count > 1 else ''}{suffix}", kind="negative",
                selection="random", count=count, lex=lex)
    add(name="baseline: no constraints", kind="none", selection=None)  # 28
    for rank in (1, 2, 3):  # 29-31
        add(name=f"pos {_ORD[rank]} highest IDF, verb variant", kind="positive", selection="highest",
            ranks=(rank,), lex="verb")
    for count in (1, 2, 3):  # 32-34
        add(name=f"neg <BOS> first {count} token{'s' if count > 1 else ''}", kind="positional",
            selection="position", count=count)
    for relation, short in zip(PPDB_RELATIONS, ("equ", "fwd", "rev")):  # 35-37
        add(name=f"PPDB {short} ({relation})", kind="ppdb", selection="ppdb", ppdb_relation=relation)
    return tuple(rows)


SYSTEMS: tuple[System, ...] = _build()
assert len(SYSTEMS) == 37 and [s.number for s in SYSTEMS] == list(range(1, 38))
_BY_NUMBER = {s.number: s for s in SYSTEMS}
PPDB_SYSTEMS = tuple(s.number for s in SYSTEMS if s.kind == "ppdb")


def get_system(number: int | str) -> System:
    """The system numbered ``number`` (1-37); :class:`UnknownSystem` otherwise."""
    try:
        n = int(str(number).strip())
    except (TypeError, ValueError):
        raise UnknownSystem(f"system {number!r} is not a number; systems are numbered 1-37 (ParaBank Tab. 3)") from None
    try:
        return _BY_NUMBER[n]
    except KeyError:
        raise UnknownSystem(f"unknown system {n}; systems are numbered 1-37 (ParaBank Tab. 3)") from None
