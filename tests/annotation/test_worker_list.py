"""The admin's worker list computes its page's quality figures in one pass (``workers_quality``): the same
figures as ``worker_quality`` per worker, shown under the rater's one name."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from annotation.models import Assignment, Campaign, Worker
from annotation.quality.workers import worker_quality, workers_quality
from tests.annotation.parabank_data import CANDS, import_contract
from tests.scoring.test_dashboard_figures import campaign  # noqa: F401 - the fixture: crowd, local, checks

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_campaigns(campaign, tmp_path):  # noqa: F811 - the imported fixture
    """The rater-quality campaign, with times on some assignments, and the contract's imported one (whose pass
    mark is lower: each attention check is held against its own campaign's)."""
    start = timezone.now()
    for n, a in enumerate(Assignment.objects.filter(worker__external_id__in=["W1", "L1"]).order_by("pk")):
        a.accepted_at, a.submitted_at = start, start + dt.timedelta(seconds=30 + 7 * n)
        a.save()
    import_contract(tmp_path, cands=CANDS + ["1\t2\t5\t0\tHe left very early.\t0.1\t95\t2"])
    contract = Campaign.objects.get(name="contract")
    contract.settings = {**contract.settings, "attention_pass_mark": 90, "min_degraded_checks": 1}
    contract.save()
    return campaign


def test_one_pass_gives_each_workers_figures(two_campaigns):
    workers = list(Worker.objects.all())
    batch = workers_quality(workers)
    assert set(batch) == {w.pk for w in workers}
    for worker in workers:
        one = worker_quality(worker=worker)
        many = batch[worker.pk]
        assert many.agreement == pytest.approx(one.agreement), worker
        assert (many.seconds_per_hit, many.judgments, many.attention_passed, many.attention_failed) == (
            one.seconds_per_hit,
            one.judgments,
            one.attention_passed,
            one.attention_failed,
        ), worker
        assert (many.degraded_checks, many.real_judged, many.min_degraded_checks) == (
            one.degraded_checks,
            one.real_judged,
            one.min_degraded_checks,
        ), worker
        assert many.degraded_p == pytest.approx(one.degraded_p), worker
    w1 = batch[Worker.objects.get(external_id="W1").pk]
    assert w1.seconds_per_hit is not None and w1.agreement is not None and w1.attention_checks == 4


def test_the_list_shows_them_under_the_raters_names(admin_client, two_campaigns):
    page = admin_client.get("/admin/annotation/worker/").content.decode()
    rows = re.findall(r'<tr>.*?class="field-name"><a [^>]*>([^<]*)</a>.*?</tr>', page, flags=re.S)
    assert sorted(rows) == sorted(["W1", "W2", "W3", "annotator1", "1", "2", "3"])
    w1 = worker_quality(worker=Worker.objects.get(external_id="W1"))
    row = page.split(">W1</a>")[1].split("</tr>")[0]
    assert f'<td class="field-judgments">{w1.judgments}</td>' in row
    assert f'<td class="field-agreement">{w1.agreement:.2f}</td>' in row
    assert f'<td class="field-seconds_per_hit">{w1.seconds_per_hit:.0f}</td>' in row
