import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from lemminflect import getAllLemmas

from generation.constraints.sets import (
    ConstraintSet,
    NoConstraintSet,
    TaggedSentence,
    build_pool,
    select_constraints,
    select_for_all_systems,
)
from generation.morphology import all_variants, verb_inflections

ROOT = Path(__file__).resolve().parents[2]

# ParaBank Tab. 2 and the worked example of §3.2
TAB2 = {"proud": 11.1, "told": 7.9, "work": 7.4, "them": 6.2, "her": 5.8, "was": 4.3, "for": 3.6, "to": 2.3}
EXAMPLE = "I told her I was proud to work for them."
# Tab. 1: IDF tables built so that the ranking is the paper's
QUAKES = "How often do earthquakes occur ?"
QUAKES_IDF = {"how": 3.0, "often": 7.5, "do": 1.5, "earthquakes": 12.0, "occur": 9.0}
OKAY = "It didn't mean anything, okay?"
OKAY_IDF = {"it": 1.0, "did": 2.0, "n't": 2.5, "mean": 7.2, "anything": 8.1, "okay": 10.3}
MYTH = "This myth involves three misconceptions."
MYTH_IDF = {"this": 2.0, "myth": 9.0, "involves": 8.0, "three": 5.0, "misconceptions": 13.0}


def words(phrases):
    return {" ".join(p) for p in phrases}


def test_worked_example_system_18_bans_exactly_for_For_to_To():
    result = select_constraints(18, EXAMPLE, TAB2)
    assert isinstance(result, ConstraintSet)
    assert words(result.negative) == {"for", "For", "to", "To"}
    assert len(result.negative) == 4 and result.positive == () and result.bos_avoid == ()


def test_worked_example_pool_is_proud_told_work_for_to():
    result = select_for_all_systems(EXAMPLE, TAB2)
    from generation.constraints.sets import as_tagged

    pool = build_pool(as_tagged(EXAMPLE).tokens, TAB2)
    assert [t.word for t in pool] == ["proud", "told", "work", "for", "to"]
    assert [r.system for r in result] == list(range(1, 38))


def test_worked_example_through_the_cli(tmp_path, capsys):
    idf = tmp_path / "idf.tsv"
    idf.write_text("".join(f"{k}\t{v}\n" for k, v in TAB2.items()))
    call_command("constraints", "--idf", str(idf), "--system", "18", EXAMPLE)
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"system", "name", "positive", "negative", "bos_avoid"}
    assert out["system"] == 18 and out["name"] == "neg (1st,2nd) lowest IDF"
    assert sorted(map(tuple, out["negative"])) == [("For",), ("To",), ("for",), ("to",)]
    assert out["positive"] == [] and out["bos_avoid"] == []


# --- Tab. 1's constraint columns -------------------------------------------------------------------


def test_tab1_how_often_do_earthquakes_occur():
    assert words(select_constraints(2, QUAKES, QUAKES_IDF).negative) == {"occur", "Occur"}  # ⊖ 2nd IDF
    assert words(select_constraints(5, QUAKES, QUAKES_IDF).negative) == {"occur", "Occur", "often", "Often"}
    bos = select_constraints(32, QUAKES, QUAKES_IDF)
    assert bos.bos_avoid == (("How",),) and bos.negative == ()  # ⊖ (BOS) 1st token


def test_tab1_this_myth_involves_three_misconceptions():
    assert words(select_constraints(1, MYTH, MYTH_IDF).negative) == {"misconceptions", "Misconceptions"}
    assert words(select_constraints(3, MYTH, MYTH_IDF).negative) == {"involves", "Involves"}


def test_tab1_it_didnt_mean_anything_okay():
    assert words(select_constraints(1, OKAY, OKAY_IDF).negative) == {"okay", "Okay"}  # ⊖ 1st IDF
    assert words(select_constraints(2, OKAY, OKAY_IDF).negative) == {"anything", "Anything"}
    assert words(select_constraints(4, OKAY, OKAY_IDF).negative) == {"okay", "Okay", "anything", "Anything"}
    lex = words(select_constraints(13, OKAY, OKAY_IDF).negative)  # ⊖ 1st, 3rd IDF w/ lexical variants
    paper = {"okay", "mean", "means", "meaning", "meant"}
    assert paper | {w.capitalize() for w in paper} <= lex
    assert "anything" not in lex and "Anything" not in lex
    assert all(w.isalpha() for w in lex)


# --- selection -----------------------------------------------------------------------------------


