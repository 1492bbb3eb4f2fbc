"""The dashboard's cost, reliability and per-rater figures: the PNGs the views serve, the values drawn in them
(read back from the matplotlib figures) and the tables on the page, against figures computed here by hand
or by independent code (quality's per-worker queries, the krippendorff package, the plain split-half oracle)."""

import io
import itertools
import re
from decimal import ROUND_HALF_UP, Decimal

import krippendorff
import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from matplotlib.patches import Rectangle
from PIL import Image

from annotation.batches.costs import campaign_batch_costs
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    Campaign,
    Candidate,
    CandidateSystem,
    Hit,
    HitItem,
    Judgment,
    Reference,
    Verification,
    Worker,
)
from annotation.quality.workers import campaign_rater_figures, worker_quality
from scoring.aggregation import load_campaign
from scoring.dashboard.plots import cost_figure, raters_figure, reliability_figure
from scoring.reliability import reliability_and_splits

from .test_reliability import _crowd, _oracle

pytestmark = pytest.mark.django_db

REWARD = Decimal("0.40")
# worker -> (score of real candidate k = base + 5k, attention copy, degraded copy)
_IDS = itertools.count(1)
SCORES = {"W1": (70, 100, 10), "W2": (60, 90, 75), "W3": (50, 100, 0), "L1": (55, 100, 5)}


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    return client


def _judge(assignment: Assignment, hit: Hit) -> None:
    real, copy, degraded = SCORES[assignment.worker.external_id]
    for item in hit.items.order_by("position"):
        if item.is_attention_check:
            score = copy
        elif item.is_degraded_check:
            score = degraded
        else:
            score = real + 5 * (item.position - 1)
        Judgment.objects.create(
            assignment=assignment, candidate=item.candidate, worker=assignment.worker, score=score, fluency=2
        )


def _assign(hit: Hit, worker: Worker, status: str, verification: str = Verification.VERIFIED) -> Assignment:
    a = Assignment.objects.create(
        campaign=hit.batch.campaign,
        hit=hit,
        worker=worker,
        provider=worker.provider,
        external_assignment_id=f"A{next(_IDS)}",
        status=status,
        verification=verification,
    )
    _judge(a, hit)
    return a


