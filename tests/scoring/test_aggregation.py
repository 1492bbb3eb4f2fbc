import math

import pytest

from annotation.models import Campaign, Worker
from scoring.aggregation import counted_workers, fluency_rows, load_campaign, similarity_rows
from tests.annotation.parabank_data import CANDS, REFS, import_contract

pytestmark = pytest.mark.django_db


def _by_system(rows):
    return {r["system"]: r for r in rows}


@pytest.fixture
def campaign(tmp_path):
    import_contract(tmp_path)
    return Campaign.objects.get(name="contract")


def test_similarity_by_hand(campaign):
    rows = _by_system(similarity_rows(load_campaign(campaign, min_judgments=0)))
    # 28: ref 1 merged with the attention copy (100+98)/2 = 99, ref 2 60 -> 79.5
    # 17: ref 1 (80+70)/2 = 75, ref 2 60 -> 67.5;  21: ref 1 75, ref 2 40 (the N/A is no score) -> 57.5
    assert rows["28"]["by_length"]["5"] == pytest.approx(79.5)
    assert rows["17"]["by_length"]["5"] == pytest.approx(67.5)
    assert rows["21"]["by_length"]["5"] == pytest.approx(57.5)
    assert rows["28"]["avg"] == pytest.approx(79.5)
    assert rows["28"]["by_length"]["10"] is None and set(rows["28"]["by_length"]) == {"5", "10", "20", "40"}
    # sample SD over the candidate means 99 and 60
    assert rows["28"]["std"] == pytest.approx(math.sqrt(2 * 19.5**2))
    assert rows["28"]["n"] == 2
    assert "0" not in rows and list(rows) == ["17", "21", "28"]


def test_fluency_by_hand(campaign):
    rows = _by_system(fluency_rows(load_campaign(campaign, min_judgments=0)))
    # 28: both candidates all-2 -> 100%; 17: 'okay' has a 1 -> 50%; 21: both flagged (a 1, and the N/A 0) -> 0%
    assert {k: r["avg"] for k, r in rows.items()} == {"28": 100.0, "17": 50.0, "21": 0.0}
    assert rows["17"]["by_length"]["5"] == 50.0 and rows["17"]["n"] == 2
    assert rows["17"]["std"] == pytest.approx(math.sqrt(2 * 50**2))
    assert "0" not in rows


def test_na_is_no_score_but_a_fluency_flag(campaign):
    data = load_campaign(campaign, min_judgments=0)
    soon = next(c for c in data.candidates if c.text == "He left very soon.")
    assert soon.scores == [40] and sorted(soon.fluencies) == [0, 2]


def test_default_minimum_counts_nobody(campaign):
    data = load_campaign(campaign)
    assert data.min_judgments == 25 and data.counted_workers == set()
    row = _by_system(similarity_rows(data))["28"]
    assert row["avg"] is None and row["n"] == 0 and row["std"] is None


def test_min_judgments_filters_workers(campaign):
    # workers 1 and 2 gave 3 judgments each, worker 3 one
    assert len(counted_workers(campaign, 3)) == 2 and len(counted_workers(campaign, 1)) == 3
    sim = _by_system(similarity_rows(load_campaign(campaign, min_judgments=3)))
    # 21's 'soon' has only worker 2's N/A left: skipped -> 21 = 75 (ref 1 only), one candidate
    assert sim["21"]["by_length"]["5"] == pytest.approx(75.0) and sim["21"]["n"] == 1
    flu = _by_system(fluency_rows(load_campaign(campaign, min_judgments=3)))
    assert flu["21"]["avg"] == 0.0 and flu["21"]["n"] == 2


def test_campaign_setting_is_the_default_minimum(campaign):
    campaign.settings = {**campaign.settings, "min_judgments_per_worker": 3}
    campaign.save()
    assert load_campaign(campaign).min_judgments == 3 and len(load_campaign(campaign).counted_workers) == 2


def test_disqualified_workers_are_excluded(campaign):
    Worker.objects.filter(external_id=f"c{campaign.pk}:2").update(disqualified=True, disqualified_reason="attention")
    data = load_campaign(campaign, min_judgments=0)
    sim = _by_system(similarity_rows(data))
    # without worker 2: 28 = (100 + 60)/2; 17 = (80 + 60)/2; 21 = (80 + 40)/2
    assert {k: r["avg"] for k, r in sim.items()} == pytest.approx({"28": 80.0, "17": 70.0, "21": 60.0})
    flu = _by_system(fluency_rows(data))
    assert {k: r["avg"] for k, r in flu.items()} == {"28": 100.0, "17": 100.0, "21": 100.0}


def test_avg_is_the_mean_of_bucket_means(tmp_path):
    refs = REFS + ["3\tShe will come back to the office on Monday.\t10\t1.0"]
    cands = CANDS + ["1\t3\t10\t17\tShe returns to the office on Monday.\t0.3\t30\t2"]
    import_contract(tmp_path, campaign="two", refs=refs, cands=cands)
    row = _by_system(similarity_rows(load_campaign(Campaign.objects.get(name="two"), min_judgments=0)))["17"]
    assert row["by_length"] == {"5": pytest.approx(67.5), "10": pytest.approx(30.0), "20": None, "40": None}
    assert row["avg"] == pytest.approx((67.5 + 30) / 2)  # not the mean over the 3 candidates (55)
    assert row["n"] == 3


def test_other_buckets_are_kept(tmp_path):
    import_contract(
        tmp_path,
        campaign="odd",
        refs=["1\tIt is fine now.\t4\t1.0", REFS[1]],
        cands=[c.replace("1\t5\t", "1\t4\t", 1) if c.split("\t")[1] == "1" else c for c in CANDS],
    )
    data = load_campaign(Campaign.objects.get(name="odd"), min_judgments=0)
    assert data.buckets == [4, 5, 10, 20, 40]
    assert _by_system(similarity_rows(data))["28"]["by_length"]["4"] == pytest.approx(99.0)
