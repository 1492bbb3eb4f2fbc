import gzip
import io
import json

import boto3
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from moto import mock_aws

from generation.corpus.corpora import (
    CR_IN_LINE,
    EMPTY_REFERENCE,
    INVALID_UTF8,
    MISSING_TAB,
    NUL_BYTE,
    TOO_LONG,
    CorpusImportError,
    CorpusTerms,
    ImportCorpusParams,
    ImportParamsError,
    corpus_import,
    corpus_records,
    detect_format,
)
from generation.models import Corpus, CorpusShard, CorpusStatus
from infra.shards import read_jsonl_gz
from infra.storage import get_storage
from jobs.execution import job_run_inline, job_start
from jobs.models import Job, JobStatus
from jobs.params import from_values

pytestmark = pytest.mark.django_db


def _write(path, lines, *, gz=False, raw=None):
    data = raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


BITEXT = ["Das ist gut.\tThat is good.", "Ich gehe.\tI am going.", "Hallo Welt\tHello world"]
MONO = ["That is good.", "I am going.", "", "Hello world"]


@pytest.mark.parametrize("gz", [False, True])
def test_import_bitext_plain_and_gzip(tmp_path, storage_dir, gz):
    path = _write(tmp_path / ("b.tsv.gz" if gz else "b.tsv"), BITEXT, gz=gz)
    corpus = corpus_import(ImportCorpusParams(name="b", path=path, format="bitext"))
    assert corpus.status == CorpusStatus.READY and corpus.format == "bitext"
    assert (corpus.n_references, corpus.n_bad_lines, corpus.shards.count()) == (3, 0, 1)
    shard = corpus.shards.get()
    assert shard.key == f"corpora/{corpus.pk}/shard-00000.jsonl.gz"
    assert (storage_dir / shard.key).is_file()
    records = list(corpus_records(corpus))
    assert records[0] == {"i": 0, "line": 1, "source": "Das ist gut.", "reference": "That is good."}
    assert [r["i"] for r in records] == [0, 1, 2]


@pytest.mark.parametrize("gz", [False, True])
def test_import_mono_skips_blank_lines_and_keeps_line_numbers(tmp_path, storage_dir, gz):
    path = _write(tmp_path / "m.txt", MONO, gz=gz)  # gzip detected by magic bytes, not by name
    corpus = corpus_import(ImportCorpusParams(name="m", path=path))  # format detected: no tab -> mono
    assert corpus.format == "mono"
    records = list(corpus_records(corpus))
    assert records == [
        {"i": 0, "line": 1, "reference": "That is good."},
        {"i": 1, "line": 2, "reference": "I am going."},
        {"i": 2, "line": 4, "reference": "Hello world"},
    ]


def test_detect_format(tmp_path):
    assert detect_format(_write(tmp_path / "a", ["", "x\ty"])) == "bitext"
    assert detect_format(_write(tmp_path / "b", ["x y"])) == "mono"


def test_every_error_kind_is_reported_with_file_and_line(tmp_path, storage_dir):
    raw = (
        (
            b"Gut.\tGood.\n"  # 1 ok
            b"Nur eine Seite\n"  # 2 missing tab
            b"Leer.\t   \n"  # 3 empty reference
            b"Ja.\tYes.\n"  # 4 ok
        )
        + b"Caf\xe9\tCaf\xc3\xa9\n"
        + (  # 5 invalid UTF-8 (latin-1 byte) in the middle
            "x\t" + "y" * 50 + "\n"  # 6 too long
            "Nein.\tNo.\n"
        ).encode()
    )  # 7 ok
    path = _write(tmp_path / "bad.tsv", None, raw=raw)
    corpus = corpus_import(ImportCorpusParams(name="bad", path=path, format="bitext", max_line_chars=40))
    assert corpus.n_references == 3 and corpus.n_bad_lines == 4 and corpus.n_lines_read == 7
    errors = [(e["file"], e["line"], e["reason"]) for e in corpus.bad_lines]
    assert [(f, n) for f, n, _ in errors] == [(str(path), 2), (str(path), 3), (str(path), 5), (str(path), 6)]
    assert errors[0][2] == MISSING_TAB
    assert errors[1][2] == EMPTY_REFERENCE
    assert errors[2][2].startswith(INVALID_UTF8) and "0xe9" in errors[2][2]
    assert errors[3][2].startswith(TOO_LONG)
    assert [r["line"] for r in corpus_records(corpus)] == [1, 4, 7]
    assert [r["i"] for r in corpus_records(corpus)] == [0, 1, 2]
    assert set(corpus.import_report.reasons) == {MISSING_TAB, EMPTY_REFERENCE, INVALID_UTF8, TOO_LONG}


