"""generation's modules import each other one way: no import cycle, not even one hidden in a function-level import
(issue 38: ``ppdb -> selection.values -> ppdb`` was one, the second half inside ``resolve_ppdb``)."""

from pathlib import Path

import generation
from tests.import_graph import find_cycle, import_graph, imports_of

GENERATION = Path(generation.__file__).resolve().parent


def test_generation_modules_import_each_other_one_way():
    graph = import_graph(GENERATION)
    assert "generation.selection.values" in graph and "generation.decoding.vocab" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_word_rule_is_below_the_decoder_selection_and_ppdb():
    graph = import_graph(GENERATION)
    assert graph["generation.words"] == set()
    for user in ("generation.decoding.vocab", "generation.selection.values", "generation.constraints.ppdb"):
        assert "generation.words" in graph[user], user
    assert not {m for m in graph["generation.constraints.ppdb"] if m.startswith("generation.selection")}


def test_the_check_sees_a_cycle_through_a_function_level_import():
    hidden = "def resolve():\n    from ..constraints.ppdb import open_ppdb\n"
    assert imports_of(hidden, "generation.selection.values", "generation.") == {
        "generation.constraints.ppdb",
        "generation.constraints.ppdb.open_ppdb",
    }
    graph = {
        "generation.constraints.ppdb": {"generation.selection.values"},
        "generation.selection.values": {"generation.constraints.ppdb"},
    }
    assert find_cycle(graph) == [
        "generation.constraints.ppdb",
        "generation.selection.values",
        "generation.constraints.ppdb",
    ]
