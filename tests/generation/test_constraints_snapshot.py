"""Selection output is pinned: all 37 systems on a few hundred varied, pre-tagged references must give
exactly the JSON recorded in ``data/constraints_snapshot.json.gz``.

The expected sets are derived from the reference implementation (generation/selection/reference.py,
ParaBank §3.2 and Tab. 3 written out plainly), never from the fast path jobs run: speed work that changes
a single phrase, its order, a seeded draw or a "no constraint set" reason fails here, and so does a
reference that drifts from the recorded behaviour. The fixture holds its own tagged tokens (no spaCy
needed), the IDF values of its words (from 10,000 STS-B sentences), and a small PPDB 2.0 file's lines.

To re-derive the expected sets from the reference (only when a behaviour change is intended, after
changing the reference): ``.venv/bin/python tests/generation/test_constraints_snapshot.py``; add
``--retag`` to also re-record the inputs (needs spaCy and bench/constraints.py's corpus).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "constraints_snapshot.json.gz"
SEEDED_SYSTEMS = [22, 23, 24, 25, 26, 27, 29, 30, 31, 35, 36, 37]  # the systems whose output depends on the seed


@pytest.fixture(scope="module")
def snapshot():
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def ppdb_index(snapshot, tmp_path_factory):
    from generation.constraints.ppdb import open_ppdb

    folder = tmp_path_factory.mktemp("snapshot-ppdb")
    path = folder / "ppdb-2.0-snapshot-lexical.gz"
    path.write_bytes(gzip.compress(("\n".join(snapshot["ppdb_lines"]) + "\n").encode()))
    return open_ppdb(path, cache_dir=folder / "index")


def _tagged(snapshot):
    from generation.constraints.sets import TaggedSentence

    return [TaggedSentence(text, tuple((t, p) for t, p in tokens)) for text, tokens in snapshot["sentences"]]


def _run(case, tagged, idf, ppdb, select=None):
    """What ``case`` of the snapshot records, computed by ``select`` (default: the fast path jobs run)."""
    if select is None:
        from generation.constraints.sets import select_for_all_systems as select

    kwargs = {k: case[k] for k in ("seed", "systems", "min_idf", "max_idf") if case.get(k) is not None}
    return [
        [r.to_json() for r in select(s, idf, ppdb=ppdb if case["ppdb"] else None, **kwargs)]
        for s in tagged[: case["sentences"]]
    ]


def _reference():
    from generation.selection.reference import select_for_all_systems

    return select_for_all_systems


def _first_difference(expected, got, tagged):
    for i, (want, have) in enumerate(zip(expected, got)):
        for w, h in zip(want, have):
            if w != h:
                return f"sentence {i} {tagged[i].text!r}: expected {w}, got {h}"
    return "length differs"


CASES = ["seed 0, PPDB, all systems", "seed 12345, PPDB, seeded systems", "seed 7, no PPDB, IDF window 4-8"]


@pytest.mark.parametrize("name", CASES)
def test_selection_matches_snapshot(snapshot, ppdb_index, name):
    case = snapshot["cases"][name]
    tagged = _tagged(snapshot)
    got = _run(case, tagged, snapshot["idf"], ppdb_index)
    assert len(got) == case["sentences"] >= 20
    assert got == case["expected"], _first_difference(case["expected"], got, tagged)


def test_the_snapshot_is_what_the_reference_selects(snapshot, ppdb_index):
    """The recorded sets are the specification's: re-deriving them from the reference changes nothing."""
    tagged = _tagged(snapshot)
    for name in CASES:
        case = snapshot["cases"][name]
        got = _run(case, tagged, snapshot["idf"], ppdb_index, select=_reference())
        assert got == case["expected"], _first_difference(case["expected"], got, tagged)


def test_a_loaded_idf_table_gives_the_recorded_sets_across_windows(snapshot, ppdb_index):
    """Jobs select with IdfValues, a read-only table on which selection remembers per IDF window which
    token texts join the pool: every case, run twice in turn on one such table (two windows alternate),
    still gives the recorded sets."""
    from generation.constraints.idf import IdfValues

    idf, tagged = IdfValues(snapshot["idf"]), _tagged(snapshot)
    for _ in range(2):
        for name in CASES:
            case = snapshot["cases"][name]
            got = _run(case, tagged, idf, ppdb_index)
            assert got == case["expected"], _first_difference(case["expected"], got, tagged)