def test_pairs_and_triples_by_rank():
    neg = {n: [p[0] for p in select_constraints(n, EXAMPLE, TAB2).negative if p[0].islower()] for n in range(1, 22)}
    assert [neg[1], neg[2], neg[3]] == [["proud"], ["told"], ["work"]]
    assert [neg[4], neg[5], neg[6], neg[7]] == [
        ["proud", "told"],
        ["told", "work"],
        ["proud", "work"],
        ["proud", "told", "work"],
    ]
    assert [neg[15], neg[16], neg[17]] == [["to"], ["for"], ["work"]]
    assert [neg[18], neg[19], neg[20], neg[21]] == [
        ["to", "for"],
        ["for", "work"],
        ["to", "work"],
        ["to", "for", "work"],
    ]


def test_lowest_is_not_highest():
    assert words(select_constraints(1, EXAMPLE, TAB2).negative) != words(select_constraints(15, EXAMPLE, TAB2).negative)


def test_pool_rules_window_prepositions_case_and_duplicates():
    idf = {"proud": 11.1, "rare": 18.0, "common": 3.0, "cat": 7.0, "dog": 17.0, "of": 9.0}
    tokens = [
        ("Proud", "ADJ"),
        ("cats", "NOUN"),
        ("cat", "NOUN"),
        ("CAT", "NOUN"),
        ("rare", "ADJ"),
        ("common", "ADJ"),
        ("with", "ADP"),
        ("of", "ADP"),
        ("dog", "NOUN"),
        ("x1", "X"),
        ("unknown", "ADJ"),
        ("proud", "ADJ"),
        ("Dog's", "NOUN"),
    ]
    pool = build_pool(tokens, idf)
    # lowercased; window inclusive; prepositions whatever their IDF (missing -> 0); dedupe by lowercase
    assert [(t.word, t.idf, t.position) for t in pool] == [
        ("dog", 17.0, 8),
        ("proud", 11.1, 0),
        ("of", 9.0, 7),
        ("cat", 7.0, 2),
        ("with", 0.0, 6),
    ]
    assert [t.word for t in build_pool(tokens, idf, min_idf=10, max_idf=20)] == ["rare", "dog", "proud", "of", "with"]


def test_ties_broken_by_first_position():
    sentence = [("alpha", "NOUN"), ("beta", "NOUN"), ("gamma", "NOUN")]
    idf = {"alpha": 8.0, "beta": 9.0, "gamma": 8.0}
    assert [t.word for t in build_pool(sentence, idf)] == ["beta", "alpha", "gamma"]
    assert words(select_constraints(16, sentence, idf).negative) == {"gamma", "Gamma"}  # 2nd lowest


def test_pool_too_small_gives_no_constraint_set_with_reason():
    idf = {"told": 7.9}
    result = select_constraints(7, "I told her.", idf)
    assert isinstance(result, NoConstraintSet) and not result.is_constraint_set
    assert "pool too small" in result.reason and "needs 3" in result.reason
    assert result.to_json() == {
        "system": 7,
        "name": result.name,
        "positive": [],
        "negative": [],
        "bos_avoid": [],
        "no_constraint_set": result.reason,
    }
    assert isinstance(select_constraints(1, "I told her.", idf), ConstraintSet)
    assert isinstance(select_constraints(24, "I told her.", idf), NoConstraintSet)
    assert isinstance(select_constraints(34, "Hi there", idf), NoConstraintSet)  # 2 tokens, needs 3


def test_random_systems_are_reproducible_and_depend_on_the_seed():
    sentence = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu ."
    idf = {w: 8.0 + i * 0.1 for i, w in enumerate(sentence.lower().split()[:-1])}
    for n, k in ((22, 1), (23, 2), (24, 3)):
        a = select_constraints(n, sentence, idf, seed=1)
        assert a == select_constraints(n, sentence, idf, seed=1)
        assert len(a.negative) == 2 * k
    runs = {tuple(select_constraints(24, sentence, idf, seed=s).negative) for s in range(10)}
    assert len(runs) > 1
    # the same sentence gives the same set whatever else is processed and in which order
    alone = select_for_all_systems(sentence, idf, seed=3, systems=[23])[0]
    after = [select_for_all_systems(s, idf, seed=3, systems=[23])[0] for s in ("Alpha beta .", sentence)][1]
    assert alone == after


def test_random_lex_all_adds_variants():
    result = select_constraints(25, OKAY, {"okay": 9.0})
    assert {"okay", "Okay", "okays", "Okays"} <= words(result.negative)


