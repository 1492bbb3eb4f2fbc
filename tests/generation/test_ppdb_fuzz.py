"""Property test of the PPDB reader on random files (issue 6, "Faults").

Valid rules mixed with malformed lines (too few fields, a bad LHS, an unknown relation, empty phrases,
random bytes with invalid UTF-8 and NUL), \\r\\n endings, plain or gzipped: the index build never crashes,
counts every malformed line and reports the first ones by their 1-based line numbers, and every valid
rule of a wanted relation can be looked up (but one without a word, "-" or "'": no constraint, not kept).
"""

from __future__ import annotations

import gzip
import itertools

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from generation.constraints.ppdb import (
    MAX_REPORTED,
    PpdbError,
    PpdbIndex,
    build_index,
    coarse_pos_of_ptb,
    open_ppdb,
    usable_phrase,
)
from generation.constraints.systems import PPDB_RELATIONS

RELATIONS = ("Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated", "Independent")
TAGS = ("[NN]", "[NNS]", "[VB]", "[VBZ]", "[JJ]", "[RB]", "[X]", "[IN]")
PHRASE = st.lists(st.text(alphabet="abcXYZéß漢\x00-'", min_size=1, max_size=6), min_size=1, max_size=3).map(" ".join)
FEATURES = "PPDB2.0Score=3.1 AGigaSim=0.6"
_names = itertools.count()


@st.composite
def valid_rule(draw):
    tag, phrase, para, rel = (draw(st.sampled_from(TAGS)), draw(PHRASE), draw(PHRASE), draw(st.sampled_from(RELATIONS)))
    pad = draw(st.sampled_from(["", " ", "  "]))
    line = f"{tag}{pad}|||{pad}{phrase}{pad}|||{pad}{para}{pad}||| {FEATURES} ||| 0-0 |||{pad}{rel}"
    return line.encode(), (phrase.strip().lower(), para.strip().lower(), coarse_pos_of_ptb(tag), rel)


MALFORMED = st.one_of(
    st.tuples(PHRASE, PHRASE).map(lambda p: f"[NN] ||| {p[0]} ||| {p[1]} ||| {FEATURES}"),  # too few fields
    st.tuples(st.sampled_from(["NN", "[]", "[NN", "", "x"]), PHRASE, PHRASE).map(
        lambda p: f"{p[0]} ||| {p[1]} ||| {p[2]} ||| {FEATURES} ||| 0-0 ||| Equivalence"
    ),  # bad LHS
    st.tuples(PHRASE, PHRASE, st.sampled_from(["Bogus", "", "equivalence"])).map(
        lambda p: f"[NN] ||| {p[0]} ||| {p[1]} ||| {FEATURES} ||| 0-0 ||| {p[2]}"
    ),  # unknown relation
    PHRASE.map(lambda p: f"[NN] |||  ||| {p} ||| {FEATURES} ||| 0-0 ||| Equivalence"),  # empty phrase
).map(str.encode)
# random bytes with no '|' at all: malformed unless blank once decoded (U+FFFD for invalid UTF-8)
JUNK = st.binary(min_size=1, max_size=20).filter(lambda b: b"\n" not in b and b"|" not in b)


@st.composite
def ppdb_files(draw):
    lines, rules, malformed = [], [], []
    for number in range(1, draw(st.integers(0, 25)) + 1):
        kind = draw(st.sampled_from(["rule", "rule", "malformed", "junk"]))
        if kind == "rule":
            raw, rule = draw(valid_rule())
            rules.append(rule)
        else:
            raw = draw(MALFORMED if kind == "malformed" else JUNK)
            if raw.decode("utf-8", "replace").strip():
                malformed.append(number)
        lines.append(raw + draw(st.sampled_from([b"\n", b"\r\n"])))
    return b"".join(lines), len(lines), rules, malformed


@settings(
    derandomize=True,
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(file=ppdb_files(), gz=st.booleans())
def test_index_build_counts_malformed_lines_and_finds_every_valid_rule(tmp_path, file, gz):
    data, n_lines, rules, malformed = file
    n = next(_names)
    source, target = tmp_path / f"ppdb-{n}{'.gz' if gz else ''}", tmp_path / "index" / f"{n}.sqlite"
    source.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    event("with malformed lines" if malformed else "clean")

    stats = build_index(source, target)

    assert stats["lines"] == n_lines and stats["rules"] == len(rules)
    assert stats["malformed"] == len(malformed)
    assert [m["line"] for m in stats["malformed_lines"]] == malformed[:MAX_REPORTED]
    assert all(m["reason"] for m in stats["malformed_lines"])
    wanted = [r for r in rules if r[3] in PPDB_RELATIONS and r[0] != r[1]]
    kept = {r for r in wanted if usable_phrase(r[0]) and usable_phrase(r[1])}
    index = PpdbIndex(target, source)
    try:
        assert index.stats == stats
        for phrase, para, pos, rel in kept:
            assert para in index.lookup(phrase, pos, rel), (phrase, para, pos, rel)
        for phrase, para, pos, rel in set(rules) - kept:  # other relations, identities, no word: not kept
            assert para not in index.lookup(phrase, pos, rel), (phrase, para, pos, rel)
        assert stats["kept"] == sum(1 for r in wanted if r in kept) and stats["no_word"] == len(wanted) - stats["kept"]
    finally:
        index.close()
    assert list(target.parent.glob(".*.tmp*")) == []  # no half-written index (or staged rules) left beside it


@settings(
    derandomize=True,
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(file=ppdb_files(), cut=st.integers(1, 30))
def test_a_truncated_gzip_is_a_clear_error_and_leaves_no_index(tmp_path, file, cut):
    data = file[0] + f"[NN] ||| myth ||| legend ||| {FEATURES} ||| 0-0 ||| Equivalence\n".encode() * 3
    packed = gzip.compress(data, mtime=0)
    source, cache_dir = tmp_path / f"cut-{next(_names)}.gz", tmp_path / "cache"
    source.write_bytes(packed[: max(2, len(packed) - cut)])
    with pytest.raises(PpdbError, match=f"cannot read PPDB file {source}"):
        open_ppdb(source, cache_dir=cache_dir)
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []
