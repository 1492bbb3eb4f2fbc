import csv
import gzip
import hashlib
import io
import json
import tracemalloc

import boto3
import pytest
from django.core.management import CommandError, call_command
from moto import mock_aws

from annotation.models import Campaign
from infra.shards import write_jsonl_gz
from jobs.models import Job, JobStatus
from scoring.models import Release, ScoredResource
from scoring.releases.columns import JUDGMENT_COLUMNS, PAIR_COLUMNS
from scoring.releases.export import release_write
from scoring.releases.filters import FilterError, ngram_overlap, parse_filters
from tests.annotation.parabank_data import import_contract

from .resource_data import OverlapScorer, build_resource, make_regressor, records, score_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def scored(storage_dir, tmp_path):
    """A 3-shard resource of 8 references / 18 pairs (one a copy of its reference), scored (reference 1 skipped),
    with the contract campaign linked to its job."""
    job = Job.objects.create(kind="generate", status=JobStatus.SUCCEEDED)
    import_contract(tmp_path)
    Campaign.objects.filter(name="contract").update(job=job)
    resource = build_resource(job=job)
    return score_with(resource, make_regressor(), OverlapScorer(max_words=10))


def export(*args):
    out = io.StringIO()
    call_command("export_release", *args, stdout=out)
    return json.loads(out.getvalue())


def tsv_rows(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_export_tsv_release_files_and_manifest(scored, tmp_path):
    out = tmp_path / "rel"
    result = export("res", "--out", str(out))
    assert result["version"] == "v1" and result["counts"]["pairs"] == 17 and result["regressor"] == "overlap"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "judgments.tsv.gz", "manifest.json", "pairs.tsv.gz"]
    manifest = json.loads((out / "manifest.json").read_text())
    for name, described in manifest["files"].items():
        assert described["name"] == name and described["sha256"] == sha256(out / name)
        assert described["bytes"] == (out / name).stat().st_size
    assert manifest["counts"] == {
        "references_read": 8,
        "pairs_read": 18,
        "references": 8,
        "pairs": 17,
        "pairs_unscored": 2,
        "copies_read": 1,
        "copies": 0,
        "near_copies_read": 0,
        "near_copies": 0,
        "non_words_read": 0,  # its corpus has no IDF table: not screened (test_release_contents.py)
        "non_words": 0,
        "long_reference_pairs": 0,
        "judgments": 7,
        "campaigns": 1,
    }
    assert manifest["regressor"]["name"] == "overlap" and manifest["regressor"]["spearman_test"] == 0.71
    assert manifest["regressor"]["signature"] == {"features": "lexical", "estimator": "test"}
    assert manifest["generation"]["beam"] == 4 and manifest["campaigns"] == ["contract"]
    assert [s["index"] for s in manifest["scored_shards"]] == [0, 1, 2]

    rows = tsv_rows(out / "pairs.tsv.gz")
    assert tuple(rows[0]) == PAIR_COLUMNS and len(rows) == 18
    first = dict(zip(PAIR_COLUMNS, rows[1]))
    assert first["ref_index"] == "0" and first["paraphrase"] == "How frequently do earthquakes happen in this area?"
    assert first["systems"] == "17 28" and first["source"] == "Quelle 0."
    assert json.loads(first["constraints"])["17"]["positive"] == [["how"]]
    assert 0 <= float(first["score"]) <= 100 and float(first["nll"]) == 1.5
    # reference 1 (12 words) is over the stand-in regressor's limit: its pairs have an empty score cell
    unscored = [r for r in rows[1:] if r[PAIR_COLUMNS.index("score")] == ""]
    assert len(unscored) == 2 and {r[0] for r in unscored} == {"1"}
    # pairs grouped by reference in shard order
    assert [int(r[0]) for r in rows[1:]] == sorted(int(r[0]) for r in rows[1:])

    judgments = tsv_rows(out / "judgments.tsv.gz")
    assert tuple(judgments[0]) == JUDGMENT_COLUMNS and len(judgments) == 8
    by = [dict(zip(JUDGMENT_COLUMNS, r)) for r in judgments[1:]]
    assert {r["campaign"] for r in by} == {"contract"}
    assert sorted({r["worker_id_anon"] for r in by}) == ["1", "2", "3"]
    na = [r for r in by if r["paraphrase"] == "He left very soon." and r["human_score"] == ""]
    assert len(na) == 1 and na[0]["gm"] == "0"  # the N/A slider stays empty, not 0
    merged = [r for r in by if r["paraphrase"] == "It is fine now."]
    assert {r["systems"] for r in merged} == {"0 28"}

    release = Release.objects.get()
    assert release.version == "v1" and release.location == str(out.resolve())
    assert release.manifest == manifest


