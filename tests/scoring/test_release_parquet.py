"""``export_release --format parquet``: typed Parquet files and a Hugging Face dataset card, loaded back with
``datasets`` (offline) and pandas and checked cell by cell against the TSV export of the same release."""

import csv
import gzip
import hashlib
import io
import json
import math
import tracemalloc

import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import CommandError, call_command

from annotation.models import Campaign
from jobs.models import Job, JobStatus
from scoring.models import Release
from scoring.releases import parquet as release_parquet
from scoring.releases.card import size_category
from scoring.releases.checks import ReleaseError
from scoring.releases.columns import JUDGMENT_COLUMNS, PAIR_COLUMNS
from scoring.releases.export import release_write
from scoring.releases.filters import parse_filters
from tests.annotation.parabank_data import import_contract

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with
from .test_releases import _scored_resource_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def scored(storage_dir, tmp_path):
    """The release tests' resource: 8 references / 18 pairs in 3 shards (one paraphrase a copy of its reference,
    left out: 17 released), reference 1 unscored, the contract campaign (7 judgments, one N/A) linked to its job."""
    job = Job.objects.create(kind="generate", status=JobStatus.SUCCEEDED)
    import_contract(tmp_path)
    Campaign.objects.filter(name="contract").update(job=job)
    resource = build_resource(job=job)
    return score_with(resource, make_regressor(), OverlapScorer(max_words=10))


@pytest.fixture
def offline_datasets(tmp_path, monkeypatch):
    """``datasets`` with no network and a cache of its own (what a researcher's offline load does)."""
    for var, value in (
        ("HF_DATASETS_OFFLINE", "1"),
        ("HF_HUB_OFFLINE", "1"),
        ("HF_HOME", str(tmp_path / "hf")),
        ("HF_DATASETS_CACHE", str(tmp_path / "hf-cache")),
    ):
        monkeypatch.setenv(var, value)
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    return datasets


def export(*args):
    out = io.StringIO()
    call_command("export_release", *args, stdout=out)
    return json.loads(out.getvalue())


def tsv_dicts(path, columns):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert tuple(rows[0]) == columns
    return [dict(zip(columns, r)) for r in rows[1:]]


def number(cell: str, kind=float):
    return None if cell == "" else kind(cell)


def same(a, b) -> bool:
    """Equal, with None, NaN (pandas' null in a float column) and None the same."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return a == pytest.approx(b) if isinstance(a, float) else a == b


def pair_from_tsv(row: dict) -> dict:
    return {
        "ref_index": int(row["ref_index"]),
        "reference": row["reference"],
        "source": row["source"],
        "length": int(row["length"]),
        "paraphrase": row["paraphrase"],
        "systems": row["systems"].split(),
        "nll": number(row["nll"]),
        "score": number(row["score"]),
        "raw_score": number(row["raw_score"]),
        "constraints": json.loads(row["constraints"]),
        "caveat": row["caveat"] or None,  # an empty cell is null
    }


def judgment_from_tsv(row: dict) -> dict:
    return {
        "campaign": row["campaign"],
        "worker_id_anon": int(row["worker_id_anon"]),
        "counted": row["counted"] == "1",
        "ref_id": row["ref_id"],
        "length_bucket": int(row["length_bucket"]),
        "reference": row["reference"],
        "systems": row["systems"].split(),
        "paraphrase": row["paraphrase"],
        "nll": number(row["nll"]),
        "human_score": number(row["human_score"], int),
        "gm": int(row["gm"]),
    }


def constraints_as_dict(value) -> dict:
    """The parquet list of per-system structs as the TSV's JSON object (lists, whatever container came back)."""
    return {c["system"]: {k: [list(p) for p in c[k]] for k in ("positive", "negative", "bos_avoid")} for c in value}


def assert_matches(loaded: list[dict], expected: list[dict]) -> None:
    assert len(loaded) == len(expected) and expected
    for got, want in zip(loaded, expected):
        assert list(got) == list(want)
        for key, value in want.items():
            mine = got[key]
            if key == "constraints":
                mine = constraints_as_dict(mine)
            elif isinstance(value, list):
                mine = list(mine)
            elif hasattr(mine, "item"):  # a numpy scalar from pandas
                mine = mine.item()
            assert same(value, mine), (key, value, mine)


