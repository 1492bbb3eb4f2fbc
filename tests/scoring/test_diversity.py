import math

import pytest
from sacrebleu.metrics import BLEU

from annotation.models import Campaign
from scoring.aggregation import load_campaign
from scoring.diversity import (
    bleu_no_bp,
    diversity_rows,
    intersection_over_union,
    levenshtein_bin,
    normalize,
    pairwise_one_minus_bleu,
    pairwise_rows,
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


def test_the_ngram_statistics_are_sacrebleus():
    import random

    rnd = random.Random(3)
    words = "a b c d e f , . It's Fine".split()
    sacre = BLEU(tokenize="none", smooth_method="none", effective_order=False)
    for _ in range(200):
        refs = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 12))) for _ in range(rnd.randint(1, 4))]
        hyps = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 12))) for _ in refs]
        ref, hyp = " ".join(normalize(r) for r in refs).split(), " ".join(normalize(h) for h in hyps).split()
        stats = bleu_no_bp(refs, hyps)
        assert (stats.hyp_len, stats.ref_len) == (len(hyp), len(ref))
        if not ref or not hyp:
            assert stats.bleu == 0.0
            continue
        plain = sacre.corpus_score([" ".join(hyp)], [[" ".join(ref)]])
        assert stats.counts == plain.counts and stats.totals == plain.totals
        if len(hyp) >= len(ref):  # no brevity penalty either way
            assert stats.bleu == pytest.approx(plain.score)


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
    assert [levenshtein_bin(word_levenshtein(r, p)) for r, p in pairs] == ["0", "1", "3", "5+"]


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


# --- ParaBank 2's view: against the reference and between systems (issue 39) -------------------------------


def _data(*candidates):
    """A CampaignData of (reference id, reference, text, systems) rows, no database."""
    from scoring.aggregation import CampaignData, CandidateData

    rows = [
        CandidateData(i, ref, ref_text, text, 5, frozenset(systems))
        for i, (ref, ref_text, text, systems) in enumerate(candidates, 1)
    ]
    return CampaignData(campaign=None, min_judgments=0, counted_workers=set(), candidates=rows)


# hyp "the cat sat on a mat" against "the cat sat on the mat": clipped 1-4-gram precisions 5/6, 3/5, 2/4, 1/3
HAND_BLEU = 100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25  # 53.73


def test_pairwise_one_minus_bleu_by_hand():
    first, second = {1: ["The cat sat on the mat."]}, {1: ["the cat sat on a mat"], 2: ["not shared"]}
    value, pairs = pairwise_one_minus_bleu(first, second)
    assert pairs == 1 and value == pytest.approx(100 - HAND_BLEU)  # 46.27; reference 2 has one system only
    assert pairwise_one_minus_bleu(first, {2: ["x"]}) == (None, 0)
    # every combination of a reference's outputs: 2 x 1 pairs, the first system's outputs as the references
    value, pairs = pairwise_one_minus_bleu({1: ["a b c d", "w x y z"]}, {1: ["a b c d"]})
    assert pairs == 2 and value == pytest.approx(100 - bleu_no_bp(["a b c d", "w x y z"], ["a b c d"] * 2).bleu)


def test_intersection_over_union_by_hand():
    assert intersection_over_union("The cat sat.", "the dog SAT") == pytest.approx(2 / 4)
    assert intersection_over_union("a a b", "b a") == 1.0  # sets of tokens
    assert intersection_over_union("...", "!") == 1.0 and intersection_over_union("a", "") == 0.0


def test_pairwise_rows_by_hand():
    ref1, ref2 = "It is fine now.", "The cat sat on the mat."
    data = _data(
        (2, ref2, "The cat sat on the mat.", {"r1"}),
        (2, ref2, "the cat sat on a mat", {"r3"}),
        (1, ref1, "It is okay now.", {"r1", "17"}),  # one merged candidate of two systems
        (1, ref1, "Now it is fine.", {"r2"}),
        (1, ref1, "It is fine now.", {"0"}),  # the attention copy is no system
    )
    rows = {r["system"]: r for r in pairwise_rows(data)}
    assert list(rows) == ["17", "r1", "r2", "r3"]  # numbers first, then ranks in rank order
    assert rows["r1"]["pairwise"]["r3"] == rows["r3"]["pairwise"]["r1"] == pytest.approx(100 - HAND_BLEU)
    assert rows["r1"]["pairs"]["r3"] == 1 and rows["r1"]["pairwise"]["r1"] is None and rows["r1"]["pairs"]["r1"] == 0
    assert rows["17"]["pairwise"]["r1"] == 0.0  # the same candidate: identical outputs
    assert rows["17"]["pairwise"]["r3"] is None and rows["17"]["pairs"]["r3"] == 0  # no shared reference
    okay_vs_now = 100 - bleu_no_bp(["It is okay now."], ["Now it is fine."]).bleu
    assert rows["r1"]["pairwise"]["r2"] == pytest.approx(okay_vs_now)
    assert rows["r1"]["avg"] == pytest.approx((0.0 + okay_vs_now + 100 - HAND_BLEU) / 3)
    assert rows["r1"]["n"] == 2 and rows["r1"]["std"] is None
    # against the reference: r1's two outputs as one cell, and the mean intersection over union
    assert rows["r1"]["ref_1_bleu"] == pytest.approx(
        100 - bleu_no_bp([ref2, ref1], ["The cat sat on the mat.", "It is okay now."]).bleu
    )
    assert rows["r1"]["ref_iou"] == pytest.approx((1.0 + 3 / 5) / 2)
    assert rows["r2"]["ref_iou"] == 1.0 and rows["r2"]["ref_1_bleu"] > 0  # same words, another order