def test_same_inputs_give_identical_bytes(scored, tmp_path):
    a = release_write(
        scored=scored,
        out_dir=tmp_path / "a",
        version="v7",
        fmt="jsonl",
        filters=parse_filters("len=5-40,overlap=0-0.95,rerank=dissimilar"),
    )
    b = release_write(
        scored=scored,
        out_dir=tmp_path / "b",
        version="v7",
        fmt="jsonl",
        filters=parse_filters("len=5-40,overlap=0-0.95,rerank=dissimilar"),
    )
    assert a == b
    for name in ("pairs.jsonl.gz", "judgments.tsv.gz", "README.md", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # and through the CLI: two versions, the same data files and SHA-256s
    one = export("res", "--out", str(tmp_path / "c"))
    two = export("res", "--out", str(tmp_path / "d"))
    assert (one["version"], two["version"]) == ("v1", "v2")
    card = one["files"].pop("README.md") != two["files"].pop("README.md")  # the card names its version
    assert one["files"] == two["files"] and card
    assert (tmp_path / "c" / "pairs.tsv.gz").read_bytes() == (tmp_path / "d" / "pairs.tsv.gz").read_bytes()


def test_jsonl_groups_paraphrases_per_reference(scored, tmp_path):
    export("res", "--out", str(tmp_path / "j"), "--format", "jsonl", "--version", "2026.1")
    with gzip.open(tmp_path / "j" / "pairs.jsonl.gz", "rt") as fh:
        refs = [json.loads(line) for line in fh]
    assert len(refs) == 8 and refs[0]["reference"] == "How often do earthquakes occur in this region?"
    assert [p["paraphrase"] for p in refs[2]["paraphrases"]][0] == "Yesterday the committee passed the new budget."
    assert set(refs[0]["paraphrases"][0]) == {
        "paraphrase",
        "systems",
        "constraints",
        "nll",
        "score",
        "raw_score",
        "caveat",
    }
    assert Release.objects.get().version == "2026.1"


def test_min_score_and_length_filters(scored, tmp_path):
    result = export("res", "--out", str(tmp_path / "f"), "--min-score", "60", "--filters", "len=8-9")
    rows = [dict(zip(PAIR_COLUMNS, r)) for r in tsv_rows(tmp_path / "f" / "pairs.tsv.gz")[1:]]
    assert rows and all(float(r["score"]) >= 60 and 8 <= int(r["length"]) <= 9 for r in rows)
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text())
    assert manifest["filters"]["min_score"] == 60 and manifest["filters"]["length"] == {"min": 8, "max": 9}
    assert result["counts"]["pairs"] == len(rows) < 18
    assert result["counts"]["pairs_unscored"] == 0  # a minimum score drops unscored pairs


def test_overlap_bounds_rerank_and_top(scored, tmp_path):
    export("res", "--out", str(tmp_path / "o"), "--filters", "overlap=0.2-0.9", "rerank=dissimilar,top=1")
    rows = [dict(zip(PAIR_COLUMNS, r)) for r in tsv_rows(tmp_path / "o" / "pairs.tsv.gz")[1:]]
    assert all(0.2 <= ngram_overlap(r["reference"], r["paraphrase"], 1) <= 0.9 for r in rows)
    assert len({r["ref_index"] for r in rows}) == len(rows)  # top=1: one paraphrase per reference
    # the near-copy of reference 0 (overlap 1.0) is gone; the most dissimilar survivor comes first
    assert "How often do earthquakes occur in this region?" not in {r["paraphrase"] for r in rows}
    ref2 = [r["paraphrase"] for r in rows if r["ref_index"] == "2"]
    assert ref2 == ["The new budget was approved by the committee."]


