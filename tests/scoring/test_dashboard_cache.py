"""The dashboard's tables are computed once per change of the campaign's judgments and shared (cache): what a
researcher sees is always the figures of the judgments as they are now. A new counted judgment, a crowd
submission verified and a worker disqualified each show at the next view; the cached tables equal the ones
computed directly from the rules (``scoring.aggregation``, ``scoring.diversity``, ``scoring.reliability``)."""

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, AssignmentStatus, Campaign, Candidate, Judgment, Verification, Worker
from annotation.quality.workers import campaign_rater_figures, worker_disqualify
from scoring.aggregation import fluency_rows, load_campaign, similarity_rows, zscore_estimates
from scoring.dashboard.tables import CampaignTables, campaign_fingerprints, rater_row
from scoring.diversity import diversity_rows
from scoring.reliability import reliability
from tests.annotation.parabank_data import CANDS, import_contract

pytestmark = pytest.mark.django_db

# one more rater (4) and more judgments, so that every table has figures at a minimum of 0
MORE = [
    "3\t1\t5\t17 21\tIt is okay now.\t0.5\t90\t2",
    "3\t1\t5\t0\tIt is fine now.\t0.1\t100\t2",
    "4\t1\t5\t17 21\tIt is okay now.\t0.5\t20\t1",
    "4\t2\t5\t28 17\tHe went away early.\t0.4\t30\t2",
    "4\t2\t5\t21\tHe left very soon.\t0.6\t50\t2",
    "3\t2\t5\t28 17\tHe went away early.\t0.4\t70\t2",
]


@pytest.fixture
def campaign(tmp_path):
    import_contract(tmp_path, cands=CANDS + MORE)
    c = Campaign.objects.get(name="contract")
    c.settings = {**c.settings, "min_judgments_per_worker": 0}
    c.save()
    return c


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    return client


def _direct(campaign: Campaign) -> dict:
    """Every table computed straight from the rules, no cache: what the dashboard must show."""
    data = load_campaign(campaign)
    z = zscore_estimates(data)

    def cells(rows):
        return {r["system"]: {k: r[k] for k in ("by_length", "avg", "std", "n")} for r in rows}

    return {
        "similarity": cells(similarity_rows(data)),
        "similarity-zscore": cells(similarity_rows(data, z.means)),
        "fluency": cells(fluency_rows(data)),
        "diversity": cells(diversity_rows(data)),
        "reliability": reliability(data),
        "raters": [rater_row(r) for r in campaign_rater_figures(campaign)],
        "counted_workers": len(data.counted_workers),
    }


def _shown(client, campaign: Campaign) -> dict:
    """The same tables as the dashboard's downloads give them."""
    base = f"/research/campaigns/{campaign.pk}/tables/"

    def get(name: str, query: str = "") -> dict:
        response = client.get(f"{base}{name}.json{query}")
        assert response.status_code == 200
        return response.json()

    def cells(result):
        return {r["system"]: {k: r[k] for k in ("by_length", "avg", "std", "n")} for r in result["rows"]}

    rel = get("reliability")
    return {
        "similarity": cells(get("similarity")),
        "similarity-zscore": cells(get("similarity", "?estimate=zscore")),
        "fluency": cells(get("fluency")),
        "diversity": cells(get("diversity")),
        "reliability": {
            k: rel[k]
            for k in (
                "split_half",
                "n_candidates",
                "krippendorff_alpha",
                "split_half_reliability",
                "ratings",
                "workers_sd0",
                "n_splits",
                "min_judgments_per_candidate",
            )
        },
        "raters": get("raters")["rows"],
        "counted_workers": rel["counted_workers"],
    }


def _judge(campaign: Campaign, worker: Worker, text: str, score: int, verification=Verification.VERIFIED) -> None:
    candidate = Candidate.objects.get(reference__campaign=campaign, text=text)
    assignment = Assignment.objects.create(
        campaign=campaign,
        worker=worker,
        provider=worker.provider,
        external_assignment_id=f"extra-{worker.external_id}-{candidate.pk}",
        status=AssignmentStatus.SUBMITTED if worker.provider != "import" else AssignmentStatus.IMPORTED,
        verification=verification,
    )
    Judgment.objects.create(assignment=assignment, candidate=candidate, worker=worker, score=score, fluency=2)


