"""The most faithful outputs first (issue 47: judged by hand, half the packaged paraphraser's outputs under
system 15 changed a fact): the rule of facts (``generation.facts``) and ``keep_facts``, which puts first the
outputs that keep the reference's numbers and names, and a backward model, whose reading of the input back from
each output orders the beam with the forward score (ParaBank 2's score)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.core.management import call_command

from generation.constraints.sets import resolve_systems
from generation.copies import extends, repeats
from generation.decode_options import DecodeOptions, DiverseOptions
from generation.decoding import backward_nll, decode, from_objects, load_model, start_avoided
from generation.decoding.diverse import Candidate, choose_outputs
from generation.decoding.rerank import forward_nll, rerank_faithful
from generation.demo_settings import DEMO_PARAPHRASER, demo_diverse_settings, demo_generation_settings
from generation.facts import fact_changes, numbers
from generation.generation_job.params import GenerationSettingsError
from generation.generation_job.pipeline import ChunkSetup, decode_window, prepare_window
from generation.nlp import load_pipeline
from generation.prompts import PromptTemplate

from .causal_models import constant_causal

RAW = PromptTemplate("raw", "{source}", chat=False, stop_at_newline=False)


@pytest.mark.parametrize(
    ("reference", "output", "changes"),
    [  # what the fine-tuned Gemma wrote under system 15 (bench/paraphraser.py --outputs)
        (
            "William Sampson, a British citizen born in Glasgow, faces trial.",
            "William Sampson, 27-year-old British citizen from Glasgow, faces trial.",
            ["+27"],
        ),
        (
            "The technology-laced Nasdaq Composite Index rose 6 points, or 0.41 percent, to 1,498.",
            "The Nasdaq 100 index rose 6 points, or 0.41 percent, at 1498.",
            ["+100", "-composite"],
        ),
        (
            "Shares of Gillette closed down 45 cents at $33.70 in trading Wednesday.",
            "Shares of Gillette closed at $33.70 Wednesday.",
            ["-45"],
        ),
        (
            "Telangana: Jagan to spend Thursday in hospital",
            "Jagan to spend Thursday at Hyderabad hospital",
            ["+hyderabad", "-telangana"],
        ),
        # kept: a name's other form, an abbreviation without its full stops, a number spelled out, a lower-cased name
        ("Villages in Liberia's countryside were looted.", "Liberian villages were looted.", []),
        ("US officials said the flag fell.", "U.S. officials said the flag fell.", []),
        ("The seven other nations agreed.", "The other 7 nations agreed.", []),
        ("extremism continues in pakistan.", "extremism continues in Pakistan.", []),
        ("A man is showing his dog to the camera.", "A man is showing his dog on camera.", []),
        # an acronym and the words it stands for, either way round (the quick start's "RBA"; training pairs)
        ("RBA delivers another rate cut", "Reserve Bank of Australia delivers rate cut", []),
        ("Carney sets a high bar at the Bank of England", "Carney sets a high bar at the BoE", []),
        ("6.6 quake rocks Papua: US Geological Survey", "6.6 quake rocks Papua: USGS", []),
        ("The RBA cut rates", "The Reserve Bank of India cut rates", ["+reserve", "+bank", "+india", "-rba"]),
    ],
)
def test_the_facts_an_output_changes(reference, output, changes):
    assert fact_changes(reference, output) == changes


def test_a_title_case_headline_has_no_names_to_drop():
    """Every word of a headline has a capital, so none is taken for a name; its numbers still count."""
    ref = "Russia, Syria Work on 'Concrete' Chemical Weapons Plan for 2014"
    assert fact_changes(ref, "Russia and Syria agree on a chemical weapons plan for 2014") == []
    assert fact_changes(ref, "Russia and Syria agree on a chemical weapons plan") == ["-2014"]


def test_numbers_are_read_as_written():
    assert numbers("It cost $1,498.50 in 2004-05: twenty-seven of one hundred.") == [
        "1498.50",
        "2004",
        "05",
        "27",
        "100",
    ]


def _wants_a_number():
    """A model that wants "7" (an added number); " dog" and the end a little less (one token a hypothesis
    at ``max_length=2``)."""
    model, tok = constant_causal({"7": 6.0, "Ġdog": 5.0, "eos": 5.0})
    return from_objects(model, tok, "cpu", prompt_template=RAW)


def test_keep_facts_returns_the_beams_output_that_adds_no_fact():
    """Unconstrained, the model's best output adds a number; with keep_facts the one output asked for is the
    beam's best that keeps the reference's facts."""
    loaded = _wants_a_number()
    [plain] = decode(loaded, ["we went"], beam=4, nbest=1, max_length=2)
    assert plain.outputs[0]["text"] == "7"
    [kept] = decode(loaded, ["we went"], beam=4, nbest=1, max_length=2, keep_facts=True)
    assert [o["text"] for o in kept.outputs] == ["dog"]
    assert kept.outputs[0]["fact_changes"] == []
    [every] = decode(loaded, ["we went"], beam=4, nbest=4, max_length=2, keep_facts=True)
    assert (every.outputs[-1]["text"], every.outputs[-1]["fact_changes"]) == ("7", ["+7"])


def test_the_reference_a_line_gives_is_what_facts_are_kept_against():
    """A source with its reference: the reference's "7" is a fact to keep, so the output with it comes first."""
    loaded = _wants_a_number()
    [r] = decode(loaded, ["we went"], beam=4, nbest=1, max_length=2, keep_facts=True, references=["we saw 7"])
    assert r.outputs[0]["text"] == "7"


