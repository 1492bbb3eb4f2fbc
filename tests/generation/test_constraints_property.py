"""The fast selection path jobs run returns exactly what the reference (ParaBank §3.2 / Tab. 3 written
out plainly, generation/selection/reference.py) returns, on random inputs: sentences mixing words with
shared morphological variants, prepositions, odd-case and non-alphabetic tokens; IDF tables with ties
and values on the window's bounds; IDF windows; seeds; subsets of systems in any order; PPDB rule files
(built into real indexes) or none.

A difference is a behaviour change of the fast path: a phrase, its order, a seeded draw or a reason.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from generation.constraints.idf import IdfValues
from generation.constraints.ppdb import PpdbIndex, build_index
from generation.constraints.sets import TaggedSentence, build_pool, select_for_all_systems
from generation.selection import reference
from generation.selection.values import settings_idf_window

# Words chosen to collide: shared lemmas (mean/meant/meaning, tell/told, run/ran/running, take/took),
# prepositions, a word lemminflect does not know, odd-case spellings, accents, non-alphabetic tokens.
WORDS = (
    "mean meant meaning means told tell tells work worked working proud okay anything earthquakes "
    "occur often myth involves misconceptions run ran running take took taken cat cats dog rate cut "
    "for to of with about over into onto as at by from in on zorblax naïve straße café"
).split()
RELATED = ("mean meant meaning means tell told tells run ran running take took").split()  # shared variants
ODD = ("RBA", "iPhone", "McDonald", "NASA", "TOLD", "OkAy")
NON_ALPHA = ("3.5", "n't", "well-known", ".", ",", "U.S.", "x1", "'s", "-")
POS = ("NOUN", "VERB", "ADJ", "ADV", "PROPN", "AUX", "ADP", "PRON", "DET", "PART", "PUNCT", "X")
PTB_TAGS = ("NN", "NNS", "NNP", "VB", "VBD", "VBZ", "JJ", "RB", "IN", "DT")
RELATIONS = ("Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated", "Independent")
# mostly inside the default window 7-17, with ties and values on and just past its bounds
IDF_VALUES = st.one_of(
    st.sampled_from([0.0, 3.6, 6.999, 7.0, 8.0, 8.0, 9.5, 12.0, 17.0, 17.001, 20.0]),
    st.floats(6.5, 17.5),
    st.floats(0.0, 25.0),
)


def spelled(word: str, how: str) -> str:
    """A word as a reference may write it (the pool lowercases; negative phrases add the capitalised form)."""
    return {"lower": word, "capitalised": word[:1].upper() + word[1:], "upper": word.upper()}[how]


token_text = st.one_of(
    st.tuples(
        st.one_of(st.sampled_from(WORDS), st.sampled_from(RELATED)),
        st.sampled_from(["lower", "lower", "lower", "capitalised", "upper"]),
    ).map(lambda w: spelled(*w)),
    st.sampled_from(ODD),
    st.sampled_from(NON_ALPHA),
)
tagged_tokens = st.tuples(token_text, st.sampled_from(POS + ("NOUN", "VERB", "ADJ", "ADV") * 3))
# (the last kind: words whose variants overlap, so that "Lex: All" sets must ban a shared variant once)
sentences = st.one_of(
    st.lists(tagged_tokens, max_size=4),
    st.lists(tagged_tokens, min_size=5, max_size=18),
    st.lists(st.tuples(st.sampled_from(RELATED), st.sampled_from(POS)), min_size=3, max_size=8),
).map(lambda tokens: TaggedSentence(" ".join(t for t, _ in tokens), tuple(tokens)))
vocabulary = sorted({w.lower() for w in (*WORDS, *ODD)})
idf_tables = st.dictionaries(
    st.sampled_from(vocabulary), IDF_VALUES, min_size=len(vocabulary) // 2, max_size=len(vocabulary)
)
windows = st.one_of(
    st.just((None, None)),
    st.just((None, None)),
    st.tuples(IDF_VALUES, IDF_VALUES).map(sorted).map(tuple),
    st.tuples(st.none(), IDF_VALUES.filter(lambda v: v >= 7.0)),
)
system_lists = st.one_of(
    st.just(None), st.just(list(range(1, 38))), st.lists(st.integers(1, 37), min_size=1, max_size=12)
)


@st.composite
def ppdb_rules(draw, sentence: TaggedSentence) -> list[tuple[str, str, str, str]]:
    """PPDB rules (PTB tag, phrase, paraphrase, relation): most for the sentence's own words, under any
    tag (so the coarse POS matches or not), some for other words."""
    own = sorted({text.lower() for text, _ in sentence.tokens}) or vocabulary
    words = st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(vocabulary))
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(PTB_TAGS),
                words,
                st.lists(st.sampled_from(vocabulary), min_size=1, max_size=2).map(" ".join),
                st.sampled_from(RELATIONS[:3] * 3 + RELATIONS[3:]),
            ),
            min_size=1,
            max_size=30,
        )
    )


class LookupOnly:
    """A PPDB source offering nothing but ``lookup`` (selection accepts any such object)."""

    def __init__(self, index: PpdbIndex) -> None:
        self.index = index

    def lookup(self, phrase: str, coarse_pos: str, relation: str) -> tuple[str, ...]:
        return self.index.lookup(phrase, coarse_pos, relation)


@pytest.fixture(scope="module")
def ppdb_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("property-ppdb")


_files = itertools.count()


def ppdb_index(folder, rules) -> PpdbIndex:
    number = next(_files)
    source, target = folder / f"rules-{number}.txt", folder / f"index-{number}.sqlite"
    source.write_text(
        "".join(
            f"[{tag}] ||| {word} ||| {other} ||| PPDB2.0Score=1.0 ||| 0-0 ||| {relation}\n"
            for tag, word, other, relation in rules
        )
    )
    build_index(source, target)
    return PpdbIndex(target, source)


@pytest.mark.slow
@settings(
    derandomize=True,
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sentence=sentences,
    idf=idf_tables,
    loaded=st.booleans(),
    window=windows,
    seed=st.integers(0, 2**40),
    systems=system_lists,
    with_ppdb=st.sampled_from([False, True, True]),
    lookup_only=st.booleans(),
    data=st.data(),
)
def test_fast_selection_equals_the_reference(
    ppdb_folder, sentence, idf, loaded, window, seed, systems, with_ppdb, lookup_only, data
):
    rules = data.draw(ppdb_rules(sentence), label="rules") if with_ppdb else None
    ppdb = None if rules is None else ppdb_index(ppdb_folder, rules)
    if ppdb is not None and lookup_only:
        ppdb = LookupOnly(ppdb)
    table = IdfValues(idf) if loaded else idf  # a loaded table takes the fast path's per-table cache
    min_idf, max_idf = window
    kwargs = dict(seed=seed, ppdb=ppdb, systems=systems, min_idf=min_idf, max_idf=max_idf)
    lo, hi = settings_idf_window(min_idf, max_idf)
    assert build_pool(sentence.tokens, table, min_idf=min_idf, max_idf=max_idf) == reference.build_pool(
        sentence.tokens, idf, lo, hi
    )
    expected = reference.select_for_all_systems(sentence, idf, **kwargs)
    assert select_for_all_systems(sentence, table, **kwargs) == expected
    assert select_for_all_systems(sentence, table, **kwargs) == expected  # again, with the caches warm
