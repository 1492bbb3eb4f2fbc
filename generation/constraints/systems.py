"""The 37 constraint systems of ParaBank (Hu et al. 2019, Tab. 3), as data.

Each system is one frozen :class:`System` row of :data:`SYSTEMS`; constraint selection
(:mod:`generation.selection`) interprets the rows with one selector per *selection* value, never one code
path per system number.

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

ParaBank 2's diverse mode (issue 39) adds the ranked systems "r1", "r2", ... (rank r of a reference's kept
outputs, 1 = best): they are not rows of Tab. 3, so :func:`get_system` does not know them, but every screen names
a system with :func:`system_display_name` ("r3" -> "rank 3") and orders systems with :func:`system_sort_key`.
"""

from __future__ import annotations

import re
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
        needed = {
            "highest": max(self.ranks, default=0),
            "lowest": max(self.ranks, default=0),
            "random": self.count,
            "ppdb": 1,
        }.get(self.selection, 0)
        object.__setattr__(self, "pool_needed", needed)

    @property
    def sign(self) -> str:
        """Tab. 3's column: ⊖ negative, ⊕ positive, ⊕⊖ both, '' none."""
        return {"negative": "⊖", "positional": "⊖", "positive": "⊕", "ppdb": "⊕⊖", "none": ""}[self.kind]


# ParaBank Tab. 3, one row per system. Adding a system is adding a row: the selectors (the reference in
# generation/selection/reference.py and the fast path) read only these fields, never a system's number.
SYSTEMS: tuple[System, ...] = (
    System(1, "neg 1st highest IDF", "negative", "highest", ranks=(1,)),
    System(2, "neg 2nd highest IDF", "negative", "highest", ranks=(2,)),
    System(3, "neg 3rd highest IDF", "negative", "highest", ranks=(3,)),
    System(4, "neg (1st,2nd) highest IDF", "negative", "highest", ranks=(1, 2)),
    System(5, "neg (2nd,3rd) highest IDF", "negative", "highest", ranks=(2, 3)),
    System(6, "neg (1st,3rd) highest IDF", "negative", "highest", ranks=(1, 3)),
    System(7, "neg (1st,2nd,3rd) highest IDF", "negative", "highest", ranks=(1, 2, 3)),
    System(8, "neg 1st highest IDF, lex all", "negative", "highest", ranks=(1,), lex="all"),
    System(9, "neg 2nd highest IDF, lex all", "negative", "highest", ranks=(2,), lex="all"),
    System(10, "neg 3rd highest IDF, lex all", "negative", "highest", ranks=(3,), lex="all"),
    System(11, "neg (1st,2nd) highest IDF, lex all", "negative", "highest", ranks=(1, 2), lex="all"),
    System(12, "neg (2nd,3rd) highest IDF, lex all", "negative", "highest", ranks=(2, 3), lex="all"),
    System(13, "neg (1st,3rd) highest IDF, lex all", "negative", "highest", ranks=(1, 3), lex="all"),
    System(14, "neg (1st,2nd,3rd) highest IDF, lex all", "negative", "highest", ranks=(1, 2, 3), lex="all"),
    System(15, "neg 1st lowest IDF", "negative", "lowest", ranks=(1,)),
    System(16, "neg 2nd lowest IDF", "negative", "lowest", ranks=(2,)),
    System(17, "neg 3rd lowest IDF", "negative", "lowest", ranks=(3,)),
    System(18, "neg (1st,2nd) lowest IDF", "negative", "lowest", ranks=(1, 2)),
    System(19, "neg (2nd,3rd) lowest IDF", "negative", "lowest", ranks=(2, 3)),
    System(20, "neg (1st,3rd) lowest IDF", "negative", "lowest", ranks=(1, 3)),
    System(21, "neg (1st,2nd,3rd) lowest IDF", "negative", "lowest", ranks=(1, 2, 3)),
    System(22, "neg 1 random token", "negative", "random", count=1),
    System(23, "neg 2 random tokens", "negative", "random", count=2),
    System(24, "neg 3 random tokens", "negative", "random", count=3),
    System(25, "neg 1 random token, lex all", "negative", "random", count=1, lex="all"),
    System(26, "neg 2 random tokens, lex all", "negative", "random", count=2, lex="all"),
    System(27, "neg 3 random tokens, lex all", "negative", "random", count=3, lex="all"),
    System(28, "baseline: no constraints", "none", None),
    System(29, "pos 1st highest IDF, verb variant", "positive", "highest", ranks=(1,), lex="verb"),
    System(30, "pos 2nd highest IDF, verb variant", "positive", "highest", ranks=(2,), lex="verb"),
    System(31, "pos 3rd highest IDF, verb variant", "positive", "highest", ranks=(3,), lex="verb"),
    System(32, "neg <BOS> first 1 token", "positional", "position", count=1),
    System(33, "neg <BOS> first 2 tokens", "positional", "position", count=2),
    System(34, "neg <BOS> first 3 tokens", "positional", "position", count=3),
    System(35, "PPDB equ (Equivalence)", "ppdb", "ppdb", ppdb_relation="Equivalence"),
    System(36, "PPDB fwd (ForwardEntailment)", "ppdb", "ppdb", ppdb_relation="ForwardEntailment"),
    System(37, "PPDB rev (ReverseEntailment)", "ppdb", "ppdb", ppdb_relation="ReverseEntailment"),
)
assert [s.number for s in SYSTEMS] == list(range(1, len(SYSTEMS) + 1)), "systems are numbered 1, 2, 3, ..."
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


RANK_PREFIX = "r"
_RANK = re.compile(r"r([1-9][0-9]*)")


def rank_system(rank: int) -> str:
    """The system string of rank ``rank`` (1-based) of ParaBank 2's diverse mode: 3 -> "r3"."""
    if rank < 1:
        raise ValueError(f"ranks start at 1, not {rank}")
    return f"{RANK_PREFIX}{rank}"


def system_rank(system: str) -> int | None:
    """The rank of a diverse-mode system ("r3" -> 3), None for any other system string. One spelling only: "r"
    and ASCII digits without a leading zero, so that each rank has one system string."""
    match = _RANK.fullmatch(str(system))
    return int(match.group(1)) if match else None


def system_display_name(system: str) -> str:
    """How a person sees a system: "r3" -> "rank 3"; a Tab. 3 number -> its Tab. 3 name ("17" -> "neg 3rd
    lowest IDF"); anything else (the attention copy "0", an imported campaign's own ids) -> itself. A campaign's
    own ``system_names`` come first where a campaign is known (``scoring.dashboard.tables.system_name``)."""
    rank = system_rank(system)
    if rank is not None:
        return f"rank {rank}"
    try:
        return get_system(system).name
    except UnknownSystem:
        return str(system)


def system_sort_key(system: str) -> tuple[int, int, str]:
    """The order systems are listed in: numbers first by value ("0", "2", "17", "35"), then ranks by rank ("r1",
    "r2", ..., "r10"), then any other string alphabetically ("degraded", "paranmt")."""
    system = str(system)
    if system.isascii() and system.isdigit():
        return (0, int(system), "")
    rank = system_rank(system)
    if rank is not None:
        return (1, rank, "")
    return (2, 0, system)