def test_a_bitext_job_keeps_the_facts_of_its_english_reference_not_of_its_source():
    """A bitext corpus decodes its source (the other language) but its outputs paraphrase the reference: the
    reference's "7" is the fact to keep, where the source, read as the reference, would have "7" an added fact."""
    options = DecodeOptions(beam=4, nbest=1, max_length=2, keep_facts=True, batch_size=8, device="cpu")
    setup = ChunkSetup(
        params={"seed": 1},
        is_bitext=True,
        systems=resolve_systems([28]),
        idf={},
        ppdb=None,
        nlp=load_pipeline(tagger=True),
        model=_wants_a_number(),
        options=options,
        batch=None,
    )
    records = [
        {"i": 0, "reference": "we saw 7", "source": "nous allions"},
        {"i": 1, "reference": "we saw it", "source": "nous allions"},
    ]
    out, _counts = decode_window(prepare_window(records, setup), setup, lambda done, total: None)
    assert [[c["text"] for c in r["candidates"]] for r in out] == [["7"], ["dog"]]


def _wants_the_source_back(logits=None):
    """A model that wants to end at once (an empty output), then " dog" (the source "dog" again), then "7"."""
    model, tok = constant_causal(logits or {"eos": 7.0, "Ġdog": 6.0, "7": 5.0})
    return from_objects(model, tok, "cpu", prompt_template=RAW)


@pytest.mark.parametrize("source", ["dog", "Dog.", "dogs"])  # a copy, then near-copies: a full stop, a letter
def test_avoid_copies_returns_the_beams_best_output_that_is_no_copy(source):
    """The model's best outputs are empty, then the source back (or all but a character of it: the release's
    near-copy, which a release would drop); with avoid_copies the one output asked for is the beam's best other
    one, and each output says why it was put back: copies first, then what is no sentence of its own."""
    loaded = _wants_the_source_back()
    [plain] = decode(loaded, [source], beam=4, nbest=4, max_length=3)
    assert [o["text"] for o in plain.outputs][:2] == ["", "dog"]
    [every] = decode(loaded, [source], beam=4, nbest=4, max_length=3, avoid_copies=True)
    assert [(o["text"], o["avoided"]) for o in every.outputs][:3] == [
        ("7", None),
        ("dog", "copy" if source == "dog" else "near-copy"),
        ("", "empty"),
    ]
    assert len(every.outputs) == 3  # the fourth, "dog dog" or "dog 7", ran to the length limit: dropped


