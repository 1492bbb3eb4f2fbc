import copy
import io
import json
import math
import pickle

import boto3
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from moto import mock_aws

from generation.constraints.idf import IdfFileError, idf_table_export, idf_table_import, idf_table_load, read_idf_tsv
from generation.constraints.idf_job import BuildIdfParams, df_key
from generation.corpus.corpora import ImportCorpusParams, corpus_import
from generation.models import IdfTable
from infra.storage import get_storage
from jobs.execution import chunk_run, job_finish, job_run_inline, job_start
from jobs.models import Job, JobChunk, JobStatus
from jobs.params import ParamsError

pytestmark = pytest.mark.django_db

SENTENCES = ["The cat sat.", "the the dog", "A cat and a dog.", "Dogs bark"]
# by hand: N = 4 documents; df: the 2 (sentences 1, 2: "The"/"the" one token, repeated once counted),
# cat 2, sat 1, . 2, dog 2, a 1 ("A" and "a" in one sentence), and 1, dogs 1, bark 1
EXPECTED_DF = {"the": 2, "cat": 2, "sat": 1, ".": 2, "dog": 2, "a": 1, "and": 1, "dogs": 1, "bark": 1}


def _corpus(tmp_path, name="tiny", shard_size=2):
    path = tmp_path / f"{name}.txt"
    path.write_text("".join(s + "\n" for s in SENTENCES))
    return corpus_import(ImportCorpusParams(name=name, path=path, format="mono", shard_size=shard_size))


def _build(corpus, **params):
    job = job_start(kind="build_idf", params={"corpus": corpus.pk, **params}, enqueue=False)
    return job, job_run_inline(job_id=job.pk)


def test_idf_equals_ln_n_over_df_computed_by_hand(tmp_path, storage_dir):
    corpus = _corpus(tmp_path)
    job, done = _build(corpus)
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert job.total_chunks == 2  # one chunk per shard
    table = IdfTable.objects.get(pk=done.result["idf_table"])
    assert (table.corpus_id, table.name, table.n_documents, table.n_types) == (corpus.pk, "tiny", 4, 9)
    assert table.tokenizer.startswith("en_core_web_sm")
    assert table.key == f"idf/{table.pk}.tsv"
    idf = idf_table_load(table)
    assert idf == pytest.approx({t: math.log(4 / df) for t, df in EXPECTED_DF.items()})
    text = (storage_dir / table.key).read_text()
    assert [line.split("\t")[0] for line in text.splitlines()] == sorted(EXPECTED_DF)
    assert get_storage().list(f"idf/{job.pk}") == []  # the per-shard counts were merged and removed


def test_a_rerun_chunk_does_not_double_count(tmp_path, storage_dir):
    corpus = _corpus(tmp_path)
    job = job_start(kind="build_idf", params={"corpus": corpus.pk}, enqueue=False)
    first = job.chunks.get(index=0)
    chunk_run(chunk_id=first.pk)
    written = (storage_dir / df_key(job.pk, 0)).read_bytes()
    # the worker died before recording success: the chunk is delivered again
    JobChunk.objects.filter(pk=first.pk).update(status=JobStatus.PENDING)
    chunk_run(chunk_id=first.pk)
    assert (storage_dir / df_key(job.pk, 0)).read_bytes() == written
    assert JobChunk.objects.get(pk=first.pk).result["reused"] is True
    done = job_run_inline(job_id=job.pk)
    assert done.result["documents"] == 4
    assert idf_table_load(done.result["idf_table"])["the"] == pytest.approx(math.log(2))
    assert job_finish(job_id=job.pk).result == done.result  # a second finish does nothing


