"""Bias-corrected (z-score) similarity, split-half reliability and Krippendorff's alpha, on hand-made
campaigns in ParaBank's release format (imported judgments are verified, so they count)."""

import csv
import io
import json
import random

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy.stats import spearmanr

from annotation.campaigns.importers import import_parabank
from annotation.models import Campaign
from annotation.quality.split_half import ratings_of, spearman, split_half_reliability, stepped_up
from scoring.aggregation import load_campaign, zscore_estimates
from scoring.regressor import training_data
from scoring.releases.writers import write_judgments
from scoring.reliability import krippendorff_alpha_interval, reliability, split_half
from tests.annotation.parabank_data import write_parabank

pytestmark = pytest.mark.django_db

# Worker 1 judges candidates a, b at 80, 60; worker 2 judges c, d at 60, 40: the same spread, 20 points
# harsher. Worker 3 gives 50 twice (SD 0). Worker 1 also scores the degraded copy 0 (a check, not data).
OFFSET_REFS = ["1\tThe cat sat on the mat.\t5\t1.0"]
OFFSET_CANDS = [
    "1\t1\t5\t17\tA cat sat on a mat.\t\t80\t2",
    "1\t1\t5\t18\tThe cat was on the mat.\t\t60\t2",
    "2\t1\t5\t19\tThe cat sat upon the mat.\t\t60\t2",
    "2\t1\t5\t20\tA cat is on the mat.\t\t40\t2",
    "3\t1\t5\t17\tA cat sat on a mat.\t\t50\t2",
    "3\t1\t5\t18\tThe cat was on the mat.\t\t50\t2",
    "1\t1\t5\tdegraded\tThe mat sat on the cat cat.\t\t0\t1",
]


def _import(tmp_path, refs, cands, name):
    ref_path, cand_path = write_parabank(tmp_path, refs, cands)
    import_parabank(campaign_name=name, references_path=ref_path, candidates_path=cand_path)
    return Campaign.objects.get(name=name)


def report(*args, stderr=None) -> str:
    out = io.StringIO()
    call_command("report", *args, stdout=out, stderr=stderr or io.StringIO())
    return out.getvalue()


@pytest.fixture
def offsets(tmp_path):
    return _import(tmp_path, OFFSET_REFS, OFFSET_CANDS, "offsets")


def test_zscore_removes_a_workers_offset_by_hand(offsets):
    raw = {
        r["system"]: r["avg"]
        for r in json.loads(report("offsets", "--table", "similarity", "--min-judgments", "0"))["rows"]
    }
    result = json.loads(report("offsets", "--table", "similarity", "--estimate", "zscore", "--min-judgments", "0"))
    z = {r["system"]: r["avg"] for r in result["rows"]}
    # raw: worker 2's harshness makes 19 look worse than 17 (and worker 3's 50s pull 17 and 18 together)
    assert raw == {"17": 65.0, "18": 55.0, "19": 60.0, "20": 40.0}
    # z: workers 1 and 2 have mean 70 / 50 and population SD 10, so z = +1, -1 for both; worker 3 (SD 0)
    # is left out; mapped back with M = 60, S = pstdev(80, 60, 60, 40) = sqrt(200)
    s = 200**0.5
    assert z == pytest.approx({"17": 60 + s, "18": 60 - s, "19": 60 + s, "20": 60 - s})
    assert result["estimate"] == "zscore" and result["workers_sd0"] == 1
    assert "degraded" not in z and "0" not in z  # quality-control pseudo-systems are never rows


