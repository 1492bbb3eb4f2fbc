import gzip
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from generation.constraints import ppdb as ppdb_module
from generation.constraints.ppdb import PpdbError, coarse_pos_of_ptb, coarse_pos_of_spacy, open_ppdb
from generation.constraints.sets import ConstraintSet, NoConstraintSet, select_constraints, select_for_all_systems

F = "PPDB2.0Score=3.1 PPDB1.0Score=2.0 AGigaSim=0.6"
SAMPLE = [
    f"[RB] ||| often ||| frequently ||| {F} ||| 0-0 ||| Equivalence",
    f"[RB] ||| often ||| regularly ||| {F} ||| 0-0 ||| Equivalence",
    f"[JJ] ||| often ||| frequent ||| {F} ||| 0-0 ||| Equivalence",  # POS does not match ADV
    f"[RB] ||| often ||| often ||| {F} ||| 0-0 ||| Equivalence",  # identity: ignored
    f"[NN] ||| myth ||| mythology ||| {F} ||| 0-0 ||| ReverseEntailment",
    f"[NN] ||| myth ||| legend ||| {F} ||| 0-0 ||| Equivalence",
    f"[VBZ] ||| involves ||| includes ||| {F} ||| 0-0 ||| ForwardEntailment",
    f"[NNS] ||| misconceptions ||| myths ||| {F} ||| 0-0 ||| OtherRelated",
    "this line is not a PPDB rule",
    f"[NNS] ||| earthquakes ||| quakes ||| {F} ||| 0-0 ||| Bogus",
    f"[NNS] ||| earthquakes ||| tremors ||| {F} ||| 0-0 ||| Exclusion",
]
QUAKES = "How often do earthquakes occur ?"
QUAKES_IDF = {"how": 3.0, "often": 7.5, "do": 1.5, "earthquakes": 12.0, "occur": 9.0}
MYTH = "This myth involves three misconceptions."
MYTH_IDF = {"this": 2.0, "myth": 9.0, "involves": 8.0, "three": 5.0, "misconceptions": 13.0}


@pytest.fixture(params=["plain", "gzip"])
def sample_ppdb(request, tmp_path):
    data = ("\n".join(SAMPLE) + "\n").encode()
    if request.param == "gzip":
        path = tmp_path / "ppdb-2.0-s-lexical.gz"
        path.write_bytes(gzip.compress(data))
    else:
        path = tmp_path / "ppdb-2.0-s-lexical"
        path.write_bytes(data)
    return path


def test_coarse_pos_classes():
    assert [coarse_pos_of_ptb(t) for t in ("[NN]", "[NNS]", "[VB]", "[VBD]", "[JJ]", "[JJR]", "[RB]", "[IN]")] == [
        "noun",
        "noun",
        "verb",
        "verb",
        "adj",
        "adj",
        "adv",
        "other",
    ]
    assert [coarse_pos_of_spacy(p) for p in ("NOUN", "PROPN", "VERB", "AUX", "ADJ", "ADV", "ADP")] == [
        "noun",
        "noun",
        "verb",
        "verb",
        "adj",
        "adv",
        "other",
    ]


def test_index_lookups_and_malformed_lines_counted(sample_ppdb, caplog):
    index = open_ppdb(sample_ppdb)
    assert index.lookup("often", "adv", "Equivalence") == ("frequently", "regularly")
    assert index.lookup("Often", "adj", "Equivalence") == ("frequent",)
    assert index.lookup("myth", "noun", "ReverseEntailment") == ("mythology",)
    assert index.lookup("myth", "verb", "ReverseEntailment") == ()
    assert index.stats["malformed"] == 2
    assert [m["line"] for m in index.stats["malformed_lines"]] == [9, 10]
    assert index.stats["lines"] == len(SAMPLE)
    assert index.index_path.parent.name == "ppdb-index"


