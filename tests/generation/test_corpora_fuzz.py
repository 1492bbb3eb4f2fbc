"""Property test of the corpus importer on random files (issue 6, "Faults" and "Security").

Files mix good lines with random bytes: invalid UTF-8, NUL (a bad line: UTF-16?), a lone \\r (a bad line:
CR-only line endings), missing or extra tabs, blank sources and references, over-long lines, \\r\\n
endings, a byte-order mark, plain or gzipped (a file opening with a UTF-16/32 byte-order mark is refused
whole). The importer either keeps exactly the valid lines, in order and with their line numbers, and
reports every bad line by its 1-based number, or (``on_error="abort"``, or nothing valid) raises a
one-line ``file:line`` error and leaves no Corpus row and no shard file behind. Deterministic
(``derandomize``), so CI sees the same examples.
"""

from __future__ import annotations

import gzip
import itertools

import pytest
from hypothesis import HealthCheck, event, example, given, settings, strategies as st

from generation.corpus.corpora import (
    CR_IN_LINE,
    EMPTY_REFERENCE,
    EMPTY_SOURCE,
    EXTRA_TAB,
    INVALID_UTF8,
    MISSING_TAB,
    NUL_BYTE,
    TAB_IN_MONO,
    TOO_LONG,
    CorpusImportError,
    ImportCorpusParams,
    corpus_discard,
    corpus_import,
    corpus_records,
    reason_kind,
)
from generation.models import Corpus

pytestmark = pytest.mark.django_db

MAX_CHARS = 40  # small, so that "huge" lines are cheap to generate
_names = itertools.count()

WORD = st.text(alphabet="abcxyz é漢\x00-.'", min_size=1, max_size=8)
SPACES = st.text(alphabet=" \x0b\u00a0\u2028", max_size=3)


def _sentence() -> st.SearchStrategy[str]:
    return st.lists(WORD, min_size=1, max_size=4).map(" ".join)


LINE = st.one_of(
    st.tuples(_sentence(), _sentence()).map(lambda p: f"{p[0]}\t{p[1]}".encode()),  # good pair
    _sentence().map(str.encode),  # good mono line / bitext line with no tab
    st.tuples(SPACES, _sentence()).map(lambda p: f"{p[0]}\t{p[1]}".encode()),  # empty source
    st.tuples(_sentence(), SPACES).map(lambda p: f"{p[0]}\t{p[1]}".encode()),  # empty reference
    st.tuples(_sentence(), _sentence(), _sentence()).map(lambda p: "\t".join(p).encode()),  # two tabs
    SPACES.map(str.encode),  # blank
    st.integers(MAX_CHARS + 1, 3 * MAX_CHARS).map(lambda n: b"w" * n),  # too long
    st.integers(4 * MAX_CHARS, 6 * MAX_CHARS).map(lambda n: "é".encode() * n),  # too long, multibyte
    st.tuples(_sentence(), st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc"])).map(
        lambda p: p[0].encode() + p[1]
    ),  # invalid UTF-8
    st.binary(max_size=12).filter(lambda b: b"\n" not in b),  # anything
)


GOOD = {
    "bitext": st.tuples(_sentence(), _sentence()).map(lambda p: f"{p[0]}\t{p[1]}".encode()),
    "mono": _sentence().map(str.encode),
}


@st.composite
def corpus_files(draw, fmt: str = "bitext"):
    """Bytes of a corpus file: about half its lines valid for ``fmt``, the rest anything from LINE."""
    lines = [draw(GOOD[fmt] if draw(st.booleans()) else LINE) for _ in range(draw(st.integers(0, 14)))]
    endings = [draw(st.sampled_from([b"\n", b"\r\n"])) for _ in lines]
    data = b"".join(line + end for line, end in zip(lines, endings))
    if lines and draw(st.booleans()):
        data = data[: -len(endings[-1])]  # no newline at the end of the file
    if draw(st.integers(0, 9)) == 0:
        data = b"\xef\xbb\xbf" + data  # a UTF-8 byte-order mark
    return data