@pytest.fixture
def campaign():
    """4 references (3 real candidates, an attention copy, a degraded copy each); an MTurk sandbox batch of 4
    HITs x 3 assignments at $0.40 and a local batch of 2 HITs x 2; assignments in every state; bonuses."""
    c = Campaign.objects.create(
        name="qc",
        settings={
            "min_judgments_per_worker": 0,
            "min_degraded_checks": 2,
            "degraded_p_max": 0.05,
            "attention_pass_mark": 100,
            "max_attention_failure_rate": 0.2,
        },
    )
    hits_items = []
    for r in range(4):
        ref = Reference.objects.create(
            campaign=c, ref_id=f"r{r}", length_bucket=10, text=f"The reference sentence number {r} is here today."
        )
        items = []
        for system, text in [
            ("1", f"Paraphrase one of {r}."),
            ("2", f"Paraphrase two of {r}."),
            ("3", f"Paraphrase three of {r}."),
            ("0", ref.text),
            ("degraded", f"The reference sentence banana {r} is here today."),
        ]:
            cand = Candidate.objects.create(reference=ref, text=text)
            CandidateSystem.objects.create(candidate=cand, system=system)
            items.append((cand, system))
        hits_items.append((ref, items))
    mturk = Batch.objects.create(
        campaign=c,
        provider="mturk",
        status=BatchStatus.PUBLISHED,
        label="first",
        settings={"sandbox": True, "reward_usd": str(REWARD)},
    )
    local = Batch.objects.create(campaign=c, provider="local", status=BatchStatus.PUBLISHED)
    hits = {}
    for batch, refs, slots in ((mturk, range(4), 3), (local, range(2), 2)):
        for r in refs:
            ref, items = hits_items[r]
            hit = Hit.objects.create(batch=batch, reference=ref, max_assignments=slots)
            for position, (cand, system) in enumerate(items, start=1):
                HitItem.objects.create(
                    hit=hit,
                    candidate=cand,
                    position=position,
                    is_attention_check=system == "0",
                    is_degraded_check=system == "degraded",
                )
            hits[batch.provider, r] = hit
    w1, w2, w3 = (Worker.objects.create(external_id=w, provider="mturk") for w in ("W1", "W2", "W3"))
    annotator = get_user_model().objects.create_user("annotator1", password="pw")
    l1 = Worker.objects.create(external_id="L1", provider="local", user=annotator)  # goes by "annotator1"
    first = [_assign(hits["mturk", r], w1, AssignmentStatus.APPROVED) for r in range(4)]
    for r, status in enumerate(
        (AssignmentStatus.APPROVED, AssignmentStatus.APPROVED, AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED)
    ):
        _assign(hits["mturk", r], w2, status)
    _assign(hits["mturk", 0], w3, AssignmentStatus.SUBMITTED, Verification.FLAGGED)  # never paid, never counted
    _assign(hits["mturk", 1], w3, AssignmentStatus.SUBMITTED, Verification.UNVERIFIED)  # awaits, not counted
    local_work = [_assign(hits["local", r], l1, AssignmentStatus.APPROVED) for r in range(2)]
    Bonus.objects.create(
        assignment=first[0],
        worker=w1,
        amount_usd=Decimal("0.25"),
        reason="r",
        unique_request_token="b1",
        sent_at="2026-01-01T00:00:00Z",
    )
    Bonus.objects.create(
        assignment=first[1], worker=w1, amount_usd=Decimal("0.10"), reason="r", unique_request_token="b2"
    )
    Bonus.objects.create(
        assignment=local_work[0],
        worker=l1,
        amount_usd=Decimal("0.50"),
        reason="r",
        unique_request_token="b3",
        sent_at="2026-01-01T00:00:00Z",
    )
    Worker.objects.filter(pk=w2.pk).update(disqualified=True)
    return c


def bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def test_cost_so_far_per_batch(campaign):
    # MTurk, by the README's rule: each assignment costs the reward plus 20% (at least $0.01), to the cent
    per_assignment = REWARD + max(Decimal("0.01"), (REWARD * Decimal("0.20")).quantize(Decimal("0.01"), ROUND_HALF_UP))
    estimate = 4 * 3 * per_assignment  # 4 HITs x 3 assignments
    paid = 6 * per_assignment  # W1's four and W2's two approved assignments
    awaiting = 2 * per_assignment  # W2's submitted one and W3's unverified one (the flagged one never)
    mturk, local = campaign_batch_costs(campaign)
    assert (mturk.slots, mturk.approved, mturk.awaiting) == (12, 6, 2)
    assert mturk.estimate == estimate == Decimal("5.76") and mturk.spent == paid and mturk.awaiting_cost == awaiting
    assert mturk.bonuses_sent == Decimal("0.25") and mturk.bonuses_pending == Decimal("0.10")
    assert mturk.spent_total == paid + Decimal("0.25") and mturk.provider == "mturk sandbox"
    assert (local.estimate, local.spent, local.bonuses_sent, local.approved) == (None, 0, Decimal("0.50"), 2)
    assert "free" in local.note

    fig = cost_figure([mturk, local])
    ax = fig.axes[0]
    stacked = [b for b in bars(ax) if b.get_fill()]
    outlined = [b for b in bars(ax) if not b.get_fill()]
    # three stacked segments per batch (paid, bonuses sent, awaiting) in that order, first batch on top
    widths = [round(b.get_width(), 2) for b in stacked]
    assert widths == [float(paid), 0.0, 0.25, 0.5, float(awaiting), 0.0]
    assert [round(b.get_width(), 2) for b in outlined] == [float(estimate), 0.0]
    labels = [t.get_text() for t in ax.texts]
    assert labels[0] == r"\$3.13 spent of \$5.76" and labels[1].startswith(r"\$0.50 spent (free")


