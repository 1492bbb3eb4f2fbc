"""The one way to read a user's text file, and to write any file so that it appears whole or not at all.

Reading: gzip is recognised by its magic bytes (not the file name), a UTF-8 byte-order mark is dropped, and
the text must be UTF-8. The bytes are decoded with ``errors="surrogateescape"`` so that an undecodable byte
reaches :func:`read_lines` as a lone surrogate inside its own line instead of failing a whole read-ahead
block: the error (:class:`NotUtf8Error`) then names the line, the byte and where it sits (a strict
decoder only knows an offset into its buffer). Lines end at LF only unless a caller asks otherwise (the
``csv`` module needs ``newline=""``), so ``\\r\\n`` endings are kept for the caller to strip and a stray
``\\r`` does not split a line.

A reader that reports a bad line and goes on (a corpus import: millions of lines, any of them possibly
malformed) uses :class:`LineReader`: the same gzip, BOM and UTF-8 rules, one line at a time in bounded
memory whatever the file holds (a file with no newline at all is one over-long line, skipped in bounded
reads), the bytes read so far for a progress bar, and a UTF-16/32 file refused whole at its byte-order
mark rather than line by line.

Writing: :func:`atomic_write` / :func:`atomic_path` (a file) and :func:`atomic_dir` (a folder) write beside
the target under a ``.NAME.*.tmp`` name and rename over it only once the block succeeds; a failure or an
interruption leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import tempfile
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple, TextIO

GZIP_MAGIC = b"\x1f\x8b"
# A UTF-16 or UTF-32 file read as UTF-8 would decode its later lines as text with NULs between letters
# (UTF-32's marks first: UTF-16 LE's is a prefix of UTF-32 LE's).
WIDE_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


class TextFileError(ValueError):
    """A user's file that cannot be read as text; the message names the file and (1-based) line."""

    def __init__(self, path: str | Path, line: int | None, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


class PairsFileError(ValueError):
    """A sentence-pairs TSV file (the rewriter's training pairs, the pairs ``score_pairs`` scores) that
    cannot be used; the message names the file and the bad line(s)."""


class NotUtf8Error(TextFileError):
    """A line holding a byte that is not UTF-8: ``byte`` (its value), ``column`` (1-based, in characters of
    the decoded line) and ``offset`` (1-based, in bytes of the line)."""

    def __init__(self, path: str | Path, line: int, text: str):
        start = _first_undecodable(text)
        if start is None:
            raise ValueError("the line is UTF-8")
        code = ord(text[start])
        self.byte = code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else None
        self.column = start + 1
        self.offset = len(text[:start].encode("utf-8", "surrogateescape")) + 1
        super().__init__(path, line, f"not UTF-8 ({_describe(text, start)})")


def _first_undecodable(line: str) -> int | None:
    """Where the first byte that was not UTF-8 sits in a line read with ``surrogateescape``, or None."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _describe(line: str, start: int) -> str:
    code = ord(line[start])
    what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a surrogate"
    return f"{what} at column {start + 1}"


def undecodable_byte(line: str) -> str | None:
    """For a line read with ``surrogateescape``: None if it was UTF-8, else e.g. ``"byte 0xe9 at column 4"``."""
    start = _first_undecodable(line)
    return None if start is None else _describe(line, start)


class _Prefixed(io.RawIOBase):
    """A stream that cannot peek (an S3 body) with the bytes already read put back in front."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.rest.close()
        super().close()


class _OwningText(io.TextIOWrapper):
    """Closing the text also closes the file under a gzip layer (GzipFile leaves its ``fileobj`` open)."""

    def __init__(self, stream, owned, **kwargs):
        super().__init__(stream, **kwargs)
        self._owned = owned

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._owned.close()


def open_text(source: str | Path | BinaryIO, *, errors: str = "surrogateescape", newline: str | None = "\n") -> TextIO:
    """A path or a binary stream as text: gunzipped if it starts with gzip's magic bytes, a UTF-8 BOM
    dropped. Iterate it with :func:`read_lines` for strict UTF-8; ``errors="replace"`` is for the one reader
    that must take any bytes (PPDB: a several-GB download where a bad line is skipped, not fatal)."""
    raw = open(source, "rb") if isinstance(source, (str, Path)) else source
    try:
        if hasattr(raw, "peek"):
            magic = raw.peek(2)[:2]
        else:
            magic = raw.read(2)
            raw = io.BufferedReader(_Prefixed(magic, raw))
        return _OwningText(_content(raw, magic), raw, encoding="utf-8-sig", errors=errors, newline=newline)
    except BaseException:
        raw.close()
        raise


def _content(raw: BinaryIO, magic: bytes) -> BinaryIO:
    """The bytes a file holds: gunzipped when it starts with gzip's magic bytes (not when its name says so)."""
    return gzip.GzipFile(fileobj=raw, mode="rb") if magic == GZIP_MAGIC else raw


def read_lines(
    source: str | Path | BinaryIO | TextIO,
    *,
    name: str | Path | None = None,
    newline: str | None = "\n",
    start: int = 1,
) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file, line endings kept; a line that is not UTF-8 raises
    :class:`NotUtf8Error` naming ``name`` (default: the path). The file is opened now (OSError here, not at
    the first line) and closed when the iteration ends. An already open text stream (from
    :func:`open_text`) is read from where it stands, numbering from ``start``."""
    handle = source if isinstance(source, io.TextIOBase) else open_text(source, newline=newline)
    label = (
        name
        if name is not None
        else (source if isinstance(source, (str, Path)) else getattr(handle, "name", "<stream>"))
    )
    return _checked_lines(handle, label, start, close=handle is not source)


def _checked_lines(handle: TextIO, name, start: int, *, close: bool) -> Iterator[tuple[int, str]]:
    try:
        for number, line in enumerate(handle, start):
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:
                raise NotUtf8Error(name, number, line) from None
            yield number, line
    finally:
        if close:
            handle.close()


def tsv_rows(
    source: str | Path | BinaryIO | TextIO,
    *,
    name: str | Path | None = None,
    newline: str | None = "\n",
    start: int = 1,
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of a tab-separated file (unquoted fields, line ending stripped); blank
    lines are skipped; strict UTF-8 as in :func:`read_lines`."""
    for number, line in read_lines(source, name=name, newline=newline, start=start):
        line = line.rstrip("\r\n")
        if line.strip():
            yield number, line.split("\t")


def open_error(path: str | Path, exc: OSError) -> TextFileError:
    """Why ``path`` could not be opened, in words that name it: ``no such file``, ``is a directory, not a
    file`` or ``cannot read: <the system's reason>``."""
    if isinstance(exc, FileNotFoundError):
        reason = "no such file"
    elif isinstance(exc, IsADirectoryError):
        reason = "is a directory, not a file"
    else:
        reason = f"cannot read: {exc.strerror or exc}"
    return TextFileError(path, None, reason)


class BoundedLine(NamedTuple):
    """One line of a :class:`LineReader`. ``text``: the line without its ending (``\\n`` or ``\\r\\n``), a byte
    that is not UTF-8 as a lone surrogate (:func:`undecodable_byte` describes it); cut to its first
    ``max_chars + 1`` characters when it is longer. ``length``: the whole line's characters."""

    number: int
    text: str
    length: int


class LineReader:
    """A user's text file, line by line in bounded memory: gzip by its magic bytes, a UTF-8 BOM dropped, lines
    ending at LF (``\\r\\n`` taken as one ending, a lone ``\\r`` kept in the line), bytes that are not UTF-8
    kept as lone surrogates for the caller to report, line by line, and go on.

    A line of more than ``max_chars`` characters is read ``max_chars + 2`` characters at a time and the rest
    of it skipped in bounded reads (its ``length`` is still counted). Opening fails with a
    :class:`TextFileError` (:func:`open_error`; a UTF-16/32 byte-order mark: the whole file is not UTF-8);
    reading a damaged gzip stream fails with one naming the line. ``total_bytes`` and ``bytes_read`` are the
    file's bytes as stored (compressed, for a gzip file): a progress bar's figures. ``name`` is the file in
    messages (default: the path)."""

    def __init__(self, path: str | Path, *, max_chars: int, name: str | Path | None = None):
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, not {max_chars}")
        self.name = str(path if name is None else name)
        self.max_chars = max_chars
        try:
            self._raw = open(path, "rb")
        except OSError as exc:
            raise open_error(self.name, exc) from None
        self._text: TextIO | None = None
        try:
            self.total_bytes = os.fstat(self._raw.fileno()).st_size
            magic = self._raw.peek(2)[:2]
            self.gzipped = magic == GZIP_MAGIC
            self._stream = _content(self._raw, magic)
            head = self._guarded(self._stream.peek, 4, 1)[:4]
            for bom, encoding in WIDE_BOMS:
                if head.startswith(bom):
                    raise TextFileError(self.name, 1, f"{encoding} text (byte-order mark); convert the file to UTF-8")
            self._text = io.TextIOWrapper(self._stream, encoding="utf-8-sig", errors="surrogateescape", newline="\n")
            self._text._CHUNK_SIZE = 1 << 16  # type: ignore[attr-defined]  # 8 KiB reads: ~10% slower through gzip
        except BaseException:
            self.close()
            raise

    @property
    def bytes_read(self) -> int:
        """The file's bytes read so far (as stored: compressed, for a gzip file)."""
        return self._raw.tell()

    def _guarded(self, read: Callable[[int], Any], size: int, number: int) -> Any:
        """``read(size)``; a damaged gzip stream (or a failing disk) is a TextFileError naming the line."""
        try:
            return read(size)
        except (OSError, EOFError, zlib.error) as exc:
            reason = f"corrupt gzip data: {exc}" if self.gzipped else f"cannot read: {exc}"
            raise TextFileError(self.name, number, reason) from None

    def __iter__(self) -> Iterator[BoundedLine]:
        if self._text is None:
            raise ValueError(f"{self.name}: the file is closed")
        limit = self.max_chars + 2  # a line of max_chars and its \r\n: read whole in one call
        readline, guarded = self._text.readline, self._guarded
        number = 0
        while True:
            number += 1
            chunk = guarded(readline, limit, number)
            if not chunk:
                return
            if chunk[-1] == "\n":
                text = chunk[:-2] if chunk[-2:] == "\r\n" else chunk[:-1]
                yield BoundedLine(number, text, len(text))
            elif len(chunk) < limit:  # the last line, with no ending
                yield BoundedLine(number, chunk, len(chunk))
            else:  # longer than max_chars: count the rest in bounded reads, never hold it
                length, last = len(chunk), chunk
                while last[-1] != "\n":
                    more = guarded(readline, 1 << 20, number)
                    if not more:
                        break
                    length += len(more)
                    last = last[-1] + more  # an ending's \r may sit at the end of the previous read
                ending = (2 if last[-2:] == "\r\n" else 1) if last[-1] == "\n" else 0
                yield BoundedLine(number, chunk[: self.max_chars + 1], length - ending)

    def close(self) -> None:
        if self._text is not None:
            self._text.close()
        elif getattr(self, "_stream", None) is not None and self._stream is not self._raw:
            self._stream.close()
        self._raw.close()

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A fresh temporary path beside ``path`` (``.NAME.<unique>.tmp``, not created) that is renamed to
    ``path`` when the block succeeds, and removed when it fails. For writers that need a path (SQLite)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A fresh folder beside ``path`` (``.NAME.<unique>.tmp``) that replaces ``path`` (an older folder there
    is removed) when the block succeeds, and is removed when it fails: a folder of files (a checkpoint, a
    tokenizer) appears whole or not at all."""
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_write(
    path: str | Path,
    mode: str = "wb",
    *,
    encoding: str | None = None,
    newline: str | None = None,
    private: bool = False,
) -> Iterator[IO]:
    """Open a file for writing that appears at ``path`` whole (flushed and synced) or not at all.

    ``private``: the file is readable by its owner only (storage's files have always been created so)."""
    if "w" not in mode:
        raise ValueError(f"atomic_write opens for writing: mode {mode!r}")
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
        with open(fd, mode, encoding=encoding, newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
