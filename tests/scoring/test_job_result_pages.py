"""Issue 30: a finished train, score, export or generate job's page is a page, not a JSON dump: what it made, the
figures that matter (the held-out rho with its n), links on (the release's files, the dashboard, the next step),
the raw result behind a ``<details>`` disclosure; the JSON API keeps serving the raw result."""

import hashlib

import lxml.html
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from jobs.execution import job_run_inline
from jobs.models import Job, JobStatus
from scoring.models import Regressor, Release, ScoredResource
from scoring.regressor import RegressorTrainOptions
from scoring.regressor.held_out import calibrate
from scoring.regressor.job import train_regressor_launch
from scoring.releases.job import export_release_start
from scoring.releases.params import ReleaseExportParams
from scoring.scored.job import score_resource_launch

from .resource_data import build_resource
from .test_regressor import build_campaign

pytestmark = pytest.mark.django_db


def run(job: Job) -> Job:
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job


@pytest.fixture
def path(tmp_path, storage_dir):
    """A regressor trained on a synthetic campaign, a resource scored with it and exported: the three jobs."""
    campaign = build_campaign(tmp_path, n_refs=20)
    train = run(
        train_regressor_launch(
            campaign=campaign.name, name="pages", options=RegressorTrainOptions(with_embeddings=False)
        )
    )
    resource = build_resource()
    score = run(score_resource_launch(resource=resource, regressor=Regressor.objects.get(name="pages")))
    export = run(export_release_start(ReleaseExportParams(resource=resource.pk, version="v1")))
    return {"campaign": campaign, "resource": resource, "train": train, "score": score, "export": export}


