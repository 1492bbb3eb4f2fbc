"""How the diverse mode (issue 39) draws its negative sets, samples under them and filters its candidates.

The rules that decide which candidates reach the clustering and which it keeps: every word of the ban pool
is banned before any is banned twice; a sample never spells a banned word out and goes on into a longer word
("eyess"); the non-word filter knows English as the non-word screen does (``generation.english``: function,
number and calendar words included); the pinned cluster takes only what is strictly nearer the reference than
any other medoid.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import torch

from generation.decode_options import DiverseOptions
from generation.decoding.clustering import PINNED, distance_matrix, k_medoids, pick_per_cluster
from generation.decoding.diverse import ban_pool, draw_negative_sets, sample_batch
from generation.english import text_non_words as non_words
from generation.words import words_of

DEMO_MODEL = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"


@pytest.fixture(scope="module")
def demo():
    from generation.decoding import load_model

    return load_model(str(DEMO_MODEL), device="cpu")


@pytest.mark.parametrize("seed", range(20))
def test_every_pool_word_is_banned_before_any_is_banned_twice(seed):
    reference = "Children jumping on a trampoline."  # pool: children, jumping, trampoline; one word a set
    options = DiverseOptions(negative_sets=5, ban_fraction=0.3, ban_spread=0)
    sets = draw_negative_sets(reference, options, random.Random(seed))
    firsts = [s[0].lower() for s in sets]  # each set: one word in its casing variants
    assert sorted(firsts[:3]) == ["children", "jumping", "trampoline"]
    assert sorted(Counter(firsts).values()) == [1, 2, 2]


def test_a_set_never_holds_a_word_twice_when_the_deck_runs_out():
    reference = "A black and white dog looking at the camera."  # pool of 5 content words, 2 a set
    options = DiverseOptions(negative_sets=7, ban_fraction=0.4, ban_spread=0)
    for seed in range(30):
        for s in draw_negative_sets(reference, options, random.Random(seed)):
            words = {w.lower() for w in s}
            assert len(words) == 2 and words <= {w.lower() for w in ban_pool(reference, options)}


def test_the_negative_sets_are_graded_from_light_to_heavy_bans():
    # a ten-word pool: graded by 0.2, the five sets ban 1, 2, 3, 4 and 5 of its words (0.1 .. 0.5), not 3 each
    reference = "Young children happily jumping on bright trampoline near green grass at school."
    options = DiverseOptions(ban_spread=0.2)
    assert len(ban_pool(reference, options)) == 10
    assert options.ban_fractions == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    for seed in range(10):
        sets = draw_negative_sets(reference, options, random.Random(seed))
        sizes = [len({w.lower() for w in s}) for s in sets]
        assert sizes == [1, 2, 3, 4, 5]
        assert len({w.lower() for s in sets for w in s}) == 10  # the deck still deals every word out first
    flat = DiverseOptions()  # by default, ParaBank 2's way
    assert [len({w.lower() for w in s}) for s in draw_negative_sets(reference, flat, random.Random(0))] == [3] * 5


def test_the_graded_shares_stay_between_nothing_and_everything():
    assert DiverseOptions(ban_fraction=0.1, ban_spread=0.3).ban_fractions == pytest.approx([0, 0, 0.1, 0.25, 0.4])
    assert DiverseOptions(ban_fraction=0.9, ban_spread=0.4, negative_sets=3).ban_fractions == pytest.approx(
        [0.5, 0.9, 1.0]
    )
    assert DiverseOptions(negative_sets=1, ban_fraction=0.4).ban_fractions == [0.4]
    # a share of 0 still bans one word: every sample is sampled under a ban
    sets = draw_negative_sets(
        "Children jumping on a trampoline.", DiverseOptions(ban_fraction=0, ban_spread=0), random.Random(0)
    )
    assert all(len({w.lower() for w in s}) == 1 for s in sets)


@pytest.mark.parametrize(
    ("source", "banned"),
    [("All eyes on the trip ...", "eyes"), ("The seagull is floating on the water.", "floating")],
)
def test_a_sample_never_spells_a_banned_word_out_into_a_longer_word(demo, source, banned):
    # the ban forbids completing "eyes"; before this rule the demo model wrote "eyes" + "s" in 30 of 30 rows
    options = DiverseOptions(negative_sets=1, samples=30, seed=0, max_length=40)
    forms = [banned, banned.capitalize()]
    [rows] = sample_batch(demo, [source], [[forms]], [torch.Generator().manual_seed(3)], options)
    texts = [demo.tokenizer.decode(r[0], skip_special_tokens=True) for r in rows if r is not None]
    assert len(texts) >= 20
    longer = [w for t in texts for w in words_of(t) if w.lower().startswith(banned) and w.lower() != banned]
    assert longer == []
    assert not any(banned in (w.lower() for w in words_of(t)) for t in texts)


def test_function_number_and_calendar_words_are_no_non_words():
    reference = "The committee approved the budget."
    assert non_words("The board approved six of the budgets on Monday in September.", reference) == []
    assert non_words("Thes committee approveded the budget.", reference) == ["thes", "approveded"]


def test_the_ban_pool_holds_the_references_english_content_words():
    # function words of the shared list ("upon", "within") and of its ban-pool addition ("very", "few") stay out,
    # and so does a number; "beings" and "downs" are English, not "being" and "down" inflected
    reference = "Very few beings went upon the downs within 2013 hours."
    assert ban_pool(reference, DiverseOptions()) == ["beings", "went", "downs", "hours"]
    with_function_words = DiverseOptions(ban_function_words=True)
    assert ban_pool(reference, with_function_words)[:4] == ["Very", "few", "beings", "went"]
    assert ban_pool("In 2013.", DiverseOptions()) == ["2013"]  # the wider pool when a narrower one is empty


def test_the_ban_pool_leaves_names_out_unless_the_reference_is_in_title_case():
    # banned, the demo model wrote "Ne Mandela" for "Nelson Mandela": a name is in the English list, yet no
    # paraphrase replaces it; a capital after the first word marks it, except where every word has one
    reference = "Obama to meet privately with family of Nelson Mandela"
    assert [w.lower() for w in ban_pool(reference, DiverseOptions())] == ["obama", "meet", "privately", "family"]
    headline = "Cypriots Try to Get Cash Out of Banks"
    assert ban_pool(headline, DiverseOptions()) == ["Cypriots", "Try", "Get", "Cash", "Banks"]
    assert ban_pool("Nelson Mandela spoke to Obama.", DiverseOptions()) == ["spoke"]


def test_a_one_word_swap_as_near_another_medoid_as_the_reference_can_be_kept():
    texts = ["a b c d e", "x b c d e", "x y c d e", "A b c d e."]  # reference, a swap, two swaps, a copy
    clustering = k_medoids(distance_matrix(texts), 2)
    assert clustering.medoids[PINNED] == 0
    assert list(clustering.labels) == [PINNED, 1, 1, PINNED]  # the copy stays pinned; the swap does not
    assert pick_per_cluster(clustering, [0.0, 0.1, 0.2, 0.0]) == [(1, 1)]
