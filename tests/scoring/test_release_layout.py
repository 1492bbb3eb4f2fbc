"""``export_release --layout parabank2``: the pairs as ParaBank 2's TSV (issue 39): a line per reference holding
the first paraphrase's score, the reference and at most five paraphrases, a diverse resource's ranks in order, other
pairs by predicted similarity; only as ``--format tsv``; export jobs stored before the layout existed still run."""

import csv
import gzip
import json

import pytest
from django.core.management import CommandError, call_command

from jobs.execution import job_run_inline, job_start
from jobs.models import JobStatus
from jobs.params import to_json
from scoring.forms import ExportReleaseForm
from scoring.jobs_api import ExportInSerializer
from scoring.models import Release
from scoring.releases.checks import ReleaseError
from scoring.releases.columns import PAIR_COLUMNS, PARABANK2_COLUMNS, PARABANK2_FILE
from scoring.releases.export import release_write
from scoring.releases.job import KIND, export_release_start, job_params
from scoring.releases.params import ReleaseExportParams
from scoring.releases.writers import candidate_rank, parabank2_paraphrases

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with
from .test_release_params import STORED_KEYS
from .test_releases import scored  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def cells(path):
    """A gzip TSV's lines as lists of cells, read without quoting (as the card says to read them)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def paraforge_pairs(path):
    """``pairs.tsv.gz`` as reference -> [(paraphrase, score cell, systems)] in file order."""
    rows = cells(path)
    assert tuple(rows[0]) == PAIR_COLUMNS
    by_reference: dict[str, list[tuple[str, str, str]]] = {}
    for row in rows[1:]:
        r = dict(zip(PAIR_COLUMNS, row))
        by_reference.setdefault(r["reference"], []).append((r["paraphrase"], r["score"], r["systems"]))
    return by_reference


def by_score(pairs):
    """Best first by score, empty scores last, ties in file order: the layout's order for a beam resource."""
    return sorted(pairs, key=lambda p: (p[1] == "", -float(p[1] or 0)))


def test_the_parabank2_layout_round_trips(scored, tmp_path):  # noqa: F811
    """The same scored resource in both layouts: each parabank2 line holds the references, paraphrases and score
    of the paraforge layout's pairs, the best (by predicted similarity) first."""
    paraforge = release_write(scored=scored, out_dir=tmp_path / "pf", version="v1")
    parabank2 = release_write(scored=scored, out_dir=tmp_path / "pb2", version="v1", layout="parabank2")
    assert sorted(p.name for p in (tmp_path / "pb2").iterdir()) == [
        "README.md",
        "judgments.tsv.gz",
        "manifest.json",
        PARABANK2_FILE,
    ]
    pairs = paraforge_pairs(tmp_path / "pf" / "pairs.tsv.gz")
    lines = cells(tmp_path / "pb2" / PARABANK2_FILE)
    assert [line[1] for line in lines] == list(pairs)  # no header; a line per reference, in the same order
    for score, reference, *paraphrases in lines:
        expected = by_score(pairs[reference])[:5]
        assert paraphrases == [text for text, _, _ in expected]
        assert score == expected[0][1]  # the first paraphrase's score cell, as the paraforge layout writes it
    # reference 1 is over the stand-in regressor's limit: its line's score is empty, as its pairs' are
    unscored = [line for line in lines if line[1].startswith("He left the house")]
    assert len(unscored) == 1 and unscored[0][0] == ""
    # at most 3 pairs a reference here: the same pairs are released, so the counts agree
    assert parabank2["counts"] == paraforge["counts"]
    assert (parabank2["layout"], parabank2["pairs_format"], paraforge["layout"]) == ("parabank2", "tsv", "paraforge")
    assert parabank2["columns"][PARABANK2_FILE] == list(PARABANK2_COLUMNS)
    card = (tmp_path / "pb2" / "README.md").read_text()
    assert "layout `parabank2`" in card and "ParaBank 2's TSV" in card and f"### Columns of `{PARABANK2_FILE}`" in card
    assert "layout `paraforge`" in (tmp_path / "pf" / "README.md").read_text()