def test_lex_all_bans_variants_and_their_capitalised_forms():
    neg = words(select_constraints(9, EXAMPLE, TAB2).negative)  # 2nd highest = told, lex all
    assert {"told", "Told", "tell", "Tell", "tells", "Tells", "telling", "Telling"} <= neg
    assert "proud" not in neg


def test_lex_all_index_agrees_with_lemminflect_word_by_word():
    """Lex-all phrases come from an index built once per process; for every word it holds, for words
    lemminflect has no other form of, and for words written with capitals, they are the word's
    variants by lemminflect's public getAllLemmas / getAllInflections, each in lowercase and capitalised,
    in that order."""
    from generation.constraints.sets import clear_caches, lex_all_index, negative_phrases
    from generation.morphology import _all_variants_public, known_words

    def expected(word):
        forms = []
        for form in _all_variants_public(word.lower()):
            forms += (form, form[:1].upper() + form[1:])
        return tuple((form,) for form in dict.fromkeys(forms))

    index = lex_all_index()
    assert len(index) > 10_000 and "meant" in index
    words = known_words()[::7] + ["zorblaxes", "okay", "Meant", "RBA", "naïve"]
    clear_caches()
    for word in words:
        assert negative_phrases(word, lex_all=True) == expected(word), word
    assert negative_phrases("zorblaxes", lex_all=True) == (("zorblaxes",), ("Zorblaxes",))


def test_verb_inflection_index_agrees_with_lemminflects_public_functions():
    """Positive systems read verb inflections from an index built once per process; for words it holds,
    words it does not, and words written with capitals, they are what lemminflect's public getAllLemmas /
    getAllInflections give."""
    from generation.morphology import _verb_inflections_public, known_words, verb_inflections_index

    assert len(verb_inflections_index()) > 10_000
    verb_inflections.cache_clear()
    for word in known_words()[::25] + ["took", "Took", "zorblaxed", "okay"]:
        assert verb_inflections(word) == _verb_inflections_public(word.lower()), word


def test_all_variants_cover_every_pos():
    assert {"mean", "means", "meaning", "meant"} <= set(all_variants("meant"))
    assert all_variants("mean")[0] == "mean"


def test_verb_positive_is_another_inflection_of_the_same_lemma():
    results = {select_constraints(30, EXAMPLE, TAB2, seed=s).positive for s in range(6)}  # 2nd highest: told (VERB)
    forms = {p[0][0] for p in results}
    assert "told" not in forms and len(forms) >= 2
    for form in forms:
        assert "tell" in getAllLemmas(form).get("VERB", ()) or form == "tell"
    assert set(verb_inflections("took")) == {"take", "takes", "taking", "taken"}  # footnote 5
    assert select_constraints(30, EXAMPLE, TAB2, seed=4) == select_constraints(30, EXAMPLE, TAB2, seed=4)


def test_non_verb_positive_is_the_token_itself():
    result = select_constraints(29, EXAMPLE, TAB2)  # proud (ADJ)
    assert result.positive == (("proud",),) and result.negative == () and result.bos_avoid == ()


def test_bos_systems_use_the_first_tokens_as_written():
    assert [select_constraints(n, QUAKES, QUAKES_IDF).bos_avoid for n in (32, 33, 34)] == [
        (("How",),),
        (("How", "often"),),
        (("How", "often", "do"),),
    ]


def test_baseline_28_has_no_constraints():
    assert select_constraints(28, EXAMPLE, TAB2).to_json() == {
        "system": 28,
        "name": "baseline: no constraints",
        "positive": [],
        "negative": [],
        "bos_avoid": [],
    }


def test_ppdb_systems_without_ppdb_report_it():
    result = select_constraints(35, EXAMPLE, TAB2)
    assert isinstance(result, NoConstraintSet) and "PPDB" in result.reason


def test_json_round_trip_and_pre_tagged_input():
    tagged = TaggedSentence(
        EXAMPLE,
        (
            ("I", "PRON"),
            ("told", "VERB"),
            ("her", "PRON"),
            ("I", "PRON"),
            ("was", "AUX"),
            ("proud", "ADJ"),
            ("to", "PART"),
            ("work", "VERB"),
            ("for", "ADP"),
            ("them", "PRON"),
            (".", "PUNCT"),
        ),
    )
    from_text = select_for_all_systems(EXAMPLE, TAB2, seed=5)
    assert select_for_all_systems(tagged, TAB2, seed=5) == from_text
    for result in from_text:
        data = json.loads(json.dumps(result.to_json()))
        assert ConstraintSet.from_json(data) == result
    with pytest.raises(ValueError):
        ConstraintSet.from_json({"system": 1, "negative": [[]]})


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_no_constraint_set_prints_reason_and_exits_0(tmp_path, capsys):
    idf = tmp_path / "idf.tsv"
    idf.write_text("told\t7.9\n")
    call_command("constraints", "--idf", str(idf), "--system", "7", "I told her.")
    out = json.loads(capsys.readouterr().out)
    assert out["negative"] == [] and out["no_constraint_set"].startswith("pool too small")


