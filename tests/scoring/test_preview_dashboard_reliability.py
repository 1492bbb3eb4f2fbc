"""The batch preview's reliability and the dashboard's are one statistic (issue 37.1): the default design
(3 assignments) previewed, made, filled with judgments that follow the preview's noise model, and the
previewed figure found on the campaign's dashboard, named the same and near the previewed median."""

from __future__ import annotations

import math
import random
import re

import pytest

from annotation.admin import BatchForm
from annotation.batches.preview import PARABANK_NOISE
from annotation.models import Assignment, AssignmentStatus, Batch, Hit, Judgment, Verification, Worker
from annotation.quality.split_half import split_half_label
from tests.annotation.builders import sample_campaign

pytestmark = pytest.mark.django_db


def _default_design(campaign) -> dict:
    """The batch form's own initial values: what a researcher sends who changes nothing."""
    form = BatchForm(campaign=campaign)
    data = {}
    for name, field in form.fields.items():
        value = form.get_initial_for_field(field, name)
        if value is not None:
            data[name] = str(value)
    return {**data, "provider": "local"}


def _text(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:td|tr)>', html, re.S)
    assert found, element_id
    return " ".join(re.sub(r"<[^>]+>", " ", found[1]).split())


def _fill(batch: Batch, seed: int = 5) -> None:
    """Every HIT's 3 assignments done by 3 different workers of 9; a real candidate's score is its true
    similarity plus one rater's noise, ParaBank's variance components (the preview's model), on the slider."""
    rng = random.Random(seed)
    workers = [Worker.objects.create(provider="local", external_id=f"annotator{i}") for i in range(9)]
    truth: dict[int, float] = {}
    for hit in Hit.objects.filter(batch=batch).prefetch_related("items"):
        for n, worker in enumerate(rng.sample(workers, hit.max_assignments)):
            assignment = Assignment.objects.create(
                campaign=batch.campaign,
                hit=hit,
                worker=worker,
                provider="local",
                external_assignment_id=f"{hit.pk}-{n}",
                status=AssignmentStatus.SUBMITTED,
                verification=Verification.VERIFIED,
            )
            judgments = []
            for item in hit.items.all():
                if item.is_attention_check:
                    score = 100
                elif item.is_degraded_check:
                    score = rng.randint(0, 15)
                else:
                    true = truth.setdefault(item.candidate_id, rng.gauss(55, math.sqrt(PARABANK_NOISE.between_var)))
                    score = round(min(100, max(0, true + rng.gauss(0, math.sqrt(PARABANK_NOISE.noise_var)))))
                judgments.append(
                    Judgment(
                        assignment=assignment, candidate_id=item.candidate_id, worker=worker, score=score, fluency=2
                    )
                )
            Judgment.objects.bulk_create(judgments)


def test_the_previewed_reliability_is_the_dashboards_figure_for_the_default_design(admin_client):
    campaign = sample_campaign(buckets=(5, 10, 20, 40), refs_per_bucket=12, candidates=7)
    url = f"/admin/annotation/campaign/{campaign.pk}/batch/"
    design = _default_design(campaign)
    assert design["assignments"] == "3" and design["lengths"] == "5,10,20,40"

    preview = admin_client.post(url, {**design, "preview": "Preview"}).content.decode()
    shown = _text(preview, "preview-reliability")
    label = split_half_label(3)
    assert label == "Split-half reliability, stepped up to 3 ratings (Spearman-Brown)"
    found = re.search(re.escape(label) + r": about ([\d.]+) .*?: ([\d.]+) to ([\d.]+)\)", shown)
    assert found, shown
    median, low, high = (float(x) for x in found.groups())
    assert low < median < high

    made = admin_client.post(url, {**design, "create": "Create draft batch"})
    assert made.status_code == 302
    batch = Batch.objects.get()
    assert batch.settings["assignments"] == 3
    _fill(batch)

    dashboard = admin_client.get(f"/research/campaigns/{campaign.pk}/?min_judgments=0").content.decode()
    row = re.search(r'<tr id="split-half-reliability"><td>(.*?)</td><td class="num">(.*?)</td>', dashboard, re.S)
    assert row, "no split-half reliability row on the dashboard"
    assert row[1] == label  # the same statistic, stepped up to the same number of ratings
    assert row[2] != "-"  # it was "0 candidates with >= 4 judgments: -" with 3 assignments
    # judgments that follow the model give what the preview predicted: within the width of the previewed 90%
    # range of its median (a one-batch figure outside the 90% range itself happens one time in ten; this far
    # out, about one in a thousand)
    assert abs(float(row[2]) - median) <= high - low
    assert "candidates with &ge; 2 judgments" in dashboard
