"""Training tells where it is (issue 37): the admin's bar sat at "running 0%" for most of a minute and jumped to
100%, and ``train_regressor`` was silent, then printed an unrounded JSON line. Now each stage (the features,
the estimator's choice, the held-out test, each fold of the nested cross-validation, the refit) is named as it
starts, on the job's row (the API, the admin's bar) and on the command's stderr, and the command prints a
readable summary (``--json``: the line of before)."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from jobs.execution import job_progress, job_run_inline, job_start
from jobs.models import Job, JobChunk, JobStatus
from jobs.widgets import progress_bar
from scoring.regressor import RegressorTrainOptions
from scoring.regressor.job import KIND, SUMMARY_KEYS, train_regressor_launch

from .test_regressor import build_campaign

STAGES = [
    "reading the judgments",
    "computing the features: batch 1 of 1",
    "choosing the estimator (3-fold grouped CV on the training part)",
    "held-out test of ",
    *(f"nested cross-validation: fold {k} of 5" for k in range(1, 6)),
    "refitting on all judgments",
    "saving",
]


def _in_order(seen: list[str]) -> bool:
    at = 0
    for stage in seen:
        if at < len(STAGES) and stage.startswith(STAGES[at]):
            at += 1
    return at == len(STAGES)


@pytest.mark.slow
@pytest.mark.django_db
def test_a_training_job_names_each_stage_and_its_fraction_moves_through_them(tmp_path, storage_dir, settings):
    settings.JOBS_CHUNK_LEASE_S = 3600  # no lease renewal from another connection while this test's transaction is open
    build_campaign(tmp_path, n_refs=20)
    job = train_regressor_launch(
        campaign="synthetic", name="staged", options=RegressorTrainOptions(with_embeddings=False), wait=False
    )
    seen: list[tuple[str, float]] = []

    def look(job_id: int) -> None:
        p = job_progress(Job.objects.get(pk=job_id))  # what GET /api/jobs/<id>/ answers
        if p["status"] == "running" and (not seen or seen[-1] != (p["stage"], p["fraction"])):
            seen.append((p["stage"], p["fraction"]))

    done = job_run_inline(job_id=job.pk, on_progress=look)
    assert done.status == JobStatus.SUCCEEDED, done.error
    stages = [s for s, _ in seen]
    assert _in_order(stages), stages
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions)  # it only moves forward
    assert len({f for f in fractions if 0 < f < 1}) >= 8  # a step per stage, not 0% then 100%
    assert job_progress(done)["stage"] == ""  # a finished job names no stage


@pytest.mark.django_db
def test_the_api_and_the_admin_bar_show_the_stage_of_a_running_job(client):
    job = job_start(kind="selftest", params={"n": 10, "chunks": 1}, enqueue=False)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)
    JobChunk.objects.filter(job=job).update(
        status=JobStatus.RUNNING, done_units=4, total_units=10, stage="nested cross-validation: fold 2 of 5"
    )
    staff = get_user_model().objects.create_superuser("boss", password="pw")
    client.force_login(staff)
    body = client.get(f"/api/jobs/{job.pk}/").json()
    assert body["stage"] == "nested cross-validation: fold 2 of 5" and body["fraction"] == 0.4
    assert "running 40% — nested cross-validation: fold 2 of 5" in progress_bar(Job.objects.get(pk=job.pk))


@pytest.mark.slow
@pytest.mark.django_db
def test_the_command_names_its_stages_and_prints_a_readable_summary_or_json(tmp_path, storage_dir):
    build_campaign(tmp_path, n_refs=20)
    out, err = io.StringIO(), io.StringIO()
    call_command("train_regressor", "synthetic", "--name", "plain", "--no-embeddings", stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    assert _in_order([line.split("] ", 1)[1] for line in lines]), lines
    assert lines[0].startswith("training 'plain' on 'synthetic': [0/1 steps, ") and lines[-1].endswith("saving ...")
    text = out.getvalue()
    assert text.startswith("regressor 'plain' trained on campaign 'synthetic' (recipe base, estimator ")
    assert "held-out references: Spearman's rho " in text and "nested 5-fold grouped cross-validation" in text
    # 4 held-out references: no bootstrap "95% CI" over them (issue 48); the cross-validation's 20 keep theirs
    assert re.search(r"held-out references: Spearman's rho -?\d\.\d{3} \(no interval: too few references\)", text)
    assert re.search(r"cross-validation: Spearman's rho -?\d\.\d{3} \(95% CI ", text)
    figures = re.findall(r"-?\d+\.\d+", text.split("signature:")[0])
    assert figures and all(len(f.split(".")[1]) == 3 for f in figures)  # rounded, not 0.5789473684210527
    assert not text.lstrip().startswith("{")

    out = io.StringIO()
    call_command(
        "train_regressor", "synthetic", "--name", "machine", "--no-embeddings", "--cv-folds", "0", "--json",
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    assert list(json.loads(out.getvalue())) == list(SUMMARY_KEYS)


@pytest.mark.django_db
def test_async_says_which_job_started_and_json_keeps_its_line(tmp_path, storage_dir):
    build_campaign(tmp_path, n_refs=20)
    out = io.StringIO()
    call_command("train_regressor", "synthetic", "--name", "later", "--async", stdout=out, stderr=io.StringIO())
    job = Job.objects.get(kind=KIND)
    assert out.getvalue().startswith(f"job {job.pk} started (pending): training regressor 'later' on campaign")
    assert f"manage.py job wait {job.pk}" in out.getvalue()
    out = io.StringIO()
    call_command("train_regressor", "synthetic", "--name", "other", "--async", "--json", stdout=out)
    other = Job.objects.filter(kind=KIND).latest("pk")
    started = {"job": other.pk, "status": "pending", "name": "other", "campaign": "synthetic"}
    assert json.loads(out.getvalue()) == started


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_training_page_shows_the_stage_while_the_job_works(live_server, monkeypatch, tmp_path, storage_dir):
    from playwright.sync_api import expect, sync_playwright

    from .test_admin_browser import CHROMIUM_ARGS

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    campaign = build_campaign(tmp_path, n_refs=20)
    get_user_model().objects.create_superuser("boss", password="pw-for-the-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/login/?next=/admin/scoring/regressor/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw-for-the-browser")
            page.click("input[type=submit]")
            page.click("text=Train a regressor")
            page.select_option("#id_campaign", str(campaign.pk))
            page.fill("#id_name", "watched")
            page.uncheck("#id_with_embeddings")
            page.click("input[value=Train]")
            expect(page.locator("progress.job-progress")).to_have_count(1)
            shown: list[str] = []

            def watch(job_id: int) -> None:
                # the job holds here, in its third fold, while the page polls it (a worker would go on)
                stage = job_progress(Job.objects.get(pk=job_id))["stage"]
                if stage == "nested cross-validation: fold 3 of 5" and not shown:
                    text = page.locator("[data-job-text]")
                    expect(text).to_contain_text("— nested cross-validation: fold 3 of 5", timeout=20_000)
                    shown.append(text.inner_text())

            job = job_run_inline(job_id=Job.objects.get(kind=KIND).pk, on_progress=watch)
            assert job.status == JobStatus.SUCCEEDED, job.error
            percent = int(re.match(r"running (\d+)%", shown[0])[1])
            assert 0 < percent < 100, shown
            expect(page.locator("p.job-done")).to_contain_text("regressor watched", timeout=20_000)
        finally:
            browser.close()