def test_a_huge_line_without_newline_is_reported_not_loaded(tmp_path, storage_dir):
    path = _write(tmp_path / "huge.txt", None, raw=b"ok line\n" + b"z" * 3_000_000 + b"\nlast line\n")
    corpus = corpus_import(ImportCorpusParams(name="huge", path=path, format="mono", max_line_chars=1000))
    assert corpus.n_references == 2
    assert corpus.bad_lines[0]["line"] == 2 and corpus.bad_lines[0]["reason"].startswith(TOO_LONG)


def test_abort_leaves_nothing_behind(tmp_path, storage_dir):
    lines = [f"s{i}\tr{i}" for i in range(25)] + ["no tab here"] + ["a\tb"]
    path = _write(tmp_path / "abort.tsv", lines)
    with pytest.raises(CorpusImportError, match=r"abort.tsv:26: missing tab .*aborted"):
        corpus_import(ImportCorpusParams(name="abort", path=path, format="bitext", on_error="abort", shard_size=10))
    assert not Corpus.objects.exists() and not CorpusShard.objects.exists()
    assert get_storage().list("corpora") == []


def test_sharding_keeps_corpus_wide_indices(tmp_path, storage_dir):
    path = _write(tmp_path / "many.txt", [f"sentence number {i}" for i in range(23)])
    corpus = corpus_import(ImportCorpusParams(name="many", path=str(path), format="mono", shard_size=10))
    shards = list(corpus.shards.order_by("index"))
    assert [(s.index, s.n_records, s.first_record) for s in shards] == [(0, 10, 0), (1, 10, 10), (2, 3, 20)]
    for s in shards:
        records = list(read_jsonl_gz(s.key))
        assert [r["i"] for r in records] == list(range(s.first_record, s.first_record + s.n_records))
        assert len(s.sha256) == 64 and s.bytes == (storage_dir / s.key).stat().st_size
    assert [r["reference"] for r in corpus_records(corpus)] == [f"sentence number {i}" for i in range(23)]


def test_same_input_gives_identical_shards(tmp_path, storage_dir):
    path = _write(tmp_path / "d.txt", ["one two", "three four"])
    a = corpus_import(ImportCorpusParams(name="a", path=path, format="mono"))
    b = corpus_import(ImportCorpusParams(name="b2", path=path, format="mono"))
    assert a.shards.get().sha256 == b.shards.get().sha256


def test_duplicate_name_missing_file_and_empty_input_are_clear_errors(tmp_path, storage_dir):
    path = _write(tmp_path / "x.txt", ["hello there"])
    corpus_import(ImportCorpusParams(name="x", path=path, format="mono"))
    with pytest.raises(CorpusImportError, match="already exists"):
        corpus_import(ImportCorpusParams(name="x", path=path, format="mono"))
    with pytest.raises(CorpusImportError, match="nope.txt: no such file"):
        corpus_import(ImportCorpusParams(name="y", path=tmp_path / "nope.txt", format="mono"))
    with pytest.raises(CorpusImportError, match="no valid pairs"):
        corpus_import(ImportCorpusParams(name="z", path=_write(tmp_path / "z.tsv", ["no tab"]), format="bitext"))
    assert list(Corpus.objects.values_list("name", flat=True)) == ["x"]


@mock_aws
def test_import_to_s3(tmp_path, settings):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bucket")
    settings.PARAFORGE_STORAGE_URL = "s3://bucket/prefix"
    path = _write(tmp_path / "s3.tsv", BITEXT)
    corpus = corpus_import(ImportCorpusParams(name="s3", path=path, format="bitext", shard_size=2))
    keys = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket="bucket")["Contents"]
    assert sorted(k["Key"] for k in keys) == [f"prefix/corpora/{corpus.pk}/shard-0000{i}.jsonl.gz" for i in (0, 1)]
    assert [r["reference"] for r in corpus_records(corpus)] == ["That is good.", "I am going.", "Hello world"]


# --- CLI ------------------------------------------------------------------------------------------


def test_cli_import_prints_json_and_bad_lines(tmp_path, storage_dir, capsys):
    path = _write(tmp_path / "cli.tsv", BITEXT + ["oops"])
    call_command("import_corpus", "cli", str(path), "--format", "bitext", "--shard-size", "2")
    out, err = capsys.readouterr()
    summary = json.loads(out)
    corpus = Corpus.objects.get(name="cli")
    assert {k: summary[k] for k in ("corpus", "name", "references", "bad_lines", "shards")} == {
        "corpus": corpus.pk,
        "name": "cli",
        "references": 3,
        "bad_lines": 1,
        "shards": 2,
    }
    assert f"{path}:4: {MISSING_TAB}" in err
    assert "skipped 1 bad line(s) of 4 (1 missing tab" in err