def test_export_import_round_trip(tmp_path, storage_dir):
    _, done = _build(_corpus(tmp_path))
    out = tmp_path / "idf.tsv"
    idf_table_export("tiny", out)
    lines = out.read_text().splitlines()
    assert all(len(line.split("\t")) == 2 for line in lines)
    assert read_idf_tsv(out) == idf_table_load("tiny")
    loaded = idf_table_load("tiny")  # read-only: selection remembers per table which texts join a pool
    for change in (lambda: loaded.__setitem__("the", 9.0), lambda: loaded.update(the=9.0), lambda: loaded.pop("the")):
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    assert loaded == read_idf_tsv(out) and dict(loaded) == loaded
    assert pickle.loads(pickle.dumps(loaded)) == loaded and type(copy.copy(loaded)) is type(loaded)
    imported = idf_table_import("copy", out)
    assert imported.corpus is None and imported.n_types == 9
    assert idf_table_load(imported) == idf_table_load("tiny")
    again = tmp_path / "again.tsv"
    idf_table_export(imported, again)
    assert again.read_bytes() == out.read_bytes()
    with pytest.raises(IdfFileError, match="already exists"):
        idf_table_import("copy", out)
    bad = tmp_path / "bad.tsv"
    bad.write_text("cat\t1.0\ndog\tmany\n")
    with pytest.raises(IdfFileError, match="bad.tsv:2"):
        idf_table_import("bad", bad)


@mock_aws
def test_idf_on_s3(tmp_path, settings):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bucket")
    settings.PARAFORGE_STORAGE_URL = "s3://bucket/prefix"
    _, done = _build(_corpus(tmp_path, shard_size=3))
    assert done.status == JobStatus.SUCCEEDED, done.error
    table = IdfTable.objects.get(pk=done.result["idf_table"])
    keys = [
        o["Key"]
        for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket="bucket", Prefix="prefix/idf/")[
            "Contents"
        ]
    ]
    assert keys == [f"prefix/idf/{table.pk}.tsv"]
    assert idf_table_load(table) == pytest.approx({t: math.log(4 / df) for t, df in EXPECTED_DF.items()})


def test_cli_build_export_import(tmp_path, storage_dir, capsys):
    corpus = _corpus(tmp_path)
    call_command("build_idf", "tiny", "--wait", "--name", "tiny-idf")
    result = json.loads(capsys.readouterr().out)
    table = IdfTable.objects.get(name="tiny-idf")
    assert result["idf_table"] == table.pk and result["status"] == "succeeded" and result["corpus"] == corpus.pk
    out = tmp_path / "out.tsv"
    call_command("export_idf", str(table.pk), str(out))
    assert json.loads(capsys.readouterr().out)["types"] == 9
    call_command("import_idf", "from-file", str(out))
    assert json.loads(capsys.readouterr().out)["types"] == 9
    with pytest.raises(CommandError, match="no corpus"):
        call_command("build_idf", "nope", "--wait")
    with pytest.raises(CommandError, match="already exists"):
        call_command("build_idf", "tiny", "--wait", "--name", "tiny-idf")
    with pytest.raises(CommandError, match="--name must not be blank"):
        call_command("build_idf", "tiny", "--wait", "--name", "  ")
    assert IdfTable.objects.count() == 2
    with pytest.raises(CommandError, match="no IDF table"):
        call_command("export_idf", "nope", str(out))


def test_cli_build_idf_wait_fails_non_zero_when_the_job_fails(tmp_path, storage_dir, capsys):
    corpus = _corpus(tmp_path)
    for shard in corpus.shards.all():  # the shards went missing from storage
        get_storage().delete(shard.key)
    with pytest.raises(CommandError, match="ended failed"):
        call_command("build_idf", "tiny", "--wait")
    assert json.loads(capsys.readouterr().out)["idf_table"] is None
    assert not IdfTable.objects.exists()


def test_merging_many_shards_in_rounds_gives_the_same_table(tmp_path, storage_dir):
    from collections import Counter

    from generation.constraints.idf import merge_df_files, write_df_file

    counts = [Counter({"a": 1, f"t{i}": 1, "z": 2}) for i in range(9)]
    keys = []
    for i, c in enumerate(counts):
        keys.append(f"idf/test/df-{i:05d}.tsv.gz")
        write_df_file(keys[-1], 3, c)
    merge_df_files(keys, "idf/one.tsv", 27, fan_in=100)
    merge_df_files(keys, "idf/rounds.tsv", 27, fan_in=2)  # 9 -> 5 -> 3 -> 2 files, then the table
    one = (storage_dir / "idf/one.tsv").read_text()
    assert (storage_dir / "idf/rounds.tsv").read_text() == one
    assert one.splitlines()[0] == f"a\t{math.log(27 / 9)!r}" and one.splitlines()[-1] == f"z\t{math.log(27 / 18)!r}"