def test_index_groups_sorts_and_deduplicates_each_phrases_paraphrases(tmp_path):
    """Rules in any order, repeated under tags of one coarse POS, give each (POS, relation) its distinct
    paraphrases sorted; a phrase whose rules all have other relations has none; a prefetched phrase
    reads the same as a looked-up one."""
    lines = [
        f"[NNS] ||| house ||| homes ||| {F} ||| 0-0 ||| Equivalence",
        f"[VB] ||| house ||| lodge ||| {F} ||| 0-0 ||| ForwardEntailment",
        f"[NN] ||| house ||| home ||| {F} ||| 0-0 ||| Equivalence",
        f"[NN] ||| house ||| homes ||| {F} ||| 0-0 ||| Equivalence",  # same as the [NNS] rule once coarse
        f"[VB] ||| house ||| accommodate ||| {F} ||| 0-0 ||| ForwardEntailment",
        f"[NN] ||| house ||| dwelling ||| {F} ||| 0-0 ||| ReverseEntailment",
        f"[NN] ||| tremor ||| quake ||| {F} ||| 0-0 ||| Exclusion",
        f"[NN] ||| bad ||| wo\x1frd ||| {F} ||| 0-0 ||| Equivalence",
    ]
    path = tmp_path / "ppdb-lexical"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = open_ppdb(path)
    expected = {
        ("noun", "Equivalence"): ("home", "homes"),
        ("verb", "ForwardEntailment"): ("accommodate", "lodge"),
        ("noun", "ReverseEntailment"): ("dwelling",),
    }
    assert index.entries("house") == expected
    assert index.entries("tremor") == {} and index.entries("bad") == {}
    assert index.stats["phrases"] == 1 and index.stats["kept"] == 6
    assert index.stats["malformed_lines"] == [{"line": 8, "reason": "control character in phrase or paraphrase"}]
    index._cache.clear()
    index.prefetch(["House", "tremor", "unknown"])
    assert index._cache == {"house": expected, "tremor": {}, "unknown": {}}


def test_index_is_built_once_per_file_version(sample_ppdb, monkeypatch):
    first = open_ppdb(sample_ppdb)
    ppdb_module._OPEN.clear()
    monkeypatch.setattr(ppdb_module, "build_index", lambda *a, **k: pytest.fail("rebuilt"))
    again = open_ppdb(sample_ppdb)
    assert again.index_path == first.index_path


def test_a_changed_file_gets_a_new_index_and_the_old_one_is_removed(tmp_path):
    """An index is per file version; when the file changes, the next open builds a new index and
    deletes the superseded one (they take GBs for a large PPDB), and leaves other files' indexes."""
    cache = tmp_path / "cache"
    path, other = tmp_path / "ppdb-lexical", tmp_path / "ppdb-other"
    path.write_text(SAMPLE[0] + "\n", encoding="utf-8")
    other.write_text(SAMPLE[4] + "\n", encoding="utf-8")
    first, kept = open_ppdb(path, cache_dir=cache), open_ppdb(other, cache_dir=cache)
    assert first.lookup("often", "adv", "Equivalence") == ("frequently",)
    path.write_text(SAMPLE[0] + "\n" + SAMPLE[1] + "\n", encoding="utf-8")
    second = open_ppdb(path, cache_dir=cache)
    assert second.index_path != first.index_path
    assert second.lookup("often", "adv", "Equivalence") == ("frequently", "regularly")
    assert sorted(cache.glob("*.sqlite")) == sorted([second.index_path, kept.index_path])


def test_ppdb_systems_ban_the_original_and_require_the_paraphrase(sample_ppdb):
    index = open_ppdb(sample_ppdb)
    equ = select_constraints(35, QUAKES, QUAKES_IDF, ppdb=index)  # Tab. 1: ⊖ often ⊕ frequently
    assert isinstance(equ, ConstraintSet)
    assert equ.negative == (("often",), ("Often",))
    assert equ.positive in ((("frequently",),), (("regularly",),))
    seen = {select_constraints(35, QUAKES, QUAKES_IDF, ppdb=index, seed=s).positive for s in range(12)}
    assert seen == {(("frequently",),), (("regularly",),)}  # random among matching POS only, never "frequent"
    rev = select_constraints(37, MYTH, MYTH_IDF, ppdb=index)  # Tab. 1: ⊖ myth ⊕ mythology
    assert (rev.negative, rev.positive) == ((("myth",), ("Myth",)), (("mythology",),))
    fwd = select_constraints(36, MYTH, MYTH_IDF, ppdb=str(sample_ppdb))  # a path works too
    assert (fwd.negative, fwd.positive) == ((("involves",), ("Involves",)), (("includes",),))
    none = select_constraints(36, QUAKES, QUAKES_IDF, ppdb=index)
    assert isinstance(none, NoConstraintSet) and "ForwardEntailment" in none.reason


