import dataclasses

import pytest

from generation.constraints.systems import PPDB_SYSTEMS, SYSTEMS, System, UnknownSystem, get_system

# ParaBank Tab. 3, row by row: (numbers, kind, selection, ranks-or-count per number, lex)
TAB3 = [
    ((1, 2, 3), "negative", "highest", [(1,), (2,), (3,)], "none"),
    ((4, 5, 6), "negative", "highest", [(1, 2), (2, 3), (1, 3)], "none"),
    ((7,), "negative", "highest", [(1, 2, 3)], "none"),
    ((8, 9, 10), "negative", "highest", [(1,), (2,), (3,)], "all"),
    ((11, 12, 13), "negative", "highest", [(1, 2), (2, 3), (1, 3)], "all"),
    ((14,), "negative", "highest", [(1, 2, 3)], "all"),
    ((15, 16, 17), "negative", "lowest", [(1,), (2,), (3,)], "none"),
    ((18, 19, 20), "negative", "lowest", [(1, 2), (2, 3), (1, 3)], "none"),
    ((21,), "negative", "lowest", [(1, 2, 3)], "none"),
    ((22, 23, 24), "negative", "random", [1, 2, 3], "none"),
    ((25, 26, 27), "negative", "random", [1, 2, 3], "all"),
    ((28,), "none", None, [()], "none"),
    ((29, 30, 31), "positive", "highest", [(1,), (2,), (3,)], "verb"),
    ((32, 33, 34), "positional", "position", [1, 2, 3], "none"),
]


def test_there_are_37_systems_numbered_1_to_37_with_distinct_names():
    assert [s.number for s in SYSTEMS] == list(range(1, 38))
    assert len({s.name for s in SYSTEMS}) == 37
    assert all(isinstance(s, System) and s.name for s in SYSTEMS)


@pytest.mark.parametrize("numbers,kind,selection,params,lex", TAB3)
def test_every_row_of_tab3(numbers, kind, selection, params, lex):
    for number, p in zip(numbers, params):
        s = get_system(number)
        assert (s.number, s.kind, s.selection, s.lex) == (number, kind, selection, lex)
        if selection in ("random", "position"):
            assert s.count == p and s.ranks == ()
        else:
            assert s.ranks == p


def test_ppdb_systems_name_their_relation():
    assert PPDB_SYSTEMS == (35, 36, 37)
    assert [get_system(n).ppdb_relation for n in PPDB_SYSTEMS] == [
        "Equivalence",
        "ForwardEntailment",
        "ReverseEntailment",
    ]
    assert all(get_system(n).kind == "ppdb" and get_system(n).lex == "none" for n in PPDB_SYSTEMS)


def test_names_say_what_they_do():
    assert get_system(18).name == "neg (1st,2nd) lowest IDF"
    assert get_system(13).name == "neg (1st,3rd) highest IDF, lex all"
    assert get_system(28).name == "baseline: no constraints"


def test_systems_are_frozen_data():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_system(1).ranks = (2,)


@pytest.mark.parametrize("bad", [0, 38, -1, "x", None, "3.5"])
def test_unknown_system_is_a_clear_error(bad):
    with pytest.raises(UnknownSystem, match="1-37"):
        get_system(bad)


def test_get_system_accepts_strings():
    assert get_system("7").number == 7
