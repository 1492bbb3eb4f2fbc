"""A table that the minimum of judgments per worker leaves empty says why and links the minimum that fills
it (the dashboard and ``report``); every rater goes by one name on every screen and file: a local
annotator's login, a crowd worker's platform id, an imported rater's id in the file."""

import csv
import io
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command

from annotation.models import Assignment, AssignmentStatus, Campaign, Candidate, Judgment, Worker, rater_name
from tests.annotation.parabank_data import import_contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(tmp_path):
    """The contract's small campaign at the default minimum of 25: raters 1 and 2 have 3 judgments, rater 3 one."""
    import_contract(tmp_path)
    return Campaign.objects.get(name="contract")


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    return client


def _report(*args) -> str:
    out = io.StringIO()
    call_command("report", *args, stdout=out)
    return out.getvalue()


def test_an_empty_table_says_why_and_links_the_minimum_that_fills_it(staff_client, demo):
    base = f"/research/campaigns/{demo.pk}/"
    html = staff_client.get(base).content.decode()
    assert demo.min_judgments_per_worker == 25 and "(0 of 3 raters counted" in html
    reason = "No rater has 25 judgments yet; the most any rater has is 3."
    link = f'<a href="{base}?min_judgments=3">Count raters with at least 3 judgments</a>'
    # similarity, fluency and reliability count raters; diversity does not, and is filled
    assert html.count(reason) == 3 and html.count(link) == 3
    diversity = html.split('id="table-diversity"')[1].split("</section>")[0]
    assert reason not in diversity
    filled = staff_client.get(f"{base}?min_judgments=3").content.decode()
    assert reason not in filled and "(2 of 3 raters counted" in filled
    # issue 48: beside "2 of 3", the raters table says which one is not counted and why
    raters = filled.split('id="table-raters"')[1].split("</section>")[0]
    assert raters.count("<td>counted</td>") == 2 and raters.count("<td>not counted: fewer than 3 judgments</td>") == 1
    similarity = filled.split('id="table-similarity"')[1].split("</section>")[0]
    assert re.search(r'<td class="num">\d+\.\d\d</td>', similarity)  # figures where there were only dashes
    # issue 48: no empty length column (it had 5, 10, 20 and 40): only 5-token references have counted judgments
    assert re.findall(r"<th>(\d+)</th>", similarity) == ["5"]
    # the bias-corrected switch keeps its estimate in the link
    zscore = staff_client.get(f"{base}?estimate=zscore").content.decode()
    assert f'href="{base}?min_judgments=3&amp;estimate=zscore"' in zscore


def test_the_report_says_the_same(demo):
    md = _report(demo.name, "--table", "similarity", "--format", "md")
    assert "No rater has 25 judgments yet; the most any rater has is 3. Try --min-judgments 3." in md
    data = json.loads(_report(demo.name, "--table", "fluency"))
    assert data["counted_workers"] == 0 and data["most_rater_judgments"] == 3
    assert "No rater has" not in _report(demo.name, "--table", "similarity", "--format", "md", "--min-judgments", "3")


def test_when_every_rater_is_disqualified_no_minimum_is_offered(staff_client, demo):
    Worker.objects.update(disqualified=True)
    html = staff_client.get(f"/research/campaigns/{demo.pk}/").content.decode()
    assert "No counted judgment by a rater in good standing yet." in html and "Count raters with" not in html


def test_one_name_per_rater_in_the_admin_the_dashboard_and_the_report(admin_client, demo):
    demo.settings = {**demo.settings, "min_judgments_per_worker": 0}
    demo.save()
    annotator = get_user_model().objects.create_user("annotator1", password="pw")
    local = Worker.objects.create(provider="local", external_id=f"user-{annotator.pk}", user=annotator)
    crowd = Worker.objects.create(provider="prolific", external_id="5f0c3a6b9e1d2c4a7b8e9f01")
    candidate = Candidate.objects.get(reference__campaign=demo, text="It is okay now.")
    for n, worker in enumerate((local, crowd)):
        assignment = Assignment.objects.create(
            campaign=demo,
            worker=worker,
            provider=worker.provider,
            external_assignment_id=f"a{n}",
            status=AssignmentStatus.SUBMITTED,
        )
        Judgment.objects.create(assignment=assignment, candidate=candidate, worker=worker, score=50, fluency=2)
    names = ["1", "2", "3", "annotator1", "5f0c3a6b9e1d2c4a7b8e9f01"]  # the file's ids, the login, the platform's

    admin = admin_client.get("/admin/annotation/worker/").content.decode()
    dashboard = admin_client.get(f"/research/campaigns/{demo.pk}/").content.decode()
    report = json.loads(_report(demo.name, "--table", "raters"))
    assert sorted(r["name"] for r in report["rows"]) == sorted(names)
    csv_names = [row[0] for row in csv.reader(io.StringIO(_report(demo.name, "--table", "raters", "--format", "csv")))]
    assert csv_names[0] == "name" and sorted(csv_names[1:]) == sorted(names)
    assert "| annotator1 | 1 | 0/0 |" in _report(demo.name, "--table", "raters", "--format", "md")
    for name in names:
        assert f">{name}</" in admin and f"<td>{name}</td>" in dashboard, name
    for other in (f"user-{annotator.pk}", f"c{demo.pk}:1", f"w{local.pk}"):  # the names it used to go by
        # a whole word, not a run of letters inside the page's random CSRF token ("...Aww4dyt...")
        as_word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(other)}(?![A-Za-z0-9])")
        assert f">{other}<" not in admin and not as_word.search(dashboard) and other not in json.dumps(report)
    found = admin_client.get("/admin/annotation/worker/?q=annotator1").content.decode()  # searched by that name
    assert re.findall(r'class="field-name"><a [^>]*>([^<]*)</a>', found) == ["annotator1"]


@pytest.mark.parametrize(
    ("provider", "external_id", "username", "name"),
    [
        ("local", "user-7", "annotator1", "annotator1"),
        ("local", "user-7", None, "user-7"),  # the login was deleted: the id is what is left
        ("mturk", "A1B2C3", None, "A1B2C3"),
        ("import", "c12:w3", None, "w3"),
        ("import", "c12:a:b", None, "a:b"),
        ("mturk", "W\u200b1", None, "W\\u200b1"),  # stored before ids were checked: escaped, never raw
    ],
)
def test_the_name_rule(provider, external_id, username, name):
    assert rater_name(provider=provider, external_id=external_id, username=username) == name