def expected(data: bytes, fmt: str) -> tuple[list[dict], dict[int, set[str]]]:
    """What a correct importer keeps and reports, written from the documented rules: lines end at \\n
    (one \\r before it is dropped), strict UTF-8, at most MAX_CHARS characters, then the format's fields.
    Bad lines map to the reason kinds that may be given (a long line of invalid UTF-8 may be either)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    pieces = data.split(b"\n")
    terminated = [True] * (len(pieces) - 1) + [False]
    if pieces[-1] == b"":
        pieces, terminated = pieces[:-1], terminated[:-1]
    good, bad = [], {}
    for number, (raw, ended) in enumerate(zip(pieces, terminated), 1):
        if ended and raw.endswith(b"\r"):
            raw = raw[:-1]
        too_long = {TOO_LONG} if len(raw) > MAX_CHARS else set()
        if b"\x00" in raw:  # valid UTF-8, but a UTF-16 file's mark
            bad[number] = {NUL_BYTE} | too_long
            continue
        if b"\r" in raw:  # CR-only line endings would merge lines
            bad[number] = {CR_IN_LINE} | too_long
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad[number] = {INVALID_UTF8} | ({TOO_LONG} if len(raw) > MAX_CHARS else set())
            continue
        if len(text) > MAX_CHARS:
            bad[number] = {TOO_LONG}
            continue
        if not text.strip():
            continue
        parts = text.split("\t")
        if fmt == "mono":
            if len(parts) > 1:
                bad[number] = {TAB_IN_MONO}
            else:
                good.append({"line": number, "reference": text.strip()})
        elif len(parts) == 1:
            bad[number] = {MISSING_TAB}
        elif len(parts) > 2:
            bad[number] = {EXTRA_TAB}
        elif not parts[1].strip():
            bad[number] = {EMPTY_REFERENCE}
        elif not parts[0].strip():
            bad[number] = {EMPTY_SOURCE}
        else:
            good.append({"line": number, "source": parts[0].strip(), "reference": parts[1].strip()})
    return good, bad


def _files(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fmt_and_data=st.sampled_from(["bitext", "mono"]).flatmap(lambda f: st.tuples(st.just(f), corpus_files(f))),
    gz=st.booleans(),
    on_error=st.sampled_from(["skip", "abort"]),
    shard_size=st.integers(1, 4),
)
def test_import_keeps_exactly_the_valid_lines_or_nothing(tmp_path, storage_dir, fmt_and_data, gz, on_error, shard_size):
    fmt, data = fmt_and_data
    path = tmp_path / f"in-{next(_names)}.txt{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    good, bad = expected(data, fmt)
    corpora_before, files_before = Corpus.objects.count(), _files(storage_dir)
    seen: list = []
    event("raises" if (on_error == "abort" and bad) or not good else "imports")
    event(f"bad lines: {min(len(bad), 3)}+" if bad else "no bad lines")

    def import_it():
        return corpus_import(
            ImportCorpusParams(
                name=path.name,
                path=path,
                format=fmt,
                on_error=on_error,
                shard_size=shard_size,
                max_line_chars=MAX_CHARS,
                display_name="upload.txt",
            ),
            on_bad_line=seen.append,
        )

    if data.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        with pytest.raises(CorpusImportError, match=r":1: UTF-(16|32) text \(byte-order mark\)"):
            import_it()
        assert Corpus.objects.count() == corpora_before and _files(storage_dir) == files_before
        return

    if (on_error == "abort" and bad) or not good:
        with pytest.raises(CorpusImportError) as caught:
            import_it()
        message = str(caught.value)
        assert "\n" not in message
        if on_error == "abort" and bad:
            first = min(bad)
            assert message.startswith(f"upload.txt:{first}: ") and "nothing was kept" in message
            assert [e.line for e in seen] == [first]
        else:
            assert "no valid" in message
        assert Corpus.objects.count() == corpora_before  # no row, no shard left behind
        assert _files(storage_dir) == files_before
        return

    corpus = import_it()
    try:
        records = list(corpus_records(corpus))
        assert [{k: v for k, v in r.items() if k != "i"} for r in records] == good
        assert [r["i"] for r in records] == list(range(len(good)))
        assert corpus.n_references == len(good) and corpus.n_bad_lines == len(bad)
        assert [e.line for e in seen] == sorted(bad)
        for error in seen:
            assert error.file == "upload.txt" and reason_kind(error.reason) in bad[error.line], error
        assert [e["line"] for e in corpus.bad_lines] == sorted(bad)[:100]
        assert sum(s.n_records for s in corpus.shards.all()) == len(good)
        assert all(s.n_records <= shard_size for s in corpus.shards.all())
    finally:
        corpus_discard(corpus)


@settings(
    derandomize=True,
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=corpus_files(), cut=st.integers(1, 30), on_error=st.sampled_from(["skip", "abort"]))
# found by this test: the stream ending while the rest of an over-long line was being skipped escaped
# as a bare EOFError
@example(data=b"a\ta\n" + "\u00e9".encode() * 200 + b"\na\ta\n", cut=12, on_error="skip")
def test_a_truncated_gzip_is_a_clear_error_and_leaves_nothing(tmp_path, storage_dir, data, cut, on_error):
    packed = gzip.compress(data + b"a\tb\n" * 3, mtime=0)
    path = tmp_path / f"cut-{next(_names)}.gz"
    path.write_bytes(packed[: max(2, len(packed) - cut)])
    corpora_before, files_before = Corpus.objects.count(), _files(storage_dir)
    with pytest.raises(CorpusImportError) as caught:
        corpus_import(
            ImportCorpusParams(
                name=path.name, path=path, format="bitext", on_error=on_error, shard_size=2, max_line_chars=MAX_CHARS
            )
        )
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    assert Corpus.objects.count() == corpora_before
    assert _files(storage_dir) == files_before
