"""infra/textfiles.py: the one way a user's file is read (gzip by its bytes, BOM, strict UTF-8 naming the
line) and every file written (whole or not at all)."""

from __future__ import annotations

import gzip

import pytest

from infra.textfiles import NotUtf8Error, atomic_write, open_text, read_lines, tsv_rows


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