@pytest.mark.parametrize("reference", ["a cat", "dog"])
def test_avoid_copies_drops_what_the_length_limit_ended(reference):
    """A decoder-only model that runs on past its sentence is stopped by the length limit ("dog dog", no
    end-of-sequence token): with avoid_copies that output is dropped, whatever it is beside (the reference "dog"
    again, with words added), and the beam's next output, even a copy, is returned in its place."""
    loaded = _wants_the_source_back({"Ġdog": 7.0, "eos": 6.5, "7": 5.0})
    [plain] = decode(loaded, ["x"], beam=2, nbest=2, max_length=3, references=[reference])
    assert [o["text"] for o in plain.outputs] == ["dog dog", "dog"]
    [r] = decode(loaded, ["x"], beam=2, nbest=2, max_length=3, avoid_copies=True, references=[reference])
    assert [(o["text"], o["avoided"]) for o in r.outputs] == [("dog", None if reference == "a cat" else "copy")]


def test_avoid_copies_gives_no_output_for_a_beam_that_only_ran_on():
    """What the quick start showed under system 29 (its whole beam running on: "... Edited excerpts: RBA delivers
    ..."): a model that never ends gives its loop without avoid_copies, and with it no output, the line saying why,
    so that no loop reaches a HIT."""
    loaded = _wants_the_source_back({"Ġdog": 7.0, "7": 5.0})
    [plain] = decode(loaded, ["x"], beam=2, nbest=2, max_length=4)
    assert plain.outputs[0]["text"] == "dog dog dog"
    [r] = decode(loaded, ["x"], beam=2, nbest=2, max_length=4, avoid_copies=True)
    assert r.outputs == [] and r.unsatisfiable
    assert "ran on to max_length" in r.reason


@pytest.mark.parametrize(
    ("reference", "output", "extended"),
    [
        ("Evolution is not an opinion.", "Evolution is not an opinion. evolution is not an opinion.", True),
        ("You people think of everything.", "You people think of everything. Well, at least a lot of it.", True),
        ("-Hasn't changed in five minutes.", "Hasn't changed in five minutes? Well, she hasn't.", True),
        ("The cat sat.", "The cat sat down, and slept.", True),  # the reference and a statement more
        ("The cat sat.", "The cat sat.", False),  # a copy, not an extension
        ("The cat sat.", "The cats sat down.", False),  # not the whole reference word for word
        ("cat", "concatenate", False),  # words, not characters
    ],
)
def test_an_output_extends_its_reference_when_it_holds_all_of_it_and_more(reference, output, extended):
    assert extends(reference, output) is extended


RBA_LOOP = (
    "Reserve Bank of India delivers rate cut for 2nd time in 2016-17 cycle. Edited excerpts: RBA delivers rate cut "
    "for 2nd time in 2016-17 cycle. Edited excerpts: Reserve Bank of India delivers rate cut for 2nd time in 2016-17 "
    "cycle. Edited excerpts: rba delivers rate cut for 2nd time in 2016-17 cycle rba"
)


@pytest.mark.parametrize(
    ("reference", "output", "loops"),
    [
        ("RBA delivers another rate cut", RBA_LOOP, True),  # the quick start's, under system 29
        ("Troops will not shrink.", "Troops will not shrink. - troops will not shrink - Troops will not shrink!", True),
        ("It is very, very good.", "It is very very very very very very good.", True),  # a one-word loop
        ("The more you learn, the more you know.", "The more you learn, the more you know, the more you grow.", False),
        ("Go.", "Run, run, run as fast as you can.", False),  # three words thrice: a run of four never repeats
        # the reference's own repetition, no more often: no loop
        ("I said no, I said no, I said no.", "I said no, I said no, I said no!", False),
    ],
)
def test_an_output_repeats_itself_when_a_run_of_four_words_comes_thrice(reference, output, loops):
    assert repeats(reference, output) is loops