def diverse_records(n_refs: int = 3, n_ranks: int = 7) -> list[dict]:
    """A diverse resource's records: each reference's outputs of ranks 1..``n_ranks`` (systems "r1" ...), stored
    in a shuffled order, their texts made so that predicted similarity does not follow the rank."""
    records = []
    for i in range(n_refs):
        reference = f"The committee approved the new budget on day {i} of the meeting."
        words = reference.rstrip(".").split()
        candidates = []
        for rank in (3, 1, 7, 5, 2, 6, 4)[:n_ranks]:
            # rank r keeps the first 3 + (r * 2) % 9 words: overlap (the score) and rank disagree
            text = " ".join(words[: 3 + (rank * 2) % 9]) + f" rank{rank}."
            candidates.append({"text": text, "nll": 1.0 + rank / 10, "systems": [f"r{rank}"], "constraints": {}})
        records.append({"ref_index": i, "reference": reference, "source": "", "length": 12, "candidates": candidates})
    return records


def test_a_diverse_resource_gives_its_ranks_in_order_at_most_five(storage_dir, tmp_path):
    resource = build_resource(name="diverse", shards=[diverse_records()])
    diverse = score_with(resource, make_regressor(), OverlapScorer())
    manifest = release_write(scored=diverse, out_dir=tmp_path / "d", version="v1", layout="parabank2")
    lines = cells(tmp_path / "d" / PARABANK2_FILE)
    assert len(lines) == 3
    release_write(scored=diverse, out_dir=tmp_path / "pf", version="v1")
    pairs = paraforge_pairs(tmp_path / "pf" / "pairs.tsv.gz")
    for score, reference, *paraphrases in lines:
        assert [p.rsplit(" ", 1)[1] for p in paraphrases] == ["rank1.", "rank2.", "rank3.", "rank4.", "rank5."]
        rank1 = next(p for p in pairs[reference] if p[2] == "r1")
        assert score == rank1[1] != ""  # the rank-1 paraphrase's predicted similarity
        assert paraphrases != [text for text, _, _ in by_score(pairs[reference])[:5]]  # rank, not score, decides
    assert manifest["counts"]["pairs"] == 15 and manifest["counts"]["pairs_read"] == 21  # ranks 6 and 7 left out


def test_a_beam_resource_gives_its_five_best_scored_pairs(storage_dir, tmp_path):
    records = diverse_records(n_refs=1)
    for c in records[0]["candidates"]:
        c["systems"] = [str(int(c["systems"][0][1:]) + 10)]  # Tab. 3 systems, no ranks
    beam = score_with(build_resource(name="beam", shards=[records]), make_regressor(), OverlapScorer())
    release_write(scored=beam, out_dir=tmp_path / "b", version="v1", layout="parabank2")
    release_write(scored=beam, out_dir=tmp_path / "pf", version="v1")
    [(score, reference, *paraphrases)] = cells(tmp_path / "b" / PARABANK2_FILE)
    best = by_score(paraforge_pairs(tmp_path / "pf" / "pairs.tsv.gz")[reference])
    assert len(best) == 7 and paraphrases == [text for text, _, _ in best[:5]] and score == best[0][1]