def test_parquet_release_loads_with_datasets_and_pandas_as_the_tsv_export_says(scored, tmp_path, offline_datasets):
    import pandas as pd

    tsv = export("res", "--out", str(tmp_path / "tsv"))
    result = export("res", "--out", str(tmp_path / "pq"), "--format", "parquet", "--license", "CC-BY-4.0")
    folder = tmp_path / "pq"
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md",
        "judgments.parquet",
        "manifest.json",
        "pairs.parquet",
    ]
    assert result["counts"] == tsv["counts"] and result["version"] == "v2"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["pairs_format"] == "parquet" and manifest["license"] == "CC-BY-4.0"
    for name in ("README.md", "judgments.parquet", "pairs.parquet"):
        assert manifest["files"][name]["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert [c["name"] for c in manifest["columns"]["pairs.parquet"]] == list(PAIR_COLUMNS)
    assert [c["name"] for c in manifest["columns"]["judgments.parquet"]] == list(JUDGMENT_COLUMNS)
    assert manifest["columns"]["pairs.parquet"][5] == {"name": "systems", "type": "list<item: string>"}

    pairs = [pair_from_tsv(r) for r in tsv_dicts(tmp_path / "tsv" / "pairs.tsv.gz", PAIR_COLUMNS)]
    judgments = [judgment_from_tsv(r) for r in tsv_dicts(tmp_path / "tsv" / "judgments.tsv.gz", JUDGMENT_COLUMNS)]
    assert sum(p["score"] is None for p in pairs) == 2 and sum(j["human_score"] is None for j in judgments) == 1

    # pandas
    frame = pd.read_parquet(folder / "pairs.parquet")
    assert str(frame["ref_index"].dtype) == "int64" and str(frame["score"].dtype) == "float64"
    assert str(frame["nll"].dtype) == "float64" and str(frame["length"].dtype) == "int32"
    assert_matches(frame.to_dict("records"), pairs)
    jframe = pd.read_parquet(folder / "judgments.parquet")
    assert str(jframe["counted"].dtype) == "bool" and str(jframe["worker_id_anon"].dtype) == "int32"
    assert_matches(jframe.to_dict("records"), judgments)

    # datasets: the parquet builder on the files, and the folder itself (its card's configs)
    from datasets import List, Value

    loaded = offline_datasets.load_dataset(
        "parquet",
        data_files={"train": str(folder / "pairs.parquet")},
        split="train",
        cache_dir=str(tmp_path / "hf-cache"),
    )
    assert loaded.features["ref_index"] == Value("int64") and loaded.features["score"] == Value("float64")
    assert loaded.features["systems"] == List(Value("string"))
    assert loaded.features["constraints"].feature["positive"] == List(List(Value("string")))
    assert_matches(list(loaded), pairs)
    by_card = offline_datasets.load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert_matches(list(by_card), pairs)  # the default config is the pairs
    jloaded = offline_datasets.load_dataset(
        str(folder), "judgments", split="train", cache_dir=str(tmp_path / "hf-cache")
    )
    assert jloaded.features["counted"] == Value("bool") and jloaded.features["human_score"] == Value("int32")
    assert jloaded.features["systems"] == List(Value("string"))
    assert_matches(list(jloaded), judgments)
    merged = [j for j in judgments if j["paraphrase"] == "It is fine now."]
    assert merged and all(j["systems"] == ["0", "28"] for j in merged)  # a list, in system order


def test_dataset_card_yaml_and_facts(scored, tmp_path):
    export(
        "res",
        "--out",
        str(tmp_path / "c"),
        "--format",
        "parquet",
        "--min-score",
        "20",
        "--filters",
        "len=5-40",
        "--version",
        "2026.1",
    )
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    card = (tmp_path / "c" / "README.md").read_text()
    assert card.startswith("---\n")
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["pretty_name"] == "Paraforge paraphrases: res 2026.1"
    assert header["license"] == "unknown" and manifest["license"] == "NOASSERTION"  # no --license given
    assert "**No licence was given**" in card
    assert header["language"] == ["en"]
    assert header["task_categories"] == ["text2text-generation", "sentence-similarity"]
    counts = manifest["counts"]
    assert 0 < counts["pairs"] < 18 and header["size_categories"] == ["n<1K"]
    assert header["configs"] == [
        {"config_name": "pairs", "data_files": [{"split": "train", "path": "pairs.parquet"}], "default": True},
        {"config_name": "judgments", "data_files": [{"split": "train", "path": "judgments.parquet"}]},
    ]
    body = card.split("---\n", 2)[2]
    assert f"| references | {counts['references_read']:,} | {counts['references']:,} |" in body
    assert f"| pairs | {counts['pairs_read']:,} | {counts['pairs']:,} |" in body
    assert f"Judgments: {counts['judgments']:,} from 1 campaign(s)" in body
    assert "**0.710 (n = 20 held-out pairs; 95% interval" in body
    pairs_sha256 = manifest["files"]["pairs.parquet"]["sha256"]
    assert f"| pairs (default) | `pairs.parquet` | {counts['pairs']:,} | `{pairs_sha256}` |" in body
    assert '"beam": 4' in body and '"model_sha256": "abc"' in body  # the generation settings
    assert '"min_score": 20.0' in body and '"min": 5.0' in body  # the filters
    assert "ParaBank: Monolingual Bitext Generation and Sentential Paraphrasing via" in body
    assert "Lexically-constrained Neural Machine Translation" in body and "year      = {2019}" in body
    assert "AAAI" in body and "Hu, J. Edward" in body


@pytest.mark.parametrize(
    "n, category",
    [
        (0, "n<1K"),
        (999, "n<1K"),
        (1000, "1K<n<10K"),
        (99_999, "10K<n<100K"),
        (100_000, "100K<n<1M"),
        (5_000_000, "1M<n<10M"),
        (50_000_000, "10M<n<100M"),
        (10**12, "n>1T"),
    ],
)
def test_size_categories_are_the_hubs(n, category):
    assert size_category(n) == category


def test_parquet_bytes_are_reproducible_in_fixed_row_groups(scored, tmp_path, monkeypatch):
    monkeypatch.setattr(release_parquet, "ROW_GROUP_ROWS", 5)
    filters = "len=5-40,overlap=0-0.95,rerank=score"
    a = release_write(
        scored=scored,
        out_dir=tmp_path / "a",
        version="v7",
        fmt="parquet",
        filters=parse_filters(filters),
        license="MIT",
    )
    b = release_write(
        scored=scored,
        out_dir=tmp_path / "b",
        version="v7",
        fmt="parquet",
        filters=parse_filters(filters),
        license="MIT",
    )
    assert a == b
    for name in ("pairs.parquet", "judgments.parquet", "README.md", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    meta = pq.ParquetFile(tmp_path / "a" / "pairs.parquet").metadata
    n = a["counts"]["pairs"]
    assert meta.num_rows == n and n > 10
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [5] * (n // 5) + [n % 5] * (n % 5 > 0)
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
    assert set(meta.metadata) == {b"ARROW:schema"}  # no pandas block, nothing with a time in it
    assert meta.created_by.startswith("parquet-cpp-arrow")


def test_parquet_refusals(scored, tmp_path):
    with pytest.raises(CommandError, match="not an SPDX id"):
        export("res", "--out", str(tmp_path / "x"), "--format", "parquet", "--license", "CC BY 4.0")
    assert not (tmp_path / "x").exists() and not Release.objects.exists()


def _peak(scored, out):
    tracemalloc.start()
    try:
        manifest = release_write(
            scored=scored, out_dir=out, version="v1", fmt="parquet", filters=parse_filters("plen=0-5")
        )
        return manifest, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_parquet_export_memory_stays_flat(storage_dir, tmp_path, monkeypatch):
    # row groups of 1,000 rows so that both sizes fill whole groups; Arrow's own buffers are outside
    # tracemalloc (bench/release_memory.py --format parquet measures the process's RSS)
    monkeypatch.setattr(release_parquet, "ROW_GROUP_ROWS", 1000)
    small, large = _scored_resource_of(400, "small"), _scored_resource_of(4000, "large")
    m_small, peak_small = _peak(small, tmp_path / "small")
    m_large, peak_large = _peak(large, tmp_path / "large")
    assert m_large["counts"]["pairs"] == 40_000
    assert pq.ParquetFile(tmp_path / "large" / "pairs.parquet").metadata.num_row_groups == 40
    assert peak_large < 1.3 * peak_small + 256 * 1024, (peak_small, peak_large)


def test_the_release_job_and_api_serve_a_parquet_release(client, scored):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from jobs.execution import job_run_inline
    from scoring.releases.job import export_release_start
    from scoring.releases.params import ReleaseExportParams

    job = export_release_start(
        ReleaseExportParams(resource=scored.resource.pk, format="parquet", license="cc-by-sa-4.0", filters="top=2")
    )
    assert job_run_inline(job_id=job.pk).status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    assert release.manifest["pairs_format"] == "parquet" and release.manifest["license"] == "CC-BY-SA-4.0"
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(content_type__app_label="scoring", codename="view_release"))
    client.force_login(staff)  # (RELEASE_VIEW_PERMS: the admin's release pages ask the same)
    listed = client.get("/api/releases/").json()["results"][0]
    assert [f["name"] for f in listed["files"]] == ["README.md", "judgments.parquet", "pairs.parquet", "manifest.json"]
    for name in ("pairs.parquet", "README.md"):
        body = b"".join(client.get(f"/api/releases/{release.pk}/files/{name}").streaming_content)
        assert hashlib.sha256(body).hexdigest() == release.manifest["files"][name]["sha256"]
    card = b"".join(client.get(f"/api/releases/{release.pk}/files/README.md").streaming_content).decode()
    assert "license: cc-by-sa-4.0" in card
    # a bad licence is refused when the job is planned: no job, nothing written
    with pytest.raises(ReleaseError, match="licence"):
        export_release_start(
            ReleaseExportParams(resource=scored.resource.pk, format="parquet", license="Not A Licence")
        )
    assert Release.objects.count() == 1 and Job.objects.filter(kind="export_release").count() == 1
