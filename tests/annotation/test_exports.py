import csv
import io

import pytest

from annotation.batches.exports import batch_results_csv
from annotation.hits.submissions import JudgmentInput, assignment_submit
from annotation.hits.tokens import submission_token_make

from .builders import published_batch, sample_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch():
    campaign = sample_campaign(buckets=(5,), refs_per_bucket=2, candidates=4)
    batch = published_batch(campaign, attention_rate=1.0)
    for hit in batch.hits.all():
        items = list(hit.items.order_by("position"))
        for worker in ("W1", "W2"):
            aid = f"{worker}-{hit.pk}"
            assignment_submit(
                hit=hit,
                assignment_id=aid,
                worker_id=worker,
                comment=f'note, "{worker}"',
                token=submission_token_make(hit_id=hit.pk, assignment_id=aid, worker_id=worker),
                judgments=[
                    JudgmentInput(
                        candidate=i.candidate_id, score=None if k == 0 else 10 * k, fluency=0 if k == 0 else 2
                    )
                    for k, i in enumerate(items)
                ],
            )
    return batch


def test_results_csv_has_one_row_per_assignment_with_inputs_and_answers(batch):
    out = io.StringIO()
    assert batch_results_csv(batch=batch, out=out) == 4
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 4
    first = rows[0]
    hit = batch.hits.get(pk=int(first["InternalHITId"]))
    items = list(hit.items.order_by("position"))
    assert first["WorkerId"] in ("W1", "W2") and first["AssignmentStatus"] == "submitted"
    assert first["Input.reference"] == hit.reference.text and first["SubmitTime"]
    for k, item in enumerate(items, start=1):
        assert first[f"Input.cand{k}_id"] == str(item.candidate_id)
        assert first[f"Input.cand{k}"] == item.candidate.text
        assert first[f"Input.cand{k}_attention"] == str(int(item.is_attention_check))
    assert first["Answer.cand1_score"] == "" and first["Answer.cand1_fluency"] == "0"
    assert first["Answer.cand2_score"] == "10" and first["Answer.cand2_fluency"] == "2"
    assert first["Answer.comment"].startswith('note, "W')
    assert first["Answer.cand1_moved"] == ""  # submitted by code that did not say; the page always says
    assert sum(r[f"Input.cand{k}_attention"] == "1" for r in rows for k in range(1, 6)) == 4


def test_results_csv_api_is_staff_only(client, admin_client, batch):
    url = f"/api/batches/{batch.pk}/results.csv"
    assert client.get(url).status_code == 403
    response = admin_client.get(url, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert len(list(csv.reader(io.StringIO(response.content.decode())))) == 5


def test_admin_export_action(admin_client, batch):
    response = admin_client.post(
        "/admin/annotation/batch/", {"action": "export_results", "_selected_action": [batch.pk]}
    )
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.content.decode().startswith('"HITId","InternalHITId","AssignmentId","WorkerId"')