def test_avoid_copies_drops_an_output_that_loops():
    """The quick start's run-on under system 29 ended with its end token after looping ("... Edited excerpts: RBA
    delivers ..."), so the length limit did not mark it: with avoid_copies it is dropped as a loop, and the beam's
    real paraphrase is returned; a beam of loops alone gives none."""
    reference = "RBA delivers another rate cut"
    texts = [RBA_LOOP, "Reserve Bank of Australia delivers rate cut", "RBA delivers another rate cut"]
    outputs = [{"text": t, "score": -float(i), "tokens": ["x"]} for i, t in enumerate(texts)]
    ordered = rerank_faithful([dict(o) for o in outputs], reference, keep_facts=False, avoid_copies=True)
    assert [(o["text"], o["avoided"]) for o in ordered] == [(texts[1], None), (texts[2], "copy")]
    assert rerank_faithful([dict(outputs[0])], reference, keep_facts=False, avoid_copies=True) == []


def test_avoid_copies_puts_copies_and_then_extensions_last():
    """What a decoder-only paraphraser writes when it does not stop (the reference, then more) goes last, after the
    copies (a release drops those; workers would read it); the other outputs keep the search's order."""
    reference = "The cat sat."
    texts = ["The cat sat. The cat sat.", "The cat sat.", "A cat was sitting.", "The cat was sitting."]
    outputs = [{"text": t, "score": -float(i), "tokens": ["x"]} for i, t in enumerate(texts)]
    assert rerank_faithful([dict(o) for o in outputs], reference, keep_facts=False) == outputs
    ordered = rerank_faithful(outputs, reference, keep_facts=False, avoid_copies=True)
    assert [o["text"] for o in ordered] == [texts[2], texts[3], texts[1], texts[0]]  # a copy before a run-on


def test_avoid_copies_puts_an_output_holding_a_non_word_after_the_real_ones():
    """What the HIT screen and a release leave out ("ratecut", a word glued to its neighbour; "cuting") goes back
    beside the copies, so the beam's real-word paraphrase is shown instead; the reference's own rare word ("RBA")
    is no non-word, and an output holding one is still given when the beam holds nothing else."""
    reference = "RBA delivers another rate cut"
    texts = ["RBA hands out one more ratecut", "RBA delivers one more rate cuting", "RBA cuts its rate again"]
    outputs = [{"text": t, "score": -float(i), "tokens": ["x"]} for i, t in enumerate(texts)]
    ordered = rerank_faithful([dict(o) for o in outputs], reference, keep_facts=False, avoid_copies=True)
    assert [(o["text"], o["avoided"]) for o in ordered] == [
        (texts[2], None),
        (texts[0], "non-word"),
        (texts[1], "non-word"),
    ]
    [only] = rerank_faithful([dict(outputs[0])], reference, keep_facts=False, avoid_copies=True)
    assert only["text"] == texts[0]


def test_avoid_copies_searches_a_beam_of_copies_again_with_its_first_word_avoided_at_the_start():
    """Under system 29 (the reference's rarest word required: itself) 4 beams of 60 held nothing but copies: such a
    source is searched again with the reference's first word avoided at the start (system 32's constraint), and
    that search's real output comes first, saying so; the copy stays after it."""
    loaded = _wants_the_source_back()  # wants "", then "dog" (the source), then "7"
    [plain] = decode(loaded, ["dog"], beam=2, nbest=2, max_length=3)
    assert [o["text"] for o in plain.outputs] == ["", "dog"]  # a beam of 2 never holds "7"
    [r] = decode(loaded, ["dog"], beam=2, nbest=2, max_length=3, avoid_copies=True)
    assert [(o["text"], o["avoided"], o.get("start_avoided")) for o in r.outputs] == [
        ("7", None, "dog"),
        ("dog", "copy", None),
    ]