def test_zscore_report_says_how_many_workers_were_left_out(offsets):
    md = report("offsets", "--table", "similarity", "--estimate", "zscore", "--format", "md", "--min-judgments", "0")
    assert "bias-corrected" in md and "1 worker(s) with SD 0 left out of the z-score estimate." in md
    err = io.StringIO()
    text = report(
        "offsets",
        "--table",
        "similarity",
        "--estimate",
        "zscore",
        "--format",
        "csv",
        "--min-judgments",
        "0",
        stderr=err,
    )
    rows = {r["system"]: r for r in csv.DictReader(io.StringIO(text))}
    assert float(rows["19"]["avg"]) == pytest.approx(60 + 200**0.5)
    assert "1 worker(s) with SD 0" in err.getvalue()
    # the raw table is ParaBank's and says which estimate it is
    raw = json.loads(report("offsets", "--table", "similarity", "--min-judgments", "0"))
    assert raw["estimate"] == "raw" and "workers_sd0" not in raw


def test_degraded_items_are_no_row_no_aggregate_and_marked_in_releases(offsets):
    for table in ("similarity", "fluency", "diversity"):
        result = json.loads(report("offsets", "--table", table, "--min-judgments", "0"))
        assert [r["system"] for r in result["rows"]] == ["17", "18", "19", "20"]
    # worker 1's 0 on the degraded copy does not enter their scale: z of a, b stays +1, -1
    est = zscore_estimates(load_campaign(offsets, 0))
    assert est.mean == pytest.approx(60.0) and est.sd == pytest.approx(200**0.5)
    assert all("mat sat on the cat" not in p["paraphrase"] for p in training_data(offsets, min_judgments=0).pairs)
    lines = []
    write_judgments(lines.append, [offsets], {"judgments": 0})
    rows = list(csv.DictReader(io.StringIO("".join(lines)), delimiter="\t"))
    degraded = [r for r in rows if r["paraphrase"] == "The mat sat on the cat cat."]
    assert len(degraded) == 1 and degraded[0]["systems"] == "degraded"
    # "counted" is the worker's, as for attention copies
    assert {r["counted"] for r in rows if r["worker_id_anon"] == degraded[0]["worker_id_anon"]} == {"0"}


# --- split-half reliability ----------------------------------------------------------------------------


def _crowd(
    tmp_path, *, name="crowd", n_refs=30, offsets=(0, -30, 25, -15, 10, -25), noise=4.0, seed=7, per_candidate=4
):
    """n_refs references x 3 candidates with a true similarity each; ``per_candidate`` of the workers judge
    each candidate, worker w reporting true + offsets[w] + noise (clipped to 0-100). Every reference has an
    attention copy, a system output identical to the reference and a degraded copy, all judged 4 times."""
    rng = random.Random(seed)
    refs, cands = [], []
    for r in range(n_refs):
        ref = f"Reference sentence number {r} is here."
        refs.append(f"{r}\t{ref}\t10\t1.0")
        items = [(str(17 + k), f"Paraphrase {k} of sentence {r}.", rng.uniform(20, 90)) for k in range(3)]
        items += [("0", ref, 100.0), ("28", ref, 100.0), ("degraded", f"Sentence {r} here reference.", 5.0)]
        for system, text, truth in items:
            for w in rng.sample(range(len(offsets)), per_candidate):
                score = min(100, max(0, round(truth + offsets[w] + rng.gauss(0, noise))))
                cands.append(f"{w}\t{r}\t10\t{system}\t{text}\t\t{score}\t2")
    return _import(tmp_path, refs, cands, name)