def test_cli_seed_and_idf_window(tmp_path, capsys):
    idf = tmp_path / "idf.tsv"
    idf.write_text("token\tidf\n" + "".join(f"{k}\t{v}\n" for k, v in TAB2.items()))
    call_command("constraints", "--idf", str(idf), "--system", "1", "--min-idf", "12", EXAMPLE)
    assert json.loads(capsys.readouterr().out)["negative"] == [["for"], ["For"]]  # highest left: for


@pytest.mark.parametrize(
    "args,match",
    [
        (["--system", "38"], "unknown system 38"),
        (["--system", "abc"], "not a number"),
        (["--system", "35"], "needs --ppdb"),
        (["--system", "1", "--min-idf", "20", "--max-idf", "1"], r"min-idf \(20\) > max-idf \(1\)"),
        (["--system", "1", "--min-idf", "20"], r"min-idf \(20\) > max-idf \(17\)"),  # above the default max
        (["--system", "1", "--max-idf", "nan"], "--max-idf: the value must be a number written in digits 0-9"),
        (["--system", "1", "--min-idf", "\u0667"], "--min-idf: the value must be a number written in digits 0-9"),
    ],
)
def test_cli_errors(tmp_path, args, match):
    idf = tmp_path / "idf.tsv"
    idf.write_text("told\t7.9\n")
    with pytest.raises(CommandError, match=match):
        call_command("constraints", "--idf", str(idf), *args, "I told her.")
    with pytest.raises(CommandError, match="unreadable IDF file"):
        call_command("constraints", "--idf", str(tmp_path / "missing.tsv"), "--system", "1", "x")


@pytest.mark.slow
def test_cli_exit_status_and_one_line_errors(tmp_path):
    idf = tmp_path / "idf.tsv"
    idf.write_text("".join(f"{k}\t{v}\n" for k, v in TAB2.items()))
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\ttwo\tthree\n")
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test")
    cmd = [sys.executable, "manage.py", "constraints"]
    runs = {
        "ok": subprocess.run(
            cmd + ["--idf", str(idf), "--system", "18", EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True
        ),
        "system": subprocess.run(
            cmd + ["--idf", str(idf), "--system", "99", EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True
        ),
        "missing": subprocess.run(
            cmd + ["--idf", str(tmp_path / "nope.tsv"), "--system", "1", EXAMPLE],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        ),
        "malformed": subprocess.run(
            cmd + ["--idf", str(bad), "--system", "1", EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True
        ),
    }
    assert runs["ok"].returncode == 0, runs["ok"].stderr
    assert json.loads(runs["ok"].stdout)["system"] == 18
    for key in ("system", "missing", "malformed"):
        assert runs[key].returncode != 0 and runs[key].stdout == ""
        assert len(runs[key].stderr.strip().splitlines()) == 1, runs[key].stderr


def test_a_system_selects_the_same_alone_or_with_others():
    sentence = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu ."
    idf = {w: 8.0 + i * 0.1 for i, w in enumerate(sentence.lower().split()[:-1])}
    together = select_for_all_systems(sentence, idf, seed=9)
    for n in (22, 23, 24, 25, 26, 27, 29, 30, 31):
        assert select_constraints(n, sentence, idf, seed=9) == together[n - 1]


def test_a_word_is_also_banned_as_the_reference_spells_it():
    # "RBA" is neither lowercase nor capitalised: banning "rba" and "Rba" alone would leave the output free
    # to copy it. The other systems and plain words are unchanged.
    idf = {"rba": 9.0, "delivers": 8.0, "another": 5.0, "rate": 6.0, "cut": 5.5}
    sentence = [("RBA", "PROPN"), ("delivers", "VERB"), ("another", "DET"), ("rate", "NOUN"), ("cut", "NOUN")]
    assert words(select_constraints(1, sentence, idf).negative) == {"rba", "Rba", "RBA"}
    assert words(select_constraints(2, sentence, idf).negative) == {"delivers", "Delivers"}
    assert select_constraints(28, sentence, idf).negative == ()