def test_rater_figures_match_quality_per_worker(campaign):
    raters = campaign_rater_figures(campaign)
    workers = {w.pk: w for w in Worker.objects.all()}
    # W3's work is flagged or unverified: not counted, so not a rater
    assert [workers[r.worker_id].external_id for r in raters] == ["W1", "W2", "L1"]
    for r in raters:
        q = worker_quality(worker=workers[r.worker_id], campaign=campaign, figures=False)
        assert (r.judgments, r.attention_passed, r.attention_failed, r.degraded_checks, r.real_judged) == (
            q.judgments,
            q.attention_passed,
            q.attention_failed,
            q.degraded_checks,
            q.real_judged,
        )
        assert r.degraded_p == pytest.approx(q.degraded_p)
        real, _, degraded = SCORES[workers[r.worker_id].external_id]
        assert r.real_mean == pytest.approx(real + 5)  # positions 1-3 -> real, real + 5, real + 10
        assert r.degraded_mean == degraded
    w1, w2, l1 = raters
    assert (w1.attention_pass_rate, w2.attention_pass_rate) == (1.0, 0.0) and w2.disqualified
    assert w1.degraded_p < 0.05 < w2.degraded_p and l1.degraded_checks == 2 and l1.degraded_p is not None

    fig = raters_figure(raters, min_pass_rate=0.8, p_max=0.05)
    attention, degraded, means = fig.axes
    assert [b.get_height() for b in bars(attention)] == [1.0, 0.0, 1.0]
    assert [b.get_height() for b in bars(degraded)] == pytest.approx([w1.degraded_p, w2.degraded_p, l1.degraded_p])
    assert [b.get_height() for b in bars(means)] == pytest.approx([75, 65, 60, 10, 75, 5])
    assert [t.get_text() for t in means.get_xticklabels()] == ["W1", "W2", "annotator1"]  # crowd id, login
    assert bars(attention)[1].get_facecolor() != bars(attention)[0].get_facecolor()  # the disqualified one
    assert attention.lines[0].get_ydata()[0] == 0.8 and degraded.lines[0].get_ydata()[0] == 0.05


def test_reliability_figure_draws_each_split_and_the_three_figures(tmp_path):
    campaign = _crowd(tmp_path)
    data = load_campaign(campaign, 0)
    figures, splits = reliability_and_splits(data)
    n, raw, z = _oracle(data)
    per_split = [_oracle(data, seeds=[s]) for s in range(20)]
    assert splits["raw"] == pytest.approx([p[1] for p in per_split])
    assert splits["zscore"] == pytest.approx([p[2] for p in per_split])
    # alpha from the krippendorff package on a workers x candidates matrix (one judgment per pair here)
    cands = [
        c
        for c in data.candidates
        if c.text != c.reference_text and "0" not in c.systems and "degraded" not in c.systems and c.scores
    ]
    workers = sorted({w for c in cands for w in c.workers})
    matrix = np.full((len(workers), len(cands)), np.nan)
    for j, c in enumerate(cands):
        for w, s in zip(c.workers, c.scores):
            matrix[workers.index(w), j] = s
    alpha = krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")

    ax = reliability_figure(figures, splits).axes[0]
    assert [b.get_height() for b in bars(ax)] == pytest.approx([raw, z, alpha])
    dots = [c.get_offsets()[:, 1] for c in ax.collections]
    assert list(dots[0]) == pytest.approx([p[1] for p in per_split]) and list(dots[1]) == pytest.approx(
        [p[2] for p in per_split]
    )
    assert [t.get_text() for t in ax.texts] == [f"{raw:.3f}", f"{z:.3f}", f"{alpha:.3f}"]
    assert f"{n} candidates" in ax.get_title()