def test_ranks_come_first_then_scores_and_ties_keep_their_order():
    kept = [
        {"text": "a", "systems": ["17"], "score": 90.0},
        {"text": "b", "systems": ["r2"], "score": 10.0},
        {"text": "c", "systems": ["28", "r1"], "score": 20.0},
        {"text": "d", "systems": ["17"], "score": None},
        {"text": "e", "systems": ["21"], "score": 90.0},
        {"text": "f", "systems": ["21"], "score": 95.0},
    ]
    assert [c["text"] for c in parabank2_paraphrases(kept)] == ["c", "b", "f", "a", "e"]
    assert [candidate_rank({"systems": s}) for s in (["r3", "r12"], ["17"], ["rx", "r0"], [])] == [3, None, None, None]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_parabank2_is_refused_in_another_format_with_a_clear_error(scored, tmp_path, fmt):  # noqa: F811
    message = f"layout parabank2 is ParaBank 2's TSV and is written only as format tsv, not {fmt}"
    with pytest.raises(ReleaseError, match=message):
        ReleaseExportParams(resource=1, format=fmt, layout="parabank2")
    with pytest.raises(ReleaseError, match=message):
        release_write(scored=scored, out_dir=tmp_path / "w", version="v1", fmt=fmt, layout="parabank2")
    with pytest.raises(CommandError, match=message):
        call_command("export_release", "res", "--out", str(tmp_path / "c"), "--format", fmt, "--layout", "parabank2")
    form = ExportReleaseForm(data={"version": "v1", "format": fmt, "layout": "parabank2"})
    assert not form.is_valid() and message in form.non_field_errors()[0]
    assert not (tmp_path / "w").exists() and not (tmp_path / "c").exists() and not Release.objects.exists()
    with pytest.raises(ReleaseError, match="unknown layout 'parabank'"):
        ReleaseExportParams(resource=1, layout="parabank")


def test_the_command_writes_the_layout(scored, tmp_path):  # noqa: F811
    out = tmp_path / "cmd"
    call_command("export_release", "res", "--out", str(out), "--layout", "parabank2")
    assert json.loads((out / "manifest.json").read_text())["layout"] == "parabank2"
    assert len(cells(out / PARABANK2_FILE)) == 8


def test_an_export_job_without_a_layout_runs_in_the_default_layout(scored):  # noqa: F811
    old = {"format": "tsv", "filters": "", "min_score": None, "regressor": None, "license": None}
    job = job_start(kind=KIND, params={"resource": scored.resource.pk, "version": "v1", **old})
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    manifest = Release.objects.get(job=job).manifest
    assert manifest["layout"] == "paraforge" and "pairs.tsv.gz" in manifest["files"]
    assert job_params(job).layout == "paraforge" and "layout" not in to_json(job_params(job))


def test_the_layout_is_stored_only_when_asked_for_and_the_job_writes_it(scored):  # noqa: F811
    job = export_release_start(ReleaseExportParams(resource=scored.resource.pk, layout="parabank2"))
    assert list(job.params) == [*STORED_KEYS, "layout"] and job.params["layout"] == "parabank2"
    done = job_run_inline(job_id=job.pk)
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert set(Release.objects.get(job=job).manifest["files"]) == {
        PARABANK2_FILE,
        "judgments.tsv.gz",
        "README.md",
    }
    assert list(export_release_start(ReleaseExportParams(resource=scored.resource.pk, version="v9")).params) == (
        STORED_KEYS
    )


def test_the_form_and_the_api_offer_the_layout_with_its_default(scored, admin_client):  # noqa: F811
    field = ExportInSerializer().fields["layout"]
    assert field.default == "paraforge" and not field.required
    form = ExportReleaseForm(data={"version": "v1", "format": "tsv"})  # an older client: no layout
    assert form.is_valid(), form.errors
    assert ReleaseExportParams(resource=1, **form.export_options()).layout == "paraforge"
    url = f"/api/scored-resources/{scored.pk}/releases/"
    refused = admin_client.post(url, {"version": "v1", "format": "jsonl", "layout": "parabank2"}, "application/json")
    assert refused.status_code == 400 and "only as format tsv" in json.dumps(refused.json())
    answer = admin_client.post(url, {"version": "v1", "layout": "parabank2"}, "application/json")
    assert answer.status_code == 202, answer.content
    assert job_run_inline(job_id=answer.json()["job"]).status == JobStatus.SUCCEEDED
    assert Release.objects.get().manifest["layout"] == "parabank2"