def test_all_systems_with_ppdb(sample_ppdb):
    results = select_for_all_systems(MYTH, MYTH_IDF, ppdb=open_ppdb(sample_ppdb))
    assert [r.is_constraint_set for r in results[34:]] == [True, True, True]


def test_cli_with_ppdb(sample_ppdb, tmp_path, capsys):
    idf = tmp_path / "idf.tsv"
    idf.write_text("".join(f"{k}\t{v}\n" for k, v in MYTH_IDF.items()))
    call_command("constraints", "--idf", str(idf), "--system", "37", "--ppdb", str(sample_ppdb), MYTH)
    out = json.loads(capsys.readouterr().out)
    assert out["negative"] == [["myth"], ["Myth"]] and out["positive"] == [["mythology"]]
    with pytest.raises(CommandError, match="does not exist"):
        call_command("constraints", "--idf", str(idf), "--system", "37", "--ppdb", str(tmp_path / "no.gz"), MYTH)


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(PpdbError):
        open_ppdb(tmp_path / "missing")
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b"[NN] ||| a ||| b ||| f ||| 0-0 ||| Equivalence\n" * 50)[:40])
    with pytest.raises(PpdbError):
        open_ppdb(broken)
    assert not list((Path(settings.VAR_DIR) / "ppdb-index").glob(".*.tmp*"))  # nor its staged rules


@pytest.mark.parametrize(
    "content, lines, first",
    [
        (
            b"often\tfrequently\nmyth\tlegend\n\nquake\ttremor\n",
            4,
            "line 1: expected 6 '|||'-separated fields, found 1",
        ),
        (b"", 0, None),
    ],
)
def test_a_file_with_no_valid_rule_is_refused_every_time(tmp_path, monkeypatch, capsys, content, lines, first):
    """A PPDB 1.0 pairs file (or an empty one) used to give every PPDB system "no paraphrase", and once
    its index was cached, not even a warning."""
    path = tmp_path / "ppdb-1.0-lexical-pairs.tsv"
    path.write_bytes(content)
    message = rf"not a PPDB 2\.0 lexical file: no valid rule in {lines} lines" + (rf" \({first}\)" if first else "$")
    with pytest.raises(PpdbError, match=message):
        open_ppdb(path)
    with pytest.raises(PpdbError, match=message):  # this process's open index
        open_ppdb(path)
    monkeypatch.setattr(ppdb_module, "_OPEN", {})  # a new process: the index file on disk is reused...
    monkeypatch.setattr(ppdb_module, "build_index", lambda *a, **k: pytest.fail("rebuilt"))
    with pytest.raises(PpdbError, match=message):  # ...and still refused
        open_ppdb(path)
    idf = tmp_path / "idf.tsv"
    idf.write_text("".join(f"{k}\t{v}\n" for k, v in MYTH_IDF.items()))
    for _ in range(2):
        with pytest.raises(CommandError, match=message):
            call_command("constraints", "--idf", str(idf), "--system", "35", "--ppdb", str(path), MYTH)
    assert capsys.readouterr().out == ""


def test_a_directory_given_as_the_ppdb_file_is_named_as_such(tmp_path):
    idf = tmp_path / "idf.tsv"
    idf.write_text("".join(f"{k}\t{v}\n" for k, v in MYTH_IDF.items()))
    with pytest.raises(PpdbError, match="is a directory, not a file"):
        open_ppdb(tmp_path)
    with pytest.raises(CommandError, match=r"PPDB file \S+ is a directory, not a file"):
        call_command("constraints", "--idf", str(idf), "--system", "37", "--ppdb", str(tmp_path), MYTH)