def _oracle(data, seeds=range(20)):
    """The split-half rule written out plainly, for comparison."""
    cands = sorted(
        (
            c
            for c in data.candidates
            if c.text != c.reference_text
            and "0" not in c.systems
            and "degraded" not in c.systems
            and len(c.scores) >= 2
        ),
        key=lambda c: c.id,
    )
    by_worker = {}
    for c in data.candidates:
        if c.text != c.reference_text and "0" not in c.systems and "degraded" not in c.systems:
            for w, s in zip(c.workers, c.scores):
                by_worker.setdefault(w, []).append(s)
    scale = {w: (np.mean(v), np.std(v)) for w, v in by_worker.items()}
    raw, z = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        halves = {"raw": ([], []), "z": ([], [])}
        for c in cands:
            order = rng.permutation(len(c.scores))
            for side, idx in zip((0, 1), (order[: len(order) // 2], order[len(order) // 2 :])):
                halves["raw"][side].append(np.mean([c.scores[i] for i in idx]))
                halves["z"][side].append(
                    np.mean([(c.scores[i] - scale[c.workers[i]][0]) / scale[c.workers[i]][1] for i in idx])
                )
        raw.append(spearmanr(*halves["raw"])[0])
        z.append(spearmanr(*halves["z"])[0])
    return len(cands), float(np.mean(raw)), float(np.mean(z))


def test_split_half_follows_the_rule_and_zscore_wins_with_worker_offsets(tmp_path):
    campaign = _crowd(tmp_path)
    result = json.loads(report("crowd", "--table", "reliability", "--min-judgments", "0"))
    assert list(result)[:5] == ["table", "split_half", "n_candidates", "krippendorff_alpha", "campaign"]
    assert result["table"] == "reliability" and set(result["split_half"]) == {"raw", "zscore"}
    n, raw, z = _oracle(load_campaign(campaign, 0))
    # copies (system 0, and system 28's output identical to the reference) and degraded items left out
    assert result["n_candidates"] == n == 30 * 3
    assert result["split_half"]["raw"] == pytest.approx(raw) and result["split_half"]["zscore"] == pytest.approx(z)
    assert result["n_splits"] == 20 and result["workers_sd0"] == 0
    # large worker offsets: standardising each worker makes the two halves agree much more
    assert result["split_half"]["zscore"] > result["split_half"]["raw"] + 0.1
    assert report("crowd", "--table", "reliability", "--min-judgments", "0") == report(
        "crowd", "--table", "reliability", "--min-judgments", "0"
    )  # seeded: the same figures every run


def test_split_half_averages_twenty_seeded_splits():
    five, three = [[10, 20, 30, 40, 50], [60, 61, 62, 63, 64], [5, 6, 7, 8, 90], [1, 2, 3, 4, 5]], [[1, 2, 3]]
    data_rho = split_half(five)["raw"]
    assert data_rho == pytest.approx(np.mean([split_half(five, seeds=[s])["raw"] for s in range(20)]))
    # one permutation per candidate in order, floor(n/2) first: seed 0 by hand
    rng = np.random.default_rng(0)
    halves = [
        (np.mean([v[i] for i in p[:2]]), np.mean([v[i] for i in p[2:]]))
        for v, p in ((v, rng.permutation(5)) for v in five)
    ]
    assert split_half(five, seeds=[0])["raw"] == pytest.approx(spearmanr(*zip(*halves))[0])
    assert split_half(three)["raw"] is None  # fewer than 3 candidates: undefined, not a number


def test_three_judgments_per_candidate_give_a_split_half_stepped_up_to_three_ratings(tmp_path):
    # the default batch design: 3 assignments per HIT (was: "0 candidates with >= 4 judgments: -")
    campaign = _crowd(tmp_path, per_candidate=3)
    data = load_campaign(campaign, 0)
    figures = reliability(data)
    n, raw, z = _oracle(data)
    assert figures["n_candidates"] == n == 90 and figures["min_judgments_per_candidate"] == 2
    assert figures["split_half"]["raw"] == pytest.approx(raw) and figures["split_half"]["zscore"] == pytest.approx(z)
    # halves of 1 and 2 ratings: Spearman-Brown's unequal-halves form, up to the 3 ratings each candidate has
    assert figures["ratings"] == 3
    assert figures["split_half_reliability"]["raw"] == pytest.approx(split_half_reliability(raw, 1, 2))
    assert figures["split_half_reliability"]["zscore"] == pytest.approx(split_half_reliability(z, 1, 2))
    assert figures["split_half_reliability"]["raw"] > figures["split_half"]["raw"]  # three ratings beat one


def test_candidates_with_one_judgment_are_left_out(tmp_path):
    campaign = _crowd(tmp_path, per_candidate=1)
    figures = reliability(load_campaign(campaign, 0))
    assert figures["n_candidates"] == 0 and figures["split_half"] == {"raw": None, "zscore": None}
    assert figures["split_half_reliability"] == {"raw": None, "zscore": None} and figures["ratings"] is None
    assert figures["krippendorff_alpha"] is None  # no unit with two values: nothing to pair


def test_the_ratings_stepped_up_to_are_the_lower_median_of_the_candidates_counts():
    assert ratings_of([3, 3, 2, 4, 3]) == 3 and ratings_of([2, 4]) == 2 and ratings_of([]) is None
    assert stepped_up(0.5, 2) == pytest.approx(2 * 0.5 / 1.5)  # equal halves: the classic 2r / (1 + r)
    assert stepped_up(None, 3) is None and stepped_up(0.5, 1) is None


def test_spearman_matches_scipy_with_ties_and_is_none_where_undefined():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.integers(0, 6, size=15).astype(float), rng.integers(0, 6, size=15).astype(float)  # many ties
        assert spearman(a, b) == pytest.approx(spearmanr(a, b)[0])
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2, float("nan")], [1, 2, 3]) is None


# --- Krippendorff's alpha --------------------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers x 12 units with gaps
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
)