def test_ngram_overlap_is_wietings():
    # 3 shared unigrams, the shorter sentence has 3: overlap 1 even though the reference is longer
    assert ngram_overlap("the cat sat on the mat", "the cat sat", 1) == 1.0
    assert ngram_overlap("a b c d", "a b x y", 2) == pytest.approx(1 / 3)
    assert ngram_overlap("a", "a b", 2) is None


@pytest.mark.parametrize(
    "spec, message",
    [
        ("len=40-5", "lower bound is above"),
        ("overlap=0.2-8", "fractions"),
        ("colour=red", "unknown filter"),
        ("rerank=random", "one of dissimilar"),
        ("top=0", "positive integer"),
        ("len", "key=value"),
        ("len=5-40,len=1-2", "given twice"),
        ("score=200", "run from 0 to 100"),
        ("score=-5", "run from 0 to 100"),
    ],
)
def test_bad_filters_are_refused_before_writing(scored, tmp_path, spec, message):
    with pytest.raises(CommandError, match=message):
        export("res", "--out", str(tmp_path / "bad"), "--filters", spec)
    assert not (tmp_path / "bad").exists() and not Release.objects.exists()


def test_min_score_twice_must_agree():
    with pytest.raises(FilterError, match="disagree"):
        parse_filters("score=50", min_score=60)
    assert parse_filters("score=50", min_score=50).min_score == 50


def test_refusals_lose_nothing(scored, tmp_path):
    export("res", "--out", str(tmp_path / "r"))
    before = (tmp_path / "r" / "pairs.tsv.gz").read_bytes()
    with pytest.raises(CommandError, match="already holds a release"):
        export("res", "--out", str(tmp_path / "r"))
    with pytest.raises(CommandError, match="'v1' of 'res' already exists"):
        export("res", "--out", str(tmp_path / "r2"), "--version", "v1")
    with pytest.raises(CommandError, match="no completed scoring by regressor 'nope'"):
        export("res", "--out", str(tmp_path / "r3"), "--regressor", "nope")
    with pytest.raises(CommandError, match="no resource named or numbered 'zzz'"):
        export("zzz", "--out", str(tmp_path / "r4"))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me\n")
    with pytest.raises(CommandError, match="is a file, not a folder"):
        export("res", "--out", str(a_file))
    with pytest.raises(CommandError, match="a part of that path is a file"):
        export("res", "--out", str(a_file / "r5"))
    with pytest.raises(CommandError, match="--min-score must be between 0 and 100, not 200"):
        export("res", "--out", str(tmp_path / "r6"), "--min-score", "200")
    assert a_file.read_text() == "keep me\n" and not (tmp_path / "r6").exists()
    assert (tmp_path / "r" / "pairs.tsv.gz").read_bytes() == before and Release.objects.count() == 1


def test_unscored_resource_is_refused(storage_dir, tmp_path):
    build_resource(name="raw")
    with pytest.raises(CommandError, match="no completed scoring"):
        export("raw", "--out", str(tmp_path / "x"))


@mock_aws
def test_upload_to_s3(scored, tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="releases")
    result = export("res", "--out", str(tmp_path / "s"), "--upload", "s3://releases/paraforge/res/v1")
    assert result["location"] == "s3://releases/paraforge/res/v1"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="releases")["Contents"])
    assert keys == [
        "paraforge/res/v1/README.md",
        "paraforge/res/v1/judgments.tsv.gz",
        "paraforge/res/v1/manifest.json",
        "paraforge/res/v1/pairs.tsv.gz",
    ]
    body = s3.get_object(Bucket="releases", Key="paraforge/res/v1/pairs.tsv.gz")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == result["files"]["pairs.tsv.gz"]
    with pytest.raises(CommandError, match="already holds a release"):
        export("res", "--out", str(tmp_path / "s2"), "--upload", "s3://releases/paraforge/res/v1")


