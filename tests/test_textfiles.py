"""infra/textfiles.py: the one way a user's file is read (gzip by its bytes, BOM, strict UTF-8 naming the
line) and every file written (whole or not at all)."""

from __future__ import annotations

import gzip

import pytest

from infra.textfiles import (
    LineReader,
    NotUtf8Error,
    TextFileError,
    atomic_write,
    open_text,
    read_lines,
    tsv_rows,
    undecodable_byte,
)


def test_gzip_is_recognised_by_its_bytes_not_its_name_and_a_bom_is_dropped(tmp_path):
    text = "\ufeffa\tb\r\nc\td\n"
    plain, packed = tmp_path / "plain.gz", tmp_path / "packed.txt"
    plain.write_text(text, encoding="utf-8")
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, packed):
        assert list(read_lines(path)) == [(1, "a\tb\r\n"), (2, "c\td\n")]
        assert list(tsv_rows(path)) == [(1, ["a", "b"]), (2, ["c", "d"])]


def test_a_byte_that_is_not_utf8_names_its_line_column_and_byte(tmp_path):
    path = tmp_path / "latin.tsv"
    path.write_bytes("ok\n\ncaf\xe9\tx\n".encode("latin-1"))
    with pytest.raises(NotUtf8Error) as err:
        list(tsv_rows(path))
    assert str(err.value) == f"{path}:3: not UTF-8 (byte 0xe9 at column 4)"
    assert (err.value.line, err.value.byte, err.value.column, err.value.offset) == (3, 0xE9, 4, 4)


def test_a_stray_carriage_return_does_not_split_a_line(tmp_path):
    path = tmp_path / "cr.txt"
    path.write_bytes(b"a\rb\nc\n")
    assert [n for n, _ in read_lines(path)] == [1, 2]


def test_replace_takes_any_bytes(tmp_path):
    path = tmp_path / "junk"
    path.write_bytes(b"\xff\xfe|\n")
    with open_text(path, errors="replace") as fh:
        assert fh.read() == "\ufffd\ufffd|\n"


def test_atomic_write_leaves_nothing_when_the_block_fails(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with atomic_write(target, "w", encoding="utf-8") as fh:
            fh.write("half")
            raise RuntimeError("stopped")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text(encoding="utf-8") == "old"
    with atomic_write(target, "w", encoding="utf-8") as fh:
        fh.write("new")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text(encoding="utf-8") == "new"


def test_a_folder_appears_whole_or_not_at_all(tmp_path):
    """atomic_dir: a checkpoint or tokenizer folder replaces the old one only once it is complete."""
    from infra.textfiles import atomic_dir

    target = tmp_path / "tokenizer"
    target.mkdir()
    (target / "old.spm").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as new:
            (new / "new.spm").write_text("half")
            raise RuntimeError("interrupted")
    assert [p.name for p in target.iterdir()] == ["old.spm"]  # the old folder, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer"]  # nothing left behind
    with atomic_dir(target) as new:
        (new / "new.spm").write_text("whole")
    assert [p.name for p in target.iterdir()] == ["new.spm"]


# --- LineReader: a reader that reports a bad line and goes on ---------------------------------------


def _reader_lines(path, max_chars=10):
    with LineReader(path, max_chars=max_chars) as reader:
        return [tuple(line) for line in reader]


@pytest.mark.parametrize("gz", [False, True])
def test_line_reader_keeps_undecodable_bytes_in_their_line_and_goes_on(tmp_path, gz):
    data = b"\xef\xbb\xbfok\r\ncaf\xe9\nlast"
    path = tmp_path / "mixed.txt"  # gzip by its bytes, not its name
    path.write_bytes(gzip.compress(data) if gz else data)
    lines = _reader_lines(path)
    assert [(n, length) for n, _, length in lines] == [(1, 2), (2, 4), (3, 4)]
    assert lines[0][1] == "ok" and lines[2][1] == "last"  # BOM dropped, \r\n one ending, no ending at the end
    assert undecodable_byte(lines[1][1]) == "byte 0xe9 at column 4"


def test_line_reader_bounds_a_long_line_and_counts_it_whole(tmp_path):
    path = tmp_path / "long.txt"
    # 11 characters (one too many), 11 again with a \r\n that falls across two reads, 13, then 3 MB and no newline
    path.write_bytes(b"a" * 11 + b"\n" + b"b" * 11 + b"\r\n" + b"c" * 13 + b"\r\n" + b"ok\r\n" + b"z" * 3_000_000)
    lines = _reader_lines(path)
    assert [(n, length) for n, _, length in lines] == [(1, 11), (2, 11), (3, 13), (4, 2), (5, 3_000_000)]
    assert [len(text) for _, text, _ in lines] == [11, 11, 11, 2, 11]  # at most max_chars + 1 characters held
    assert "\r" not in lines[1][1] + lines[2][1]


def test_line_reader_says_why_a_file_cannot_be_read(tmp_path):
    with pytest.raises(TextFileError, match=r"nope\.txt: no such file$"):
        LineReader(tmp_path / "nope.txt", max_chars=10)
    with pytest.raises(TextFileError, match=r": is a directory, not a file$"):
        LineReader(tmp_path, max_chars=10)
    wide = tmp_path / "wide.txt"
    wide.write_bytes("\ufeffHello\n".encode("utf-16-le"))
    with pytest.raises(TextFileError, match=r"wide\.txt:1: UTF-16 text \(byte-order mark\); convert the file to UTF-8"):
        LineReader(wide, max_chars=10)
    packed = gzip.compress(b"".join(b"line %d\n" % i for i in range(20000)))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(TextFileError, match=r"cut\.gz:\d+: corrupt gzip data"):
        _reader_lines(cut)


def test_line_reader_reports_the_stored_bytes_read(tmp_path):
    path = tmp_path / "p.gz"
    path.write_bytes(gzip.compress(b"".join(b"line %d\n" % i for i in range(50000))))
    seen = []
    with LineReader(path, max_chars=100, name="upload.gz") as reader:
        assert reader.name == "upload.gz" and reader.total_bytes == path.stat().st_size
        for number, _, _ in reader:
            if number % 10000 == 0:
                seen.append(reader.bytes_read)
    assert seen == sorted(seen) and 0 < seen[0] and seen[-1] <= path.stat().st_size
