import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from PIL import Image

from annotation.models import Campaign
from tests.annotation.parabank_data import CANDS, import_contract

pytestmark = pytest.mark.django_db

EVIL = "<script>alert('x')</script>"


@pytest.fixture
def campaign(tmp_path):
    import_contract(tmp_path, cands=CANDS + ["3\t1\t5\t35\tIt's fine now.\t\t90\t2"])
    c = Campaign.objects.get(name="contract")
    c.name = "contract <b>bold</b>"
    c.settings = {
        **c.settings,
        "min_judgments_per_worker": 0,
        "system_names": {**c.settings["system_names"], "17": EVIL},
    }
    c.save()
    return c


@pytest.fixture
def staff_client(client):
    """A researcher who may view campaigns and judgments in the admin (what the dashboards show)."""
    user = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    return client


def test_dashboard_shows_the_three_tables_escaped(staff_client, campaign):
    response = staff_client.get(f"/research/campaigns/{campaign.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    for title in ("Semantic similarity (0-100)", "Meaningful and grammatical (%)", "BLEU without brevity penalty"):
        assert title in html
    assert EVIL not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "contract &lt;b&gt;bold&lt;/b&gt;" in html
    assert "PARANMT" in html and "79.50" in html  # system 28's similarity at length 5, as `report` says
    for plot in ("similarity-diversity", "similarity-by-length", "fluency-by-length", "diversity-by-length"):
        assert f"/research/campaigns/{campaign.pk}/plots/{plot}.png" in html
    assert f"/research/campaigns/{campaign.pk}/tables/fluency.csv" in html


def test_campaign_list_links_to_the_dashboard(staff_client, campaign):
    html = staff_client.get("/research/campaigns/").content.decode()
    assert f'href="/research/campaigns/{campaign.pk}/"' in html and "contract &lt;b&gt;" in html
    assert 'href="/research/campaigns/"' in staff_client.get("/").content.decode()  # the header link


@pytest.mark.parametrize(
    "plot", ["similarity-diversity", "similarity-by-length", "fluency-by-length", "diversity-by-length"]
)
def test_plots_are_real_pngs(staff_client, campaign, plot):
    response = staff_client.get(f"/research/campaigns/{campaign.pk}/plots/{plot}.png?download=1")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG" and image.size[0] >= 600 and image.size[1] >= 400
    assert f'filename="campaign-{campaign.pk}-{plot}.png"' in response["Content-Disposition"]
    # the same tables draw the same bytes
    assert staff_client.get(f"/research/campaigns/{campaign.pk}/plots/{plot}.png").content == response.content


def test_table_downloads_match_the_report_cli(staff_client, campaign):
    data = staff_client.get(f"/research/campaigns/{campaign.pk}/tables/similarity.json").json()
    out = io.StringIO()
    call_command("report", campaign.name, "--table", "similarity", stdout=out)
    assert data == json.loads(out.getvalue())
    response = staff_client.get(f"/research/campaigns/{campaign.pk}/tables/diversity.csv")
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["system"] for r in rows] == ["17", "21", "28", "35"] and rows[0]["name"] == EVIL


def test_min_judgments_parameter(staff_client, campaign):
    strict = staff_client.get(f"/research/campaigns/{campaign.pk}/tables/similarity.json?min_judgments=25").json()
    assert strict["min_judgments"] == 25 and all(r["avg"] is None for r in strict["rows"])
    assert staff_client.get(f"/research/campaigns/{campaign.pk}/?min_judgments=-1").status_code == 400
    assert staff_client.get(f"/research/campaigns/{campaign.pk}/plots/nope.png").status_code == 404
    assert staff_client.get(f"/research/campaigns/{campaign.pk}/tables/nope.csv").status_code == 404


@pytest.mark.parametrize("who", ["anonymous", "annotator"])
def test_refused_to_anonymous_and_non_staff(client, campaign, who):
    if who == "annotator":
        client.force_login(get_user_model().objects.create_user("ann", password="pw"))
    for url in (
        f"/research/campaigns/{campaign.pk}/",
        "/research/campaigns/",
        f"/research/campaigns/{campaign.pk}/plots/similarity-diversity.png",
        f"/research/campaigns/{campaign.pk}/tables/similarity.csv",
    ):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url


def test_estimate_switch_changes_the_similarity_table_and_its_downloads(staff_client, campaign):
    base = f"/research/campaigns/{campaign.pk}/"
    html = staff_client.get(base).content.decode()
    assert 'aria-current="page">raw</strong>' in html and f'href="{base}?estimate=zscore"' in html
    assert "Semantic similarity (0-100)</h2>" in html and "bias-corrected (worker z-scores)</h2>" not in html
    html = staff_client.get(base + "?estimate=zscore&min_judgments=0").content.decode()
    assert "Semantic similarity (0-100), bias-corrected (worker z-scores)</h2>" in html
    assert f'href="{base}?min_judgments=0"' in html  # back to raw, keeping the minimum
    assert 'name="estimate" value="zscore"' in html  # "Recompute" keeps the estimate
    # the similarity downloads and plots carry the estimate; the other tables do not
    z_json = f"{base}tables/similarity.json?min_judgments=0&amp;estimate=zscore"
    assert z_json in html and f"{base}plots/similarity-by-length.png?min_judgments=0&amp;estimate=zscore" in html
    assert f'{base}tables/fluency.csv?min_judgments=0"' in html
    out = io.StringIO()
    call_command(
        "report", campaign.name, "--table", "similarity", "--estimate", "zscore", "--min-judgments", "0", stdout=out
    )
    response = staff_client.get(z_json.replace("&amp;", "&"))
    assert response.json() == json.loads(out.getvalue()) and response.json()["estimate"] == "zscore"
    assert f'filename="campaign-{campaign.pk}-similarity-zscore.json"' in response["Content-Disposition"]
    plot = staff_client.get(f"{base}plots/similarity-by-length.png?estimate=zscore")
    assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "url",
    [
        "?estimate=bias",
        "?estimate=",
        "tables/similarity.csv?estimate=ZSCORE",
        "tables/fluency.csv?estimate=zscore",
        "tables/reliability.json?estimate=raw",
        "plots/fluency-by-length.png?estimate=zscore",
    ],
)
def test_bad_estimate_is_a_400(staff_client, campaign, url):
    response = staff_client.get(f"/research/campaigns/{campaign.pk}/{url}")
    if url == "?estimate=":  # an empty value is the default, as for min_judgments
        assert response.status_code == 200
    else:
        assert response.status_code == 400 and b"estimate" in response.content


def test_dashboard_shows_the_reliability_figures(staff_client, campaign):
    out = io.StringIO()
    call_command("report", campaign.name, "--table", "reliability", "--min-judgments", "0", stdout=out)
    figures = json.loads(out.getvalue())
    html = staff_client.get(f"/research/campaigns/{campaign.pk}/?min_judgments=0").content.decode()
    assert "Reliability of the similarity judgments" in html and "Krippendorff's alpha (interval)" in html
    assert f"{figures['n_candidates']} candidates with &ge; 2 judgments" in html
    data = staff_client.get(f"/research/campaigns/{campaign.pk}/tables/reliability.json?min_judgments=0").json()
    assert data == figures