@pytest.fixture
def boss(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def page(client, url):
    response = client.get(url)
    assert response.status_code == 200, url
    return lxml.html.fromstring(response.content.decode())


def figures(doc) -> dict[str, str]:
    return {
        row.xpath("string(th)").strip(): row.xpath("string(td)").strip()
        for row in doc.xpath("//table[@class='job-figures']//tr")
    }


def links(doc) -> dict[str, str]:
    return {a.text_content().strip(): a.get("href") for a in doc.xpath("//div[@id='job-page']//a")}


def assert_raw_only_in_details(doc, job: Job) -> None:
    assert not doc.xpath("//div[@id='job-page']//pre[not(ancestor::details)]"), "raw JSON outside the disclosure"
    raw = doc.xpath("string(//details[@class='job-raw']/pre)")
    assert f'"{next(iter(sorted(job.result)))}"' in raw


def test_the_training_page_shows_the_held_out_rho_with_its_n_and_the_calibration(boss, path):
    job, campaign = path["train"], path["campaign"]
    row = Regressor.objects.get(name="pages")
    doc = page(boss, f"/admin/scoring/regressor/train/{job.pk}/")
    rho = figures(doc)["held-out Spearman's rho"]
    assert rho.startswith(f"{row.metrics['spearman_test']:.3f} (n = {row.metrics['n_test']} held-out pairs of ")
    # 4 held-out references: a bootstrap over them would print a meaningless "95% interval"
    assert rho.endswith("of 4 references; no interval: too few references, fewer than 5)")
    assert "fewer than 100" in doc.xpath("string(//ul[contains(@class,'job-warnings')])")  # 16 held-out pairs
    cv = figures(doc)["cross-validated Spearman's rho (5 folds by reference, nested)"]  # beside the held-out rho
    assert cv.startswith(f"{row.metrics['spearman_cv']:.3f} (n = {row.metrics['n_cv']} held-out pairs of ")
    # too few held-out pairs for a map: the title says what the table is, the note beside it says why
    title = "Precision at cuts on the raw score, held-out pairs (no calibration map: score = raw_score)"
    assert not doc.xpath("//h2[starts-with(text(), 'Calibration')]")
    calibration = doc.xpath(f"//h2[text()='{title}']/following-sibling::table[1]//tr")
    assert [r.xpath("string(td[1])") for r in calibration[1:]] == ["any", "50", "60", "70", "80", "90"]
    assert calibration[0].xpath("string(th[1])") == "score >="
    note = doc.xpath(f"string(//h2[text()='{title}']/following-sibling::p[1])")
    assert "There is no calibration map (its 16 held-out pairs are fewer than the 20 a map needs)" in note
    assert "score equals raw_score" in note and "to get about that precision" not in note
    found = links(doc)
    assert found["regressor pages"] == f"/admin/scoring/regressor/{row.pk}/change/"
    assert found["score a resource with it…"] == f"/admin/scoring/scoredresource/score/?regressor={row.pk}"
    assert found[f"dashboard of campaign {campaign.name}"] == f"/research/campaigns/{campaign.pk}/"
    assert_raw_only_in_details(doc, job)


def test_with_a_calibration_map_the_training_page_cuts_on_raw_score_and_shows_the_score_there(
    boss, tmp_path, storage_dir
):
    """The release's ``score`` is calibrated (issue 41): the page's cuts are on the prediction, ``raw_score``, and
    each shows the calibrated score a release's ``--min-score`` would use, as the card's table does."""
    campaign = build_campaign(tmp_path, n_refs=20)
    options = RegressorTrainOptions(with_embeddings=False, test_fraction=0.3)
    job = run(train_regressor_launch(campaign=campaign.name, name="mapped", options=options))
    kept = Regressor.objects.get(name="mapped").metrics["calibration_map"]
    doc = page(boss, f"/admin/scoring/regressor/train/{job.pk}/")
    title = "Calibration on the held-out pairs (raw_score cuts and the calibrated score there)"
    table = doc.xpath(f"//h2[text()='{title}']/following-sibling::table[1]//tr")
    assert [h.text_content() for h in table[0].xpath("th")][:2] == ["raw_score >=", "score there"]
    assert figures(doc)["calibration map"] == f"calibrated: an isotonic map fitted on {kept['pairs']} held-out pairs"
    cuts = [(float(r.xpath("string(td[1])")), r.xpath("string(td[2])")) for r in table[2:]]
    assert [cut for cut, _ in cuts] == [50, 60, 70, 80, 90]
    assert [there for _, there in cuts] == [f"{v:.1f}" for v in calibrate([c for c, _ in cuts], kept["x"], kept["y"])]


def test_the_scoring_page_leads_to_the_export(boss, path):
    scored = ScoredResource.objects.get()
    doc = page(boss, f"/admin/scoring/scoredresource/score/{path['score'].pk}/")
    assert doc.xpath("string(//p[@class='job-done'])").startswith("Done: res scored (18 pairs)")
    shown = figures(doc)
    assert shown["pairs scored"] == "18 of 18" and shown["regressor"] == "pages"
    assert shown["held-out Spearman's rho"].endswith("no interval: too few references, fewer than 5)")
    assert "cross-validated Spearman's rho (5 folds by reference, nested)" in shown
    # the scoring page has no calibration table: a figure says what a release's score will be
    assert shown["calibration map"] == (
        "none: score = raw_score (its 16 held-out pairs are fewer than the 20 a map needs)"
    )
    assert links(doc)["export a release…"] == f"/admin/scoring/scoredresource/{scored.pk}/export/"
    assert_raw_only_in_details(doc, path["score"])


def test_the_export_page_offers_the_files_and_says_what_the_release_holds(boss, path):
    release = Release.objects.get()
    doc = page(boss, f"/admin/scoring/scoredresource/export/{path['export'].pk}/")
    shown = figures(doc)
    assert shown["pairs released"] == "17 of 18 read"
    assert shown["paraphrases identical to their reference"] == "1 left out"
    assert shown["licence"] == "NOASSERTION (none given)" and shown["format"] == "tsv"
    assert "(n = " in shown["held-out Spearman's rho"]
    assert "No licence was given" in doc.xpath("string(//ul[contains(@class,'job-warnings')])")
    files = {a.text: a.get("href") for a in doc.xpath("//table[@class='job-files']//a")}
    assert sorted(files) == ["README.md", "judgments.tsv.gz", "manifest.json", "pairs.tsv.gz"]
    for name, url in files.items():
        body = b"".join(boss.get(url).streaming_content)
        if name != "manifest.json":
            assert hashlib.sha256(body).hexdigest() == release.manifest["files"][name]["sha256"]
    found = links(doc)
    assert found[f"release v1 of {release.resource.name}"] == f"/admin/scoring/release/{release.pk}/change/"
    assert found[f"dashboard of campaign {path['campaign'].name}"] == f"/research/campaigns/{path['campaign'].pk}/"
    assert_raw_only_in_details(doc, path["export"])
    # the JSON API keeps the raw result
    assert boss.get(f"/api/jobs/{path['export'].pk}/").json()["result"] == path["export"].result


def test_a_user_who_may_not_download_the_release_gets_no_file_links(client, path):
    user = get_user_model().objects.create_user("clerk", password="pw", is_staff=True)
    for app, codename in (("jobs", "view_job"), ("scoring", "add_release")):
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    client.force_login(user)
    doc = page(client, f"/admin/scoring/scoredresource/export/{path['export'].pk}/")
    assert not doc.xpath("//table[@class='job-files']") and not doc.xpath("//a[contains(@href,'/api/releases/')]")
    assert doc.xpath("string(//p[@class='job-done'])").startswith("Done: release v1 of res")  # as text, no link
    assert not doc.xpath("//a[contains(@href,'/research/campaigns/')]")  # nor the dashboard


def test_the_jobs_admin_page_of_a_generate_job_is_a_result_page(boss, storage_dir):
    resource = build_resource(name="gen")
    job = Job.objects.create(
        kind="generate",
        status=JobStatus.SUCCEEDED,
        label="generate gen",
        result={
            "resource": resource.pk,
            "name": "gen",
            "references": 8,
            "pairs": 18,
            "shards": ["a", "b", "c"],
            "campaign": None,
            "per_system": {"17": {"references": 8, "pairs": 8}, "21": {"references": 5, "pairs": 5}},
        },
    )
    response = boss.get(f"/admin/jobs/job/{job.pk}/change/")
    assert response.status_code == 200
    doc = lxml.html.fromstring(response.content.decode())
    outcome = doc.xpath("//div[@id='job-outcome']")[0]
    assert outcome.xpath("string(.//p[@class='job-done'])").startswith("Done: resource gen")
    shown = {r.xpath("string(th)"): r.xpath("string(td)") for r in outcome.xpath(".//table[@class='job-figures']//tr")}
    assert shown == {"references": "8", "pairs": "18", "shards": "3"}
    per_system = [[c.text_content() for c in r.xpath("td")] for r in outcome.xpath(".//table[@class='job-table']//tr")]
    assert per_system[1:] == [["17", "8", "8"], ["21", "5", "5"]]
    score = outcome.xpath(".//a[text()='score it with a regressor…']/@href")
    assert score == [f"/admin/scoring/scoredresource/score/?resource={resource.pk}"]
    assert '"per_system"' in outcome.xpath("string(.//details[@class='job-raw']/pre)")


def test_a_failed_job_says_why_and_shows_no_outcome(boss, storage_dir):
    job = Job.objects.create(
        kind="export_release", status=JobStatus.FAILED, error="disk full", params={"version": "v1"}
    )
    doc = page(boss, f"/admin/scoring/scoredresource/export/{job.pk}/")
    assert "The job failed: disk full" in doc.xpath("string(//p[@class='errornote'])")
    assert not doc.xpath("//p[@class='job-done']")