def test_cli_abort_and_missing_file_exit_non_zero(tmp_path, storage_dir):
    path = _write(tmp_path / "cli.tsv", BITEXT + ["oops"])
    with pytest.raises(CommandError, match=r"cli.tsv:4: missing tab"):
        call_command("import_corpus", "cli", str(path), "--on-error", "abort")
    assert not Corpus.objects.exists()
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_corpus", "cli", str(tmp_path / "missing.tsv"))
    call_command("import_corpus", "cli", str(path))
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_corpus", "cli", str(path))


@mock_aws
def test_discarding_corpus_1_on_s3_leaves_corpus_10_alone(settings):
    from generation.corpus.corpora import delete_folder

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bucket")
    settings.PARAFORGE_STORAGE_URL = "s3://bucket/prefix"
    storage = get_storage()
    for key in ("corpora/1/shard-00000.jsonl.gz", "corpora/10/shard-00000.jsonl.gz"):
        with storage.open_write(key) as fh:
            fh.write(b"x")
    assert delete_folder(storage, "corpora/1") == 1
    assert storage.list("corpora") == ["corpora/10/shard-00000.jsonl.gz"]


def test_progress_is_bytes_read_and_blank_lines_count_as_read(tmp_path, storage_dir):
    path = _write(tmp_path / "p.txt", [f"line {i}" for i in range(5000)] + ["", ""], gz=True)
    calls = []
    corpus = corpus_import(
        ImportCorpusParams(name="p", path=path, format="mono"), progress=lambda d, t: calls.append((d, t))
    )
    size = path.stat().st_size
    assert calls[0] == (0, size) and calls[-1] == (size, size)
    assert all(0 <= d <= t == size for d, t in calls) and len(calls) >= 3
    assert corpus.n_lines_read == 5002 and corpus.n_references == 5000