def test_snapshot_is_varied(snapshot):
    """The fixture exercises every outcome: each system gives constraint sets and (where it can) none."""
    results = [r for case in snapshot["cases"].values() for sentence in case["expected"] for r in sentence]
    made = {r["system"] for r in results if "no_constraint_set" not in r}
    assert made == set(range(1, 38))
    reasons = {r["no_constraint_set"].split(":")[0] for r in results if "no_constraint_set" in r}
    assert {"pool too small", "no PPDB file given"} <= reasons
    assert any(r.startswith("no PPDB ") and "paraphrase" in r for r in reasons)
    assert any(r.startswith("reference has") for r in reasons)


def test_single_systems_and_subsets_agree_with_all_systems(snapshot, ppdb_index):
    """A system's result does not depend on which other systems are selected with it, nor on their order."""
    from generation.constraints.sets import select_constraints, select_for_all_systems

    idf, tagged = snapshot["idf"], _tagged(snapshot)[:60]
    for sentence in tagged:
        together = select_for_all_systems(sentence, idf, seed=5, ppdb=ppdb_index)
        subset = select_for_all_systems(sentence, idf, seed=5, ppdb=ppdb_index, systems=[37, 13, 25, 30, 1])
        assert subset == [together[n - 1] for n in (37, 13, 25, 30, 1)]
    for n in range(1, 38):
        for sentence in tagged[:8]:
            assert (
                select_constraints(n, sentence, idf, seed=5, ppdb=ppdb_index)
                == select_for_all_systems(sentence, idf, seed=5, ppdb=ppdb_index)[n - 1]
            )


class _LookupOnly:
    """A PPDB source with nothing but ``lookup`` (the interface selection accepts besides PpdbIndex)."""

    def __init__(self, index):
        self.index = index

    def lookup(self, phrase, coarse_pos, relation):
        return self.index.lookup(phrase, coarse_pos, relation)


def test_any_lookup_object_and_cold_caches_give_the_same_sets(snapshot, ppdb_index):
    """The PPDB systems give the recorded sets through a plain ``lookup`` object too, and emptying every
    per-word cache (as in a fresh process) changes nothing."""
    from generation.constraints.sets import clear_caches, select_for_all_systems

    case = snapshot["cases"][CASES[0]]
    tagged = _tagged(snapshot)[:80]
    clear_caches()
    ppdb_index._cache.clear()
    for sentence, expected in zip(tagged, case["expected"]):
        got = select_for_all_systems(
            sentence, snapshot["idf"], seed=0, ppdb=_LookupOnly(ppdb_index), systems=[35, 36, 37, 8, 27]
        )
        assert [r.to_json() for r in got] == [expected[n - 1] for n in (35, 36, 37, 8, 27)], sentence.text


def test_idf_window_follows_the_settings():
    """Selection reads the IDF window from the settings once, and again whenever they change."""
    from django.test import override_settings

    from generation.constraints.sets import select_constraints

    sentence, idf = [("rare", "ADJ"), ("dog", "NOUN")], {"rare": 9.0, "dog": 5.0}
    assert not select_constraints(2, sentence, idf).is_constraint_set  # dog is below 7.0: pool of 1
    with override_settings(PARAFORGE_MIN_IDF=4.0):
        assert select_constraints(2, sentence, idf).negative == (("dog",), ("Dog",))
    assert not select_constraints(2, sentence, idf).is_constraint_set


# ------------------------------------------------------------------------- recording the snapshot

EDGE_CASES = [
    "",
    "...",
    "Hi",
    "Hi there",
    "Go!",
    "THE DOG RAN AWAY FROM THE BIG HOUSE.",
    "Running runs ran run running.",
    "I told her I was proud to work for them.",
    "How often do earthquakes occur?",
    "This myth involves three misconceptions.",
    "The café served naïve tourists crème brûlée on the Straße.",
    "The the the of of of to to to.",
    "3 dogs and 4 cats, well-known ones, sat on 5 mats in 2019.",
    "Is it okay if I don't say anything?",
    "Meanwhile, the committee's spokeswoman reiterated that negotiations had stalled indefinitely.",
    "About as at by for from in into of on onto over to with.",
    "Zebras zigzagged; xylophonists yodelled quietly.",
    "He was taken aback, took a breath and kept taking notes about the meanings he meant.",
]


def _setup_django() -> None:  # pragma: no cover - run by hand, see the module docstring
    import os
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root), str(root / "bench")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()