def _units(matrix):
    return [[v for v in col if not np.isnan(v)] for col in matrix.T]


def test_alpha_matches_the_published_example_and_the_krippendorff_package():
    ours = krippendorff_alpha_interval(_units(KRIPPENDORFF_2011))
    package = krippendorff.alpha(reliability_data=KRIPPENDORFF_2011, level_of_measurement="interval")
    assert ours == pytest.approx(package)
    assert round(ours, 3) == 0.849  # the paper's interval alpha
    assert krippendorff_alpha_interval([[3, 3], [3, 3]]) is None and krippendorff_alpha_interval([[1]]) is None


def test_campaign_alpha_matches_the_package_on_the_same_matrix(tmp_path):
    campaign = _crowd(tmp_path)
    alpha = json.loads(report("crowd", "--table", "reliability", "--min-judgments", "0"))["krippendorff_alpha"]
    data = load_campaign(campaign, 0)
    cands = [c for c in data.candidates if c.text != c.reference_text and not c.systems & {"0", "degraded"}]
    workers = sorted({w for c in cands for w in c.workers})
    matrix = np.full((len(workers), len(cands)), np.nan)
    for j, c in enumerate(cands):
        for w, s in zip(c.workers, c.scores):
            matrix[workers.index(w), j] = s
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"))


# --- the CLI ---------------------------------------------------------------------------------------------


def test_reliability_markdown_and_csv(tmp_path):
    _crowd(tmp_path)
    figures = json.loads(report("crowd", "--table", "reliability", "--min-judgments", "0"))
    md = report("crowd", "--table", "reliability", "--format", "md", "--min-judgments", "0")
    assert f"| {figures['split_half']['raw']:.3f} | {figures['split_half']['zscore']:.3f} |" in md
    assert f"Krippendorff's alpha (interval) | {figures['krippendorff_alpha']:.3f} |" in md and "90 candidates" in md
    rows = dict(
        csv.reader(io.StringIO(report("crowd", "--table", "reliability", "--format", "csv", "--min-judgments", "0")))
    )
    assert rows["measure"] == "value"
    assert float(rows["split_half_zscore"]) == pytest.approx(figures["split_half"]["zscore"])
    assert float(rows["krippendorff_alpha"]) == pytest.approx(figures["krippendorff_alpha"])
    assert rows["n_candidates"] == "90"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--table", "fluency", "--estimate", "zscore"], "applies only to the similarity table"),
        (["--table", "reliability", "--estimate", "raw"], "reports both estimates"),
        (["--table", "similarity", "--estimate", "bias"], "invalid choice: 'bias'"),
        (["--table", "reliabilty"], "invalid choice: 'reliabilty'"),
    ],
)
def test_bad_arguments_are_clear_errors(offsets, args, message):
    with pytest.raises(CommandError, match=message):
        report("offsets", *args)