# --- bad IDF files ----------------------------------------------------------------------------------


def test_a_byte_order_mark_is_dropped_with_or_without_the_header(tmp_path, storage_dir):
    for name, text in (("bom", "\ufeffthe\t1.5\ncat\t8.0\n"), ("bomhdr", "\ufefftoken\tidf\nthe\t1.5\ncat\t8.0\n")):
        path = tmp_path / f"{name}.tsv"
        path.write_text(text, encoding="utf-8")
        assert read_idf_tsv(path) == {"the": 1.5, "cat": 8.0}
        assert idf_table_load(idf_table_import(name, path)) == {"the": 1.5, "cat": 8.0}


@pytest.mark.parametrize(
    "raw, message",
    [
        ("the\t1.5\ncaf\xe9\t8.0\n".encode("latin-1"), r"bad\.tsv:2: not UTF-8"),
        (b"the\t1.5\ncat\t2.0\nthe\t9.0\n", r"bad\.tsv:3: token 'the' appears twice"),
        (b"the\t1.5\ncat\tnan\n", r"bad\.tsv:2: IDF 'nan' is not a finite number >= 0"),
        (b"the\t1.5\ncat\tinf\n", r"bad\.tsv:2: IDF 'inf' is not a finite number >= 0"),
        (b"the\t1.5\ncat\t1e999\n", r"bad\.tsv:2: IDF '1e999' is not a finite number >= 0"),
        (b"the\t-3\n", r"bad\.tsv:1: IDF '-3' is not a finite number >= 0"),
        (b"the\t1.5\n\t8.0\n", r"bad\.tsv:2: empty token"),
        (b"the\t1.5\nmy word\t9\n", r"bad\.tsv:2: token 'my word' holds whitespace"),
        (b"the 1.5\n", r"bad\.tsv:1: expected token<TAB>idf"),
    ],
)
def test_a_bad_idf_file_names_the_line_and_stores_nothing(tmp_path, storage_dir, raw, message, capsys):
    path = tmp_path / "bad.tsv"
    path.write_bytes(raw)
    with pytest.raises(IdfFileError, match=message):
        read_idf_tsv(path)
    with pytest.raises(CommandError, match=message):
        call_command("import_idf", "t", str(path))
    assert not IdfTable.objects.exists() and get_storage().list("idf") == []
    # constraints --idf reads the file through the same checks
    with pytest.raises(CommandError, match=message):
        call_command("constraints", "--idf", str(path), "--system", "1", "The cat sat.")
    assert capsys.readouterr().out == ""


def test_import_idf_refuses_an_empty_name(tmp_path, storage_dir):
    path = tmp_path / "ok.tsv"
    path.write_text("the\t1.5\n")
    for name in ("", "  "):
        with pytest.raises(CommandError, match="an IDF table needs a name"):
            call_command("import_idf", name, str(path))
    assert not IdfTable.objects.exists()


def test_build_idf_stores_the_params_it_always_stored_and_runs_a_job_without_a_name(tmp_path, storage_dir):
    """The command stores ``{"corpus": id}`` and ``name`` only when given (the admin's action never gives one)."""
    corpus = _corpus(tmp_path)
    call_command("build_idf", "tiny", "--wait", "--name", "named", stdout=io.StringIO())
    call_command("build_idf", "tiny", "--wait", stdout=io.StringIO())
    jobs = list(Job.objects.filter(kind="build_idf").order_by("pk"))
    assert [job.params for job in jobs] == [{"corpus": corpus.pk, "name": "named"}, {"corpus": corpus.pk}]
    assert [job.status for job in jobs] == [JobStatus.SUCCEEDED] * 2
    assert jobs[1].result["name"] == "tiny"  # no name stored: the corpus's own
    with pytest.raises(ParamsError, match="name must not be blank"):
        BuildIdfParams(corpus=corpus.pk, name=" ")