def test_system_display_name():
    from generation.constraints.systems import system_display_name

    assert system_display_name("r3") == "rank 3" and system_display_name("r12") == "rank 12"
    assert system_display_name("17") == "neg 3rd lowest IDF"
    assert system_display_name("28") == "baseline: no constraints"
    for other in ("0", "38", "degraded", "PARANMT", "r0", "r01", "R1", "rank 1", "r", ""):
        assert system_display_name(other) == other


def test_system_sort_key_puts_ranks_after_numbers_in_rank_order():
    from generation.constraints.systems import rank_system, system_rank, system_sort_key

    systems = ["r10", "degraded", "r2", "35", "r1", "0", "17", "PARANMT", "2"]
    assert sorted(systems, key=system_sort_key) == ["0", "2", "17", "35", "r1", "r2", "r10", "PARANMT", "degraded"]
    assert sorted(["²", "3"], key=system_sort_key) == ["3", "²"]  # not an ASCII number: no crash
    assert [system_rank(s) for s in ("r1", "r25", "r0", "17", "r1x")] == [1, 25, None, None, None]
    assert rank_system(4) == "r4"
    with pytest.raises(ValueError):
        rank_system(0)


def test_a_rank_counts_as_an_unknown_system_in_the_regressors_features():
    from scoring.similarity.features import pair_features

    ref = "The old man walked his dog in the park."
    pairs = [
        {"reference": ref, "paraphrase": "An elderly man took his dog out.", "constraints": {"r2": {"negative": []}}},
        {"reference": ref, "paraphrase": "The old man walked a dog.", "constraints": {"r1": {}, "17": {}}},
    ]
    fb = pair_features(pairs, with_embeddings=False, families=("systems",))
    f = [dict(zip(fb.names, row)) for row in fb.matrix]
    assert f[0]["sys_n"] == 0 and f[0]["sys_n_rel"] == 0 and f[0]["sys_baseline"] == 0
    assert f[1]["sys_n"] == 1 and f[1]["sys_neg_low"] == 1  # the Tab. 3 system beside the rank still counts


RANK_CANDS = [
    "1\t1\t5\t0\tIt is fine now.\t0.1\t100\t2",
    "1\t1\t5\tr1\tIt is okay now.\t0.5\t80\t2",
    "2\t1\t5\tr1\tIt is okay now.\t0.5\t70\t2",
    "1\t1\t5\tr2 17\tNow it is fine.\t0.6\t75\t2",
    "1\t1\t5\tr3\tIt's all right now.\t0.9\t60\t1",
    "1\t2\t5\tr1\tHe went away early.\t0.4\t60\t2",
    "2\t2\t5\tr2\tHe departed very early.\t0.6\t65\t2",
    "2\t2\t5\tr3\tEarly, he left.\t0.7\t50\t2",
]


@pytest.mark.django_db
def test_a_campaign_of_ranks_renders_its_tables_the_report_and_the_dashboard(tmp_path, client):
    import csv
    import io
    import json

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    from scoring.dashboard.tables import REPORT_TABLES, build_table

    import_contract(tmp_path, cands=RANK_CANDS)
    campaign = Campaign.objects.get(name="contract")
    campaign.settings = {**campaign.settings, "min_judgments_per_worker": 0}
    campaign.save()
    for table in REPORT_TABLES:
        build_table(campaign, table)  # none fails on "r1"
    similarity = build_table(campaign, "similarity")
    assert [(r["system"], r["name"]) for r in similarity["rows"]] == [
        ("17", "neg 3rd lowest IDF"),
        ("r1", "rank 1"),
        ("r2", "rank 2"),
        ("r3", "rank 3"),
    ]

    def report(table, fmt):
        out = io.StringIO()
        call_command("report", "contract", "--table", table, "--format", fmt, stdout=out, stderr=io.StringIO())
        return out.getvalue()

    result = json.loads(report("pairwise", "json"))
    assert result["systems"] == ["17", "r1", "r2", "r3"]
    rows = {r["system"]: r for r in result["rows"]}
    assert rows["r1"]["name"] == "rank 1" and rows["r2"]["pairwise"]["17"] == 0.0  # one merged candidate
    assert rows["r1"]["pairwise"]["r3"] == rows["r3"]["pairwise"]["r1"] > 0
    md = report("pairwise", "md")
    assert "| # | System | 1-BLEU ref | I/U ref | 17 | rank 1 | rank 2 | rank 3 | Avg. |" in md
    assert "| r1 | rank 1 | " in md
    assert "| r2 | rank 2 |" in report("similarity", "md")
    lines = list(csv.reader(io.StringIO(report("pairwise", "csv"))))
    assert lines[0] == ["system", "name", "ref_1_bleu", "ref_iou", "17", "r1", "r2", "r3", "avg", "n"]
    assert lines[2][:2] == ["r1", "rank 1"] and lines[2][5] == "" and float(lines[2][6]) > 0

    user = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    html = client.get(f"/research/campaigns/{campaign.pk}/").content.decode()
    assert 'id="table-pairwise"' in html and "<td>rank 1</td>" in html and "<th>rank 3</th>" in html
    assert f"/research/campaigns/{campaign.pk}/tables/pairwise.csv" in html
    for name in ("pairwise.csv", "pairwise.json", "similarity.csv"):
        assert client.get(f"/research/campaigns/{campaign.pk}/tables/{name}").status_code == 200
    for plot in ("similarity-diversity", "similarity-by-length", "diversity-by-length"):
        response = client.get(f"/research/campaigns/{campaign.pk}/plots/{plot}.png")
        assert response.status_code == 200 and response["Content-Type"] == "image/png"