@pytest.mark.parametrize(
    "constraint, reference, expected",
    [
        (None, '"But you find the doc."', ("But", [["But"], ["but"]])),
        ({"positive": [["doc"]]}, "you people think of everything.", ("you", [["you"], ["You"]])),
        ({"bos_avoid": [["You"]]}, "You people", ("You", [["You"], ["you"]])),  # one form already avoided
        ({"bos_avoid": [["you"], ["You"]]}, "You people", None),  # system 32 already avoids it
        (None, "...", None),  # no word
    ],
)
def test_the_start_avoided_is_the_references_first_word_as_written_lower_cased_and_capitalised(
    constraint, reference, expected
):
    found = start_avoided(constraint, reference)
    if expected is None:
        assert found is None
    else:
        c, word = found
        assert word == expected[0] and sorted(c["bos_avoid"]) == sorted(expected[1])
        assert c["positive"] == ((constraint or {}).get("positive") or [])


def test_avoid_copies_keeps_a_copy_when_the_beam_holds_nothing_else():
    """Copies go last, they are not dropped: a beam holding nothing but its copy and a run-on gives its copy, as
    the release decides what to keep."""
    loaded = _wants_the_source_back({"Ġdog": 7.0, "eos": 6.5})
    [only] = decode(loaded, ["dog"], beam=2, nbest=2, max_length=3, avoid_copies=True)
    assert [(o["text"], o["avoided"]) for o in only.outputs][:1] == [("dog", "copy")]


def test_avoid_copies_compares_with_the_reference_a_line_gives():
    """A source with its reference (a bitext line: the source "dog", the reference "a cat"): the output "dog" copies
    the source but not the reference, so it stays first."""
    [r] = decode(
        _wants_the_source_back(), ["dog"], beam=4, nbest=1, max_length=3, avoid_copies=True, references=["a cat"]
    )
    assert (r.outputs[0]["text"], r.outputs[0]["avoided"]) == ("dog", None)


@pytest.mark.django_db
def test_paraphrase_keep_facts_writes_the_changes(tmp_path):
    """``paraphrase --keep-facts`` on the shipped demo model: every output says which facts it changes."""
    src = tmp_path / "in.txt"
    src.write_text("Shares of Gillette closed down 45 cents at $33.70 on Wednesday.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    call_command(
        "paraphrase",
        "--model",
        "generation/demo/model",
        "--input",
        str(src),
        "--output",
        str(out),
        "--beam",
        "4",
        "--nbest",
        "4",
        "--keep-facts",
        "--device",
        "cpu",
    )
    [line] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    counts = [len(o["fact_changes"]) for o in line["outputs"]]
    assert counts == sorted(counts) and len(counts) == 4


def test_the_diverse_mode_ranks_first_the_candidates_that_keep_the_facts():
    """ParaBank 2's choice of outputs (each cluster's best, best first): with keep_facts, "best" is the fewest
    changed facts, then the score, so the candidate that adds an age is no longer rank 1."""
    reference = "William Sampson, a British citizen born in Glasgow, faces trial on Monday."
    candidates = [
        Candidate("William Sampson, a 27-year-old British citizen from Glasgow, faces trial on Monday.", 0.8, []),
        Candidate("William Sampson, born in Glasgow, is a British citizen on trial Monday.", 1.1, []),
        Candidate("A British man from Glasgow faces trial.", 1.3, []),
    ]
    options = DiverseOptions(clusters=4, keep=3)  # each candidate its own cluster, none with the reference
    plain, _ = choose_outputs(reference, candidates, options)
    assert plain[0]["text"].startswith("William Sampson, a 27-year-old")
    kept, _ = choose_outputs(reference, candidates, options.replace(keep_facts=True))
    # 0 changes; +27; -william -sampson -monday
    assert [o["text"] for o in kept] == [candidates[1].text, candidates[0].text, candidates[2].text]
    assert [o["rank"] for o in kept] == [1, 2, 3] and kept[0]["score"] == 1.1  # the model's score, as before


DEMO_MODEL = "generation/demo/model"
# sentences on which the demo model's beam, ordered by forward + backward NLL, puts another output first
REORDERED = ["The committee approved the new budget on Monday.", "She walked to the car."]