def _tagged_inputs() -> dict:  # pragma: no cover - run by hand (--retag), see the module docstring
    """The snapshot's inputs, recorded afresh: tagged references, their words' IDF, PPDB lines."""
    import math
    import random
    from collections import Counter

    from constraints import load_sentences  # bench/constraints.py

    from generation.constraints.ppdb import ALL_RELATIONS
    from generation.constraints.sets import tag_sentences
    from generation.nlp import load_pipeline

    corpus, _ = load_sentences(10_000)
    tokenizer = load_pipeline(tagger=False)
    df: Counter = Counter()
    for doc in tokenizer.pipe(corpus, batch_size=1000):
        df.update({t.text.lower() for t in doc})
    chosen = EDGE_CASES + corpus[::40][:262]
    tagged = tag_sentences(chosen, nlp=load_pipeline(tagger=True))
    vocab = {t.lower() for s in tagged for t, _ in s.tokens}
    idf = {w: round(math.log(len(corpus) / df[w]), 4) for w in sorted(vocab) if df[w]}

    ptb = {"NOUN": "NN", "PROPN": "NNP", "VERB": "VBD", "AUX": "VBZ", "ADJ": "JJ", "ADV": "RB", "ADP": "IN"}
    by_pos: dict[str, set[str]] = {}
    for s in tagged:
        for text, pos in s.tokens:
            if text.isalpha() and pos in ptb:
                by_pos.setdefault(pos, set()).add(text.lower())
    rng, relations, lines = random.Random(11), sorted(ALL_RELATIONS), []
    for pos, words in sorted(by_pos.items()):
        words = sorted(words)
        for word in words:
            for other in rng.sample(words, min(3, len(words))):
                if rng.random() < 0.15:
                    other += " " + rng.choice(words)  # a multi-word paraphrase
                lines.append(
                    f"[{ptb[pos]}] ||| {word} ||| {other} ||| PPDB2.0Score=1.0 ||| 0-0 ||| {rng.choice(relations)}"
                )
    lines += ["not a rule", "[NN] ||| told ||| said ||| x ||| 0-0 ||| Bogus"]
    return {"sentences": [[s.text, [list(t) for t in s.tokens]] for s in tagged], "idf": idf, "ppdb_lines": lines}


def derive_snapshot(out: Path, retag: bool = False) -> None:  # pragma: no cover - run by hand
    """Write the snapshot: its inputs (kept, or re-recorded with ``retag``) and, for each case, the sets
    the reference implementation selects -- never the fast path's."""
    import os

    _setup_django()
    from generation.constraints.ppdb import open_ppdb
    from generation.constraints.sets import TaggedSentence

    if retag or not out.exists():
        inputs = _tagged_inputs()
    else:
        with gzip.open(out, "rt", encoding="utf-8") as fh:
            inputs = {k: v for k, v in json.load(fh).items() if k != "cases"}
    snapshot = {**inputs, "cases": {}}
    specs = {
        CASES[0]: {"seed": 0, "ppdb": True, "sentences": len(inputs["sentences"])},
        CASES[1]: {"seed": 12345, "ppdb": True, "systems": SEEDED_SYSTEMS, "sentences": len(inputs["sentences"])},
        CASES[2]: {"seed": 7, "ppdb": False, "min_idf": 4.0, "max_idf": 8.0, "sentences": 120},
    }
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "paraforge-snapshot-ppdb"
    folder.mkdir(exist_ok=True)
    path = folder / "ppdb.gz"
    path.write_bytes(gzip.compress(("\n".join(inputs["ppdb_lines"]) + "\n").encode()))
    ppdb = open_ppdb(path, cache_dir=folder / "index")
    fresh = [TaggedSentence(text, tuple(map(tuple, tokens))) for text, tokens in inputs["sentences"]]
    for name, spec in specs.items():
        snapshot["cases"][name] = {**spec, "expected": _run(spec, fresh, inputs["idf"], ppdb, select=_reference())}
    with gzip.GzipFile(out, "wb", mtime=0) as raw:  # (mtime 0: the same sets give the same bytes)
        raw.write(json.dumps(snapshot, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


if __name__ == "__main__":  # pragma: no cover
    import sys

    FIXTURE.parent.mkdir(exist_ok=True)
    derive_snapshot(FIXTURE, retag="--retag" in sys.argv[1:])
    print(FIXTURE, FIXTURE.stat().st_size, "bytes")