def _page(client, campaign: Campaign, query: str = "") -> str:
    response = client.get(f"/research/campaigns/{campaign.pk}/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_dashboard_shows_the_tables_the_rules_give(staff_client, campaign):
    direct = _direct(campaign)
    assert _shown(staff_client, campaign) == direct
    assert _shown(staff_client, campaign) == direct  # the second time from the cache: the same tables
    html = _page(staff_client, campaign)
    for system, row in direct["similarity"].items():
        if row["avg"] is not None:
            assert f"{row['avg']:.2f}" in html, system
    out = io.StringIO()
    call_command("report", campaign.name, "--table", "fluency", stdout=out)  # the CLI reads the same tables
    assert {r["system"]: r["avg"] for r in json.loads(out.getvalue())["rows"]} == {
        s: r["avg"] for s, r in direct["fluency"].items()
    }


def test_a_warm_view_reads_no_judgment_again(staff_client, campaign):
    """Once computed, a view asks the database only what tells whether anything changed (a few aggregates)."""
    _page(staff_client, campaign)
    with CaptureQueriesContext(connection) as queries:
        _page(staff_client, campaign)
    rows_read = [q["sql"] for q in queries if "annotation_judgment" in q["sql"] and "SUM(" not in q["sql"].upper()]
    assert rows_read == []


def test_a_new_counted_judgment_shows_at_the_next_view(staff_client, campaign):
    before = _shown(staff_client, campaign)
    _page(staff_client, campaign)
    worker = Worker.objects.get(external_id=f"c{campaign.pk}:1")
    _judge(campaign, worker, "He left very soon.", 100)
    after = _direct(campaign)
    assert after["similarity"]["21"] != before["similarity"]["21"]
    assert _shown(staff_client, campaign) == after
    assert f"{after['similarity']['21']['avg']:.2f}" in _page(staff_client, campaign)


def test_a_crowd_submission_counts_once_verified(staff_client, campaign):
    crowd = Worker.objects.create(provider="mturk", external_id="A1CROWD")
    _judge(campaign, crowd, "He left very soon.", 0, verification=Verification.UNVERIFIED)
    before = _shown(staff_client, campaign)
    assert before == _direct(campaign) and "A1CROWD" not in _page(staff_client, campaign)
    Assignment.objects.filter(worker=crowd).update(verification=Verification.VERIFIED)  # what sync does
    after = _direct(campaign)
    assert after["similarity"]["21"] != before["similarity"]["21"]
    assert _shown(staff_client, campaign) == after
    assert "<td>A1CROWD</td>" in _page(staff_client, campaign)


def test_a_disqualification_shows_at_the_next_view(staff_client, campaign):
    before = _shown(staff_client, campaign)
    _page(staff_client, campaign)
    worker_disqualify(worker=Worker.objects.get(external_id=f"c{campaign.pk}:4"), reason="by hand")
    after = _direct(campaign)
    assert after["counted_workers"] == before["counted_workers"] - 1
    assert after["similarity"] != before["similarity"]
    assert _shown(staff_client, campaign) == after
    html = _page(staff_client, campaign)
    assert f"({after['counted_workers']} of " in html
    assert "<td>4</td>" in html and "<td>not counted: disqualified</td>" in html


def test_the_fingerprint_follows_the_judgments_not_other_rows(campaign):
    sample, judgments = campaign_fingerprints(campaign)
    Worker.objects.create(provider="mturk", external_id="IDLE")  # no judgment: nothing changes
    assert campaign_fingerprints(campaign) == (sample, judgments)
    Judgment.objects.filter(score=40).update(score=41)  # what a re-import that corrects a score does
    now_sample, now_judgments = campaign_fingerprints(campaign)
    assert now_sample == sample and now_judgments != judgments
    # diversity depends on the sample only: a new judgment keeps it, and the minimum does not matter
    assert CampaignTables(campaign).table("diversity")["rows"] == CampaignTables(campaign, 3).table("diversity")["rows"]