def test_a_truncated_gzip_file_is_a_clear_error_and_keeps_nothing(tmp_path, storage_dir):
    data = gzip.compress("".join(f"sentence {i} here\n" for i in range(20000)).encode())
    path = _write(tmp_path / "cut.txt.gz", None, raw=data[: len(data) // 2])
    with pytest.raises(CorpusImportError, match=r"cut.txt.gz:\d+: corrupt gzip data"):
        corpus_import(ImportCorpusParams(name="cut", path=path, format="mono", shard_size=1000))
    assert not Corpus.objects.exists() and get_storage().list("corpora") == []


def test_abort_on_local_storage_removes_the_corpus_folder(tmp_path, storage_dir):
    path = _write(tmp_path / "a.txt", ["fine line", "bad\tline"])
    with pytest.raises(CorpusImportError):
        corpus_import(ImportCorpusParams(name="a", path=path, format="mono", on_error="abort", shard_size=1))
    assert not (storage_dir / "corpora").exists() or list((storage_dir / "corpora").iterdir()) == []


# --- text that is not UTF-8 lines ------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_a_utf16_or_utf32_file_is_refused_whole_before_anything_is_created(tmp_path, storage_dir, encoding):
    path = _write(tmp_path / "wide.txt", None, raw="\ufeffHello world.\nAnother one.\n".encode(encoding))
    with pytest.raises(CorpusImportError, match=r"wide\.txt:1: UTF-(16|32) text \(byte-order mark\); convert"):
        corpus_import(ImportCorpusParams(name="wide", path=path, format="mono"))
    with pytest.raises(CommandError, match=r"wide\.txt:1: UTF-(16|32) text"):
        call_command("import_corpus", "wide", str(path))
    assert not Corpus.objects.exists() and get_storage().list("corpora") == []


def test_nul_bytes_are_bad_lines_never_stored(tmp_path, storage_dir):
    """UTF-16 without a byte-order mark decodes as "valid" UTF-8 with a NUL between letters."""
    raw = b"Good line.\n" + "Hi there.\n".encode("utf-16-le") + b"\x00\nalso\x00NUL\nLast line.\n"
    corpus = corpus_import(
        ImportCorpusParams(name="nul", path=_write(tmp_path / "nul.txt", None, raw=raw), format="mono")
    )
    assert [r["reference"] for r in corpus_records(corpus)] == ["Good line.", "Last line."]
    assert [(e["line"], e["reason"]) for e in corpus.bad_lines] == [
        (2, f"{NUL_BYTE} at column 2 (UTF-16 file?)"),
        (3, f"{NUL_BYTE} at column 1 (UTF-16 file?)"),
        (4, f"{NUL_BYTE} at column 5 (UTF-16 file?)"),
    ]


@pytest.mark.parametrize("gz", [False, True])
def test_cr_only_line_endings_are_never_merged_into_one_reference(tmp_path, storage_dir, gz):
    path = _write(tmp_path / "mac.txt", None, raw=b"line one.\rline two.\rline three.\r", gz=gz)
    with pytest.raises(CorpusImportError, match=rf"mac\.txt:1: {CR_IN_LINE} at column 10 \(CR-only line endings"):
        corpus_import(ImportCorpusParams(name="mac", path=path, format="mono", on_error="abort"))
    with pytest.raises(
        CommandError,
        match=r"no valid sentences to import \(1 bad line\(s\) of 1: 1 carriage return "
        rf"inside the line; first: \S*mac\.txt:1: {CR_IN_LINE} at column 10",
    ):
        call_command("import_corpus", "mac", str(path))
    assert not Corpus.objects.exists()
    # CRLF stays fine, and a huge CR-only file is reported as such, not as one over-long line
    crlf = corpus_import(
        ImportCorpusParams(
            name="crlf", path=_write(tmp_path / "crlf.txt", None, raw=b"a b.\r\nc d.\r\n"), format="mono"
        )
    )
    assert [r["reference"] for r in corpus_records(crlf)] == ["a b.", "c d."]
    big = _write(tmp_path / "bigmac.txt", None, raw=b"A short line.\r" * 5000)
    with pytest.raises(CorpusImportError, match=rf"bigmac\.txt:1: {CR_IN_LINE}"):
        corpus_import(ImportCorpusParams(name="big", path=big, format="mono", max_line_chars=1000))


# --- the job's params: one class, stored as before -------------------------------------------------


def test_the_command_stores_the_params_it_always_stored(tmp_path, storage_dir):
    path = _write(tmp_path / "keys.tsv", BITEXT)
    call_command(
        "import_corpus", "keys", str(path), "--shard-size", "2", "--license", "cc-by-4.0", stdout=io.StringIO()
    )
    job = Job.objects.get(kind="import_corpus")
    # (compared as a mapping: PostgreSQL's jsonb keeps no key order)
    assert job.params == {
        "name": "keys",
        "path": str(path.resolve()),
        "format": "bitext",  # detected before the job is made
        "on_error": "skip",
        "shard_size": 2,
        "max_line_chars": None,
        "display_name": str(path),
        "source": "",
        "license": "CC-BY-4.0",
        "terms": "",
    }
    assert from_values(ImportCorpusParams, job.params).terms == CorpusTerms(license="CC-BY-4.0")


@pytest.mark.parametrize(
    "params",
    [
        {"format": "mono", "on_error": "skip", "shard_size": None, "max_line_chars": None, "display_name": "old.txt"},
        {},  # the fewest: the format detected, the settings' sizes, the path in messages
    ],
)
def test_a_job_stored_before_the_corpus_terms_existed_still_runs(tmp_path, storage_dir, params):
    path = _write(tmp_path / "old.txt", MONO)
    job = job_start(kind="import_corpus", params={"name": "old", "path": str(path), **params}, enqueue=False)
    job = job_run_inline(job_id=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    corpus = Corpus.objects.get(name="old")
    assert (corpus.format, corpus.n_references, corpus.license, corpus.source) == ("mono", 3, "NOASSERTION", "")
    assert corpus.source_name == params.get("display_name", str(path))


def test_a_setting_that_cannot_work_is_refused_before_any_job_in_the_commands_words(tmp_path, storage_dir):
    path = _write(tmp_path / "s.txt", MONO)
    for option, message in (("--shard-size", "--shard-size must be at least 1"), ("--max-line-chars", "--max-line")):
        with pytest.raises(CommandError, match=message):
            call_command("import_corpus", "s", str(path), option, "0")
    with pytest.raises(ImportParamsError, match="shard_size must be at least 1, not 0"):
        ImportCorpusParams(name="s", path=str(path), shard_size=0)
    with pytest.raises(ImportParamsError, match="a corpus needs a name"):
        ImportCorpusParams(name="  ", path=str(path))
    with pytest.raises(CorpusImportError, match="on_error must be 'skip' or 'abort', not 'stop'"):
        corpus_import(ImportCorpusParams(name="s", path=path, on_error="stop"))
    assert not Job.objects.exists() and not Corpus.objects.exists()
    assert ImportCorpusParams(name="s", path=path, format="").format is None  # the admin form's "detect"
