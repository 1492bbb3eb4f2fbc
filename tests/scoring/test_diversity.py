import math

import pytest
from sacrebleu.metrics import BLEU

from annotation.models import Campaign
from scoring.aggregation import load_campaign
from scoring.diversity import (
    bleu_no_bp,
    diversity_rows,
    levenshtein_bin,
    levenshtein_bins,
    normalize,
    pinc,
    word_levenshtein,
)
from tests.annotation.parabank_data import import_contract


def test_bleu_without_brevity_penalty_by_hand():
    # ref "the cat sat on the mat", hyp "the cat sat on a mat": clipped 1-4-gram precisions 5/6, 3/5, 2/4, 1/3
    stats = bleu_no_bp(["The cat sat on the mat."], ["the cat sat on a mat"])
    assert stats.counts == [5, 3, 2, 1] and stats.totals == [6, 5, 4, 3]
    assert stats.bleu == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    assert stats.unigram_precision == pytest.approx(500 / 6)


def test_no_brevity_penalty_for_short_paraphrases():
    stats = bleu_no_bp(["a b c d e f g h"], ["a b c d"])
    assert stats.bleu == pytest.approx(100.0)
    # plain sacrebleu would multiply by BP = exp(1 - 8/4)
    plain = BLEU(tokenize="none").corpus_score(["a b c d"], [["a b c d e f g h"]]).score
    assert plain == pytest.approx(100 * math.exp(-1))


def test_concatenation_counts_ngrams_across_the_cell():
    # two pairs, one paragraph each side: n-grams span the sentence boundary
    stats = bleu_no_bp(["a b c", "d e f"], ["a b c", "d e g"])
    # hyp paragraph "a b c d e g" against "a b c d e f": 5/6, 4/5, 3/4, 2/3
    assert stats.counts == [5, 4, 3, 2] and stats.totals == [6, 5, 4, 3]
    assert stats.bleu == pytest.approx(100 * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25)


def test_identical_text_gives_bleu_100_and_pinc_0():
    ref = "He left very early, didn't he?"
    assert bleu_no_bp([ref], [ref]).bleu == pytest.approx(100.0)
    assert pinc(ref, ref) == 0.0


def test_lowercasing_and_punctuation_stripping():
    assert normalize("It's FINE, now — “ok”!") == "its fine now ok"
    assert bleu_no_bp(["It is fine, now."], ["it is FINE now"]).bleu == pytest.approx(100.0)
    assert pinc("It is fine, now.", "IT IS FINE NOW!") == 0.0
    assert word_levenshtein("It is fine, now.", "it is fine now") == 0


def test_disjoint_text():
    assert bleu_no_bp(["a b c d"], ["w x y z"]).bleu == 0.0
    assert pinc("a b c d", "w x y z") == 100.0


def test_pinc_by_hand():
    # para "the cat sat" vs ref "the cat sat down": every n-gram of the paraphrase is in the reference -> 0
    assert pinc("the cat sat down", "the cat sat") == 0.0
    # para "a cat sat": 1-grams 2/3 shared, 2-grams 1/2, 3-grams 0/1 -> mean(1/3, 1/2, 1) (no 4-grams)
    assert pinc("the cat sat down", "a cat sat") == pytest.approx(100 * (1 / 3 + 1 / 2 + 1) / 3)
    assert pinc("x", "...") is None


def test_word_levenshtein_and_bins():
    assert word_levenshtein("It is fine now.", "It is okay now.") == 1
    assert word_levenshtein("a b c", "b c") == 1
    assert word_levenshtein("a b c", "c b a") == 2
    assert word_levenshtein("", "a b") == 2
    assert [levenshtein_bin(d) for d in range(8)] == ["0", "1", "2", "3", "4", "5+", "5+", "5+"]
    pairs = [("a b c", "a b c"), ("a b c", "a b d"), ("a b c", "x y z"), ("a", "b c d e f g h")]
    assert levenshtein_bins(pairs) == {"0": 1, "1": 1, "2": 0, "3": 1, "4": 0, "5+": 1}


@pytest.mark.django_db
def test_diversity_rows_use_every_candidate(tmp_path):
    import_contract(tmp_path)
    data = load_campaign(Campaign.objects.get(name="contract"))  # nobody counted: diversity does not care
    rows = {r["system"]: r for r in diversity_rows(data)}
    assert "0" not in rows and set(rows) == {"17", "21", "28"}
    r28 = rows["28"]
    refs = ["It is fine now.", "He left very early."]
    assert r28["by_length"]["5"] == pytest.approx(bleu_no_bp(refs, ["It is fine now.", "He went away early."]).bleu)
    assert r28["avg"] == pytest.approx(r28["by_length"]["5"]) and r28["by_length"]["10"] is None
    assert r28["n"] == 2 and r28["std"] is None
    assert r28["levenshtein_bins"] == {"0": 1, "1": 0, "2": 1, "3": 0, "4": 0, "5+": 0}
    assert r28["pinc"]["5"] == pytest.approx((0 + pinc(refs[1], "He went away early.")) / 2)
    assert r28["unigram_precision"]["5"] == pytest.approx(100 * 6 / 8)


def _dp(x, y):
    prev = list(range(len(y) + 1))
    for i, xi in enumerate(x, 1):
        cur = [i]
        for j, yj in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (xi != yj)))
        prev = cur
    return prev[-1]


def test_bit_parallel_levenshtein_matches_the_textbook_dp():
    import random

    from scoring.diversity import sequence_levenshtein

    rnd = random.Random(7)
    for _ in range(500):
        x = [rnd.choice("abcde") for _ in range(rnd.randint(0, 70))]
        y = [rnd.choice("abcde") for _ in range(rnd.randint(0, 70))]
        assert sequence_levenshtein(x, y) == _dp(x, y), (x, y)
