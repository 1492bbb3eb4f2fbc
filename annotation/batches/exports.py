"""A batch's raw judgments as an MTurk-style results CSV (one row per assignment, Input.* / Answer.*).

Like the file MTurk's requester site gives for a batch: ``HITId``, ``AssignmentId``, ``WorkerId``,
``AssignmentStatus``, ``AcceptTime``, ``SubmitTime``, ``WorkTimeInSeconds``, then ``Input.*`` (the
reference and, per position, candidate id, text, whether it is the attention check and whether it is a
degraded check, ``Input.candK_degraded``: quality control, never a system's output) and
``Answer.*`` (per position the slider score, empty when N/A, and the fluency 0/1/2; the comment), and
``Verification``: ``verified``, ``unverified`` (a crowd submission the platform has not confirmed yet) or
``flagged`` (the platform denied it): only verified rows count anywhere else; last, per position,
``Answer.candK_moved``: 1 when the worker moved the slider, 0 when they clicked it to keep its starting
value, empty when the page did not say.
Only submitted, approved and rejected assignments are written. The file is opened in spreadsheets and
holds text from workers and corpora, so it is written by ``api.csv_safety`` (no text cell becomes
a formula; text cells quoted, numbers as numbers).
"""

from __future__ import annotations

from typing import TextIO

from annotation.models import SUBMITTED_STATUSES, Assignment, Batch, Hit, visible_id
from api.csv_safety import spreadsheet_csv_writer

# the file names workers and holds their judgments and comments: who may download it, wherever from
RESULTS_PERMS = ("annotation.view_batch", "annotation.view_assignment", "annotation.view_judgment")


def _iso(value) -> str:
    return value.isoformat() if value else ""


def batch_results_csv(*, batch: Batch, out: TextIO) -> int:
    """Write the CSV to ``out``; returns the number of assignment rows."""
    hits = {
        h.pk: h
        for h in Hit.objects.filter(batch=batch).select_related("reference").prefetch_related("items__candidate")
    }
    width = max((len(h.items.all()) for h in hits.values()), default=0)
    header = [
        "HITId",
        "InternalHITId",
        "AssignmentId",
        "WorkerId",
        "AssignmentStatus",
        "AcceptTime",
        "SubmitTime",
        "WorkTimeInSeconds",
        "Input.ref_id",
        "Input.reference",
    ]
    for k in range(1, width + 1):
        header += [f"Input.cand{k}_id", f"Input.cand{k}", f"Input.cand{k}_attention", f"Input.cand{k}_degraded"]
    for k in range(1, width + 1):
        header += [f"Answer.cand{k}_score", f"Answer.cand{k}_fluency"]
    header += ["Answer.comment", "Verification"]
    # last, so that the MTurk-style columns keep their places: 1 moved, 0 clicked to keep its value, empty unknown
    header += [f"Answer.cand{k}_moved" for k in range(1, width + 1)]
    writer = spreadsheet_csv_writer(out, lineterminator="\n")
    writer.writerow(header)
    rows = 0
    assignments = (
        Assignment.objects.filter(hit__batch=batch, status__in=SUBMITTED_STATUSES)
        .select_related("worker")
        .prefetch_related("judgments")
        .order_by("hit_id", "id")
    )
    for a in assignments:
        hit = hits[a.hit_id]
        items = list(hit.items.all())
        given = {j.candidate_id: j for j in a.judgments.all()}
        seconds = int((a.submitted_at - a.accepted_at).total_seconds()) if a.submitted_at and a.accepted_at else ""
        row = [
            hit.external_hit_id or hit.pk,
            hit.pk,
            visible_id(a.external_assignment_id),
            visible_id(a.worker.external_id),
            a.status,
            _iso(a.accepted_at),
            _iso(a.submitted_at),
            seconds,
            hit.reference.ref_id,
            hit.reference.text,
        ]
        for k in range(width):
            item = items[k] if k < len(items) else None
            row += (
                [item.candidate_id, item.candidate.text, int(item.is_attention_check), int(item.is_degraded_check)]
                if item
                else ["", "", "", ""]
            )
        for k in range(width):
            j = given.get(items[k].candidate_id) if k < len(items) else None
            row += ["" if j is None or j.score is None else j.score, "" if j is None else j.fluency]
        row += [a.comment, a.verification]
        for k in range(width):
            j = given.get(items[k].candidate_id) if k < len(items) else None
            row.append("" if j is None or j.slider_moved is None else int(j.slider_moved))
        writer.writerow(row)
        rows += 1
    return rows
