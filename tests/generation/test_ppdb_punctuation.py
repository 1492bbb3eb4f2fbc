"""PPDB paraphrases made of punctuation alone (``euros -> €``, ``often -> ,``) are no constraint for systems 35-37.

PPDB holds such rules (the XXXL lexical pairs of ../shared/data/ppdb have ``euros -> €``, ``degrees -> °``,
``dollar -> $``, ...). The decoder counts words (``\\w+`` runs), so a required phrase with no word in it is
an empty phrase: ``decode`` refused it (``ConstraintError``) and the whole generation job failed. Such a
paraphrase is skipped where PPDB is read, as if the rule were not there: a PPDB system takes the next pool
token's paraphrase, or has no constraint set.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from generation.constraints.ppdb import open_ppdb
from generation.constraints.sets import ConstraintSet, as_tagged, select_for_all_systems
from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.decode_options import DecodeOptions
from generation.decoding import normalise_constraints
from generation.generation_job import KIND
from generation.generation_job.kind import candidate_shard_key
from generation.generation_job.params import GenerateParams, generation_params
from generation.selection import reference
from infra.shards import read_jsonl_gz
from jobs.execution import job_run_inline, job_start
from jobs.models import JobStatus

F = "PPDB2.0Score=3.1 PPDB1.0Score=2.0 AGigaSim=0.6"
RULES = [
    # word -> punctuation: the first three as in PPDB 1.0 XXXL's lexical pairs, the others the usual suspects
    ("[NNS]", "euros", "€", "Equivalence"),
    ("[NN]", "dollar", "$", "Equivalence"),
    ("[NNS]", "degrees", "°", "Equivalence"),
    ("[NNS]", "euros", "...", "ForwardEntailment"),
    ("[NNS]", "euros", "-", "ReverseEntailment"),
    ("[NN]", "dollar", ", ,", "ForwardEntailment"),
    ("[NNS]", "earthquakes", "...", "Equivalence"),
    ("[NNS]", "earthquakes", ",", "ForwardEntailment"),
    ("[NNS]", "earthquakes", "--", "ReverseEntailment"),
    ("[NN]", "company", "&", "Equivalence"),
    # word -> words: what the PPDB systems can use
    ("[NN]", "dollar", "buck", "Equivalence"),
    ("[NN]", "house", "home", "Equivalence"),
]
PRICE = [("It", "PRON"), ("costs", "VERB"), ("ninety", "NUM"), ("euros", "NOUN"), ("or", "CCONJ"), ("a", "DET")]
PRICE += [("dollar", "NOUN"), (".", "PUNCT")]
PRICE_IDF = {"it": 1.0, "costs": 8.0, "ninety": 9.0, "euros": 12.0, "or": 1.0, "a": 1.0, "dollar": 10.0}


@pytest.fixture
def punctuation_ppdb(tmp_path):
    path = tmp_path / "ppdb-2.0-s-lexical"
    path.write_text("".join(f"{lhs} ||| {p} ||| {q} ||| {F} ||| 0-0 ||| {rel}\n" for lhs, p, q, rel in RULES))
    return path


class LookupOnly:
    """A PPDB source with nothing but ``lookup`` (selection's other path)."""

    def __init__(self, index):
        self.index = index

    def lookup(self, phrase, coarse_pos, relation):
        return self.index.lookup(phrase, coarse_pos, relation)


def test_punctuation_paraphrases_are_not_in_the_index(punctuation_ppdb):
    index = open_ppdb(punctuation_ppdb)
    assert index.lookup("dollar", "noun", "Equivalence") == ("buck",)
    assert index.lookup("euros", "noun", "Equivalence") == ()
    assert index.lookup("earthquakes", "noun", "ForwardEntailment") == ()
    assert index.entries("degrees") == {}


def test_ppdb_systems_skip_punctuation_paraphrases_on_every_selection_path(punctuation_ppdb):
    """euros, the highest-IDF pool token, has only punctuation paraphrases: system 35 takes dollar's word
    paraphrase (for every seed: "$" is never drawn), 36 and 37 have no constraint set."""
    index = open_ppdb(punctuation_ppdb)
    tagged = as_tagged(PRICE)
    for seed in range(8):
        paths = {
            "fast, index": select_for_all_systems(tagged, PRICE_IDF, seed=seed, ppdb=index, systems=[35, 36, 37]),
            "fast, lookup": select_for_all_systems(
                tagged, PRICE_IDF, seed=seed, ppdb=LookupOnly(index), systems=[35, 36, 37]
            ),
            "reference": reference.select_for_all_systems(
                tagged, PRICE_IDF, seed=seed, ppdb=index, systems=[35, 36, 37]
            ),
        }
        for path, (equ, fwd, rev) in paths.items():
            assert isinstance(equ, ConstraintSet), (path, equ)
            assert equ.positive == (("buck",),) and ("dollar",) in equ.negative, (path, equ)
            normalise_constraints(equ.to_json())  # the decoder takes it
            assert not fwd.is_constraint_set and not rev.is_constraint_set, (path, fwd, rev)
            assert "no PPDB" in fwd.reason and "no PPDB" in rev.reason


SENTENCES = ["how often do earthquakes occur today", "the company is a big house", "the cat sat on the mat"]


@pytest.mark.django_db
@pytest.mark.usefixtures("one_torch_thread")
def test_a_generation_job_with_punctuation_paraphrases_succeeds(
    punctuation_ppdb, tiny_marian_dir, tmp_path, storage_dir, settings
):
    """The job failed whole (``'positive': empty phrase ['&']``) before; now every PPDB system decodes
    what it can: "house -> home" for the second sentence, nothing for the others."""
    settings.PARAFORGE_MIN_IDF = 0.5  # (three documents: a word in one of them has IDF ln 3)
    path = tmp_path / "refs.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    corpus = corpus_import(ImportCorpusParams(name="ppdb-punctuation", path=path, format="mono"))
    call_command("build_idf", "ppdb-punctuation", "--wait", stdout=open(tmp_path / "idf.out", "w"))
    decoding = DecodeOptions(beam=3, max_length=16, device="cpu")
    params = generation_params(
        GenerateParams(
            corpus=corpus.pk,
            model=str(tiny_marian_dir),
            systems=[35, 36, 37],
            ppdb=str(punctuation_ppdb),
            decode=decoding,
        )
    )
    job = job_run_inline(job_id=job_start(kind=KIND, params=params, enqueue=False).pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    records = [r for c in job.chunks.order_by("index") for r in read_jsonl_gz(candidate_shard_key(job.pk, c.index))]
    assert [r["no_constraints"] for r in records] == [["35", "36", "37"], ["36", "37"], ["35", "36", "37"]]
    equ = job.result["per_system"]["35"]
    assert equ["outputs"] + equ["unsatisfiable"] == 1
    for candidate in records[1]["candidates"]:
        assert candidate["constraints"]["35"]["positive"] == [["home"]]