def _scored_resource_of(n_refs: int, name: str) -> ScoredResource:
    """Scored shards written directly (10 paraphrases per reference) for the memory test."""
    resource = build_resource(name=name, shards=[])
    job = Job.objects.create(kind="score_resource", status=JobStatus.SUCCEEDED)
    scored = ScoredResource.objects.create(resource=resource, regressor=make_regressor(f"r-{name}"), job=job)
    entries = []
    per_shard = n_refs // 2
    for index in range(2):

        def gen(index=index):
            for i in range(index * per_shard, (index + 1) * per_shard):
                rec = records(1)[0]
                rec["ref_index"], rec["reference"] = i, f"reference number {i} is here today"
                rec["candidates"] = [
                    {
                        "text": f"paraphrase {j} of number {i}",
                        "nll": 1.0 + j,
                        "systems": ["17"],
                        "constraints": {},
                        "score": float(j * 10),
                    }
                    for j in range(10)
                ]
                yield rec

        info = write_jsonl_gz(f"scored/{scored.pk}/shard-{index:05d}.jsonl.gz", gen())
        entries.append({"index": index, "key": info["key"], "n_pairs": per_shard * 10, "sha256": info["sha256"]})
    scored.shards, scored.n_pairs = entries, n_refs * 10
    scored.save()
    return scored


def _peak(scored, out):
    tracemalloc.start()
    try:
        manifest = release_write(scored=scored, out_dir=out, version="v1", filters=parse_filters("plen=0-5"))
        return manifest, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_memory_stays_flat(storage_dir, tmp_path):
    small, large = _scored_resource_of(400, "small"), _scored_resource_of(4000, "large")
    m_small, peak_small = _peak(small, tmp_path / "small")
    m_large, peak_large = _peak(large, tmp_path / "large")
    assert m_large["counts"]["pairs_read"] == 40_000 and m_large["counts"]["pairs"] == 40_000
    # ten times the pairs, about the same peak: nothing grows with the resource (buffers are ~1 MiB)
    assert peak_large < 1.3 * peak_small + 256 * 1024, (peak_small, peak_large)
    assert peak_large < 8 * 1024 * 1024


def test_admin_pages_and_the_export_release_form(client, scored, tmp_path):
    from django.contrib.auth import get_user_model

    from jobs.execution import job_run_inline

    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    for url in (
        "/admin/scoring/regressor/",
        f"/admin/scoring/regressor/{scored.regressor.pk}/change/",
        "/admin/scoring/scoredresource/",
        f"/admin/scoring/scoredresource/{scored.pk}/change/",
    ):
        assert client.get(url).status_code == 200, url
    form = client.get(f"/admin/scoring/scoredresource/{scored.pk}/export/")
    assert form.status_code == 200 and 'value="v1"' in form.content.decode()
    bad = client.post(
        f"/admin/scoring/scoredresource/{scored.pk}/export/", {"version": "v1", "format": "tsv", "filters": "len=9-1"}
    )
    assert bad.status_code == 200 and "lower bound is above" in bad.content.decode()
    response = client.post(
        f"/admin/scoring/scoredresource/{scored.pk}/export/",
        {"version": "v1", "format": "jsonl", "min_score": "50", "filters": "top=2"},
    )
    assert response.status_code == 302
    job = Job.objects.get(kind="export_release")
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    assert release.location.endswith(f"/releases/{scored.resource.name}/v1")
    assert release.manifest["filters"]["min_score"] == 50 and release.manifest["pairs_format"] == "jsonl"
    page = client.get(f"/admin/scoring/release/{release.pk}/change/").content.decode()
    assert f"/api/releases/{release.pk}/files/pairs.jsonl.gz" in page
    body = b"".join(client.get(f"/api/releases/{release.pk}/files/pairs.jsonl.gz").streaming_content)
    assert hashlib.sha256(body).hexdigest() == release.manifest["files"]["pairs.jsonl.gz"]["sha256"]
    # the action exports with defaults, as the next version
    client.post("/admin/scoring/scoredresource/", {"action": "export_default_release", "_selected_action": [scored.pk]})
    assert Job.objects.filter(kind="export_release").latest("pk").params["version"] == "v2"