def test_an_empty_campaign_draws_and_says_so():
    empty = Campaign.objects.create(name="empty")
    data = load_campaign(empty, 0)
    for fig in (
        cost_figure(campaign_batch_costs(empty)),
        raters_figure([], min_pass_rate=0.9, p_max=0.05),
        reliability_figure(*reliability_and_splits(data)),
    ):
        assert fig.axes  # drawn, nothing raised
    assert [t.get_text() for t in reliability_figure(*reliability_and_splits(data)).axes[0].texts] == [
        "n/a",
        "n/a",
        "n/a",
    ]


@pytest.mark.parametrize("plot", ["cost-per-batch", "reliability", "raters"])
def test_the_new_plots_are_served_as_pngs(staff_client, campaign, plot):
    url = f"/research/campaigns/{campaign.pk}/plots/{plot}.png"
    response = staff_client.get(url + "?download=1&min_judgments=0")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG" and image.size[0] >= 600 and image.size[1] >= 300
    assert f'filename="campaign-{campaign.pk}-{plot}.png"' in response["Content-Disposition"]
    assert staff_client.get(url + "?min_judgments=0").content == response.content  # same figures, same bytes
    assert staff_client.get(url + "?estimate=zscore").status_code == 400  # the estimate is similarity's only
    assert staff_client.get(url + "?min_judgments=x").status_code == 400


def test_the_dashboard_shows_the_new_figures_and_tables(staff_client, campaign):
    html = staff_client.get(f"/research/campaigns/{campaign.pk}/").content.decode()
    for plot in ("cost-per-batch", "reliability", "raters"):
        assert f'<img src="/research/campaigns/{campaign.pk}/plots/{plot}.png"' in html
    assert "Cost so far per batch" in html and "5.76 USD" in html and "3.13 USD" in html and "2.88 USD" in html
    assert "<td>W2</td>" in html and "disqualified" in html
    assert "0/4 (0%)" in html and "4/4 (100%)" in html  # W2 failed every attention check, W1 passed them all
    # raters by one name: the platform's id for the crowd, the login for a local annotator; W3 is not counted
    assert "<td>W1</td>" in html and "<td>annotator1</td>" in html and not re.search(r"\bW3\b|\bL1\b", html)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_new_plots_load_in_a_browser_under_the_pages_csp(live_server, campaign, client, monkeypatch, tmp_path):
    """Headless Chromium: the dashboard's cost, reliability and rater images load (same-origin PNGs, nothing
    the Content-Security-Policy blocks) and show at their size."""
    from playwright.sync_api import expect, sync_playwright

    from tests.annotation.test_browser import CHROMIUM_ARGS
    from tests.screens import shoot

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    user = get_user_model().objects.create_user("res2", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_campaign", "view_judgment"]))
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    blocked = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": live_server.url}])
            page = context.new_page()
            page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
            page.goto(f"{live_server.url}/research/campaigns/{campaign.pk}/")
            for plot in ("cost-per-batch", "reliability", "raters"):
                img = page.locator(f"#plot-{plot} img")
                img.scroll_into_view_if_needed()
                page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
                assert img.evaluate("img => img.naturalWidth") >= 600
            page.locator("#plot-raters").screenshot(path=str(tmp_path / "raters.png"))
            for plot in ("cost-per-batch", "reliability", "raters"):
                page.locator(f"#plot-{plot}").scroll_into_view_if_needed()
                shoot(page, f"dashboard-{plot}")
            # issue 48, on a desktop and a phone: how many raters count, and why the others do not
            for width, height in ((1280, 900), (390, 844)):
                page.set_viewport_size({"width": width, "height": height})
                page.goto(f"{live_server.url}/research/campaigns/{campaign.pk}/")
                expect(page.locator("#counted-workers")).to_contain_text("2 of 3 raters counted")
                w2 = page.locator("#table-raters tr", has_text="W2").locator("td").last
                w2.scroll_into_view_if_needed()
                expect(w2).to_have_text("not counted: disqualified")
                expect(w2).to_be_in_viewport()
                # wide tables scroll in their own box: the page itself never scrolls sideways
                assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
                page.wait_for_load_state("networkidle")  # the plots' images served before the server stops
        finally:
            browser.close()
    assert blocked == []