def test_a_backward_model_orders_the_beam_by_forward_plus_backward_nll():
    """Each output gains the backward NLL of its source, and the beam comes back ordered by the sum, in another
    order than beam search's own on these sentences."""
    demo = load_model(DEMO_MODEL, device="cpu")
    plain = decode(demo, REORDERED, beam=4, nbest=4, stop="beam")
    ordered = decode(demo, REORDERED, beam=4, nbest=4, stop="beam", backward=demo)
    for source, before, after in zip(REORDERED, plain, ordered):
        texts = [o["text"] for o in after.outputs]
        assert sorted(texts) == sorted(o["text"] for o in before.outputs)  # the same beam, reordered
        assert [o["backward_nll"] for o in after.outputs] == pytest.approx(backward_nll(demo, texts, source))
        sums = [forward_nll(o) + o["backward_nll"] for o in after.outputs]
        assert sums == sorted(sums)
    assert any(b.outputs[1]["text"] != a.outputs[1]["text"] for a, b in zip(plain, ordered))


def test_keep_facts_comes_before_the_backward_score():
    """With both, an output that adds a number is last whatever its backward score."""
    loaded = _wants_a_number()
    [r] = decode(loaded, ["we went"], beam=4, nbest=4, max_length=2, keep_facts=True, backward=loaded)
    assert (r.outputs[-1]["text"], r.outputs[-1]["fact_changes"]) == ("7", ["+7"])
    assert all("backward_nll" in o for o in r.outputs)


def test_paraphrase_backward_model_without_diverse(tmp_path):
    """``paraphrase --backward-model`` with beam search: the model itself read the other way; each output says
    its backward NLL and the lines are ordered by the sum."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(REORDERED) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    args = ("--model", DEMO_MODEL, "--input", str(src), "--output", str(out), "--beam", "4", "--nbest", "3")
    call_command("paraphrase", *args, "--backward-model", DEMO_MODEL, "--device", "cpu")
    for line in out.read_text(encoding="utf-8").splitlines():
        outputs = json.loads(line)["outputs"]
        sums = [forward_nll(o) + o["backward_nll"] for o in outputs]
        assert len(outputs) == 3 and sums == sorted(sums)


def test_the_quick_starts_diverse_sample_keeps_facts_in_both_of_its_options():
    """``keep_facts`` is one setting of a job's decoder options and of its diverse mode's: the quick start's
    paraphraser sample says it in both, and saying it in one only is refused (it was, in the quick start)."""
    settings = demo_diverse_settings(1)
    assert settings.decode.keep_facts and settings.diverse_options.keep_facts
    with pytest.raises(GenerationSettingsError, match="keep_facts is one setting of the job"):
        dataclasses.replace(settings, diverse_options=settings.diverse_options.replace(keep_facts=False))


def test_the_quick_starts_paraphraser_samples_order_their_outputs_as_measured():
    """The packaged paraphraser's samples decode as bench/paraphraser.py measured them best: beam search with the
    facts kept, copies last and itself as backward model; the diverse mode with it as backward model too (rank 1
    then keeps closer to the reference). The demo model's sample keeps the plain beam."""
    beam = demo_generation_settings(1, model=DEMO_PARAPHRASER)
    assert beam.decode.keep_facts and beam.decode.avoid_copies
    assert beam.backward_model == str(DEMO_PARAPHRASER)
    assert demo_diverse_settings(1).backward_model == str(DEMO_PARAPHRASER)
    demo = demo_generation_settings(1)
    assert not (demo.decode.keep_facts or demo.decode.avoid_copies or demo.backward_model)


def test_a_short_word_is_no_form_of_a_longer_name():
    """Names match their other forms by their first four letters at least: "Canada" is not the reference's "can"."""
    assert fact_changes("You can see the bank.", "You can see the Canada bank.") == ["+canada"]
    assert fact_changes("Iraq said so.", "Iraqi officials said so.") == []
