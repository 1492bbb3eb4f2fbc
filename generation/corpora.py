"""Corpus import: stream a bitext or monolingual file into gzip JSONL shards, validating every line.

Plain functions, no request cycle: the ``import_corpus`` job kind (import_job.py), the CLI and the admin
all call :func:`corpus_import`. Memory stays flat whatever the file's size: lines are read one at a
time, each shard is written as a stream, and only the first ``MAX_BAD_LINES_KEPT`` errors are kept.

Records: ``{"i": corpus-wide index, "line": line number in the file, "reference": ..., "source": ...}``
(``source`` for bitexts only), in shards ``corpora/<corpus_id>/shard-00000.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from infra.licences import NO_LICENSE, license_check
from infra.shards import read_jsonl_gz, write_jsonl_gz
from infra.storage import LocalStorage, get_storage
from infra.textfiles import GZIP_MAGIC

from .models import Corpus, CorpusFormat, CorpusShard, CorpusStatus
from .named import named_or_numbered

MAX_BAD_LINES_KEPT = 100
PROGRESS_EVERY_LINES = 2000

# Reasons (stable strings: the summary counts them, tests match them).
EMPTY_REFERENCE = "empty reference"
EMPTY_SOURCE = "empty source"
MISSING_TAB = "missing tab (expected source<TAB>reference)"
EXTRA_TAB = "more than one tab (expected source<TAB>reference)"
TAB_IN_MONO = "tab in a monolingual line (a bitext? use format bitext)"
INVALID_UTF8 = "invalid UTF-8"
TOO_LONG = "line too long"
NUL_BYTE = "NUL byte"
CR_IN_LINE = "carriage return inside the line"


REASONS = (
    EMPTY_REFERENCE,
    EMPTY_SOURCE,
    MISSING_TAB,
    EXTRA_TAB,
    TAB_IN_MONO,
    INVALID_UTF8,
    TOO_LONG,
    NUL_BYTE,
    CR_IN_LINE,
)
# A UTF-16 or UTF-32 file read as UTF-8 would decode its later lines as text with NULs between letters.
_WIDE_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def reason_kind(reason: str) -> str:
    """The kind of a bad line's reason, without its per-line detail (for the summary counts)."""
    return next((kind for kind in REASONS if reason.startswith(kind)), reason)


class CorpusImportError(Exception):
    """A clear, one-line reason the import cannot go on (names the file, and the line where there is one)."""


@dataclass(frozen=True)
class LineError:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RawLine:
    """One line of the input: its number, its text (None when it could not be decoded) or an error."""

    number: int
    text: str | None
    error: str | None = None


# --- reading ------------------------------------------------------------------------------------


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


class _Input:
    """A file opened for streaming bytes, transparently gunzipped; ``raw_position`` is the bytes read so far."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        try:
            self.raw = open(path, "rb")
        except FileNotFoundError:
            raise CorpusImportError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise CorpusImportError(f"{path}: is a directory, not a file") from None
        except OSError as exc:
            raise CorpusImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        self.total_bytes = os.fstat(self.raw.fileno()).st_size
        magic = self.raw.read(2)
        self.raw.seek(0)
        self.stream = gzip.GzipFile(fileobj=self.raw, mode="rb") if magic == GZIP_MAGIC else self.raw
        try:
            self._refuse_wide_encoding()
        except BaseException:
            self.close()
            raise

    def _refuse_wide_encoding(self) -> None:
        """A UTF-16/32 byte-order mark is a whole-file error: every line of such a file is unreadable."""
        try:
            head = self.stream.peek(4)[:4]
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise CorpusImportError(f"{self.path}:1: corrupt gzip data: {exc}") from None
        for bom, encoding in _WIDE_BOMS:
            if head.startswith(bom):
                raise CorpusImportError(
                    f"{self.path}:1: {encoding} text (byte-order mark); convert the file to UTF-8"
                ) from None

    @property
    def raw_position(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        if self.stream is not self.raw:
            self.stream.close()
        self.raw.close()

    def __enter__(self) -> _Input:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _readline(inp: _Input, limit: int, number: int) -> bytes:
    """One bounded read; a truncated or corrupt gzip stream is an import error naming the line."""
    try:
        return inp.stream.readline(limit)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CorpusImportError(f"{inp.path}:{number}: corrupt gzip data: {exc}") from None


def _iter_raw_lines(inp: _Input, max_line_chars: int) -> Iterator[RawLine]:
    """Lines as text, decoded strictly one at a time; never holds more than one (bounded) line.

    A line longer than ``max_line_chars`` characters is reported, and the rest of it is skipped in
    bounded reads, so a file with no newlines at all cannot exhaust memory.
    """
    byte_limit = 4 * max_line_chars + 2  # UTF-8 takes at most 4 bytes a character, plus \r\n
    number = 0
    while True:
        data = _readline(inp, byte_limit, number + 1)
        if not data:
            return
        number += 1
        if not data.endswith(b"\n") and len(data) >= byte_limit:
            while True:  # skip the rest of the over-long line
                more = _readline(inp, 1 << 20, number)
                if not more or more.endswith(b"\n"):
                    break
            if b"\r" in data[:-1]:  # most likely a file with CR-only line endings, read as one line
                yield RawLine(number, None, _cr_reason(data.index(b"\r")))
            else:
                yield RawLine(number, None, f"{TOO_LONG} (more than {max_line_chars} characters)")
            continue
        if data.endswith(b"\n"):
            data = data[:-2] if data.endswith(b"\r\n") else data[:-1]
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte-order mark
        nul = data.find(b"\x00")
        if nul >= 0:  # valid UTF-8, but never text: a UTF-16 file without a byte-order mark
            yield RawLine(number, None, f"{NUL_BYTE} at column {nul + 1} (UTF-16 file?)")
            continue
        if b"\r" in data:  # CR-only line endings: lines would be merged into one reference
            yield RawLine(number, None, _cr_reason(data.index(b"\r")))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield RawLine(number, None, f"{INVALID_UTF8} (byte 0x{data[exc.start]:02x} at column {exc.start + 1})")
            continue
        if len(text) > max_line_chars:
            yield RawLine(number, None, f"{TOO_LONG} ({len(text)} characters, limit {max_line_chars})")
            continue
        yield RawLine(number, text)


def _cr_reason(index: int) -> str:
    return (
        f"{CR_IN_LINE} at column {index + 1} (CR-only line endings are not supported: convert the file to LF or CRLF)"
    )


def detect_format(path: str | Path, *, max_line_chars: int | None = None) -> str:
    """``bitext`` if the first non-empty line holds a tab, else ``mono``."""
    max_line_chars = max_line_chars or settings.PARAFORGE_MAX_LINE_CHARS
    with _Input(path) as inp:
        for raw in itertools.islice(_iter_raw_lines(inp, max_line_chars), 1000):
            if raw.text is not None and raw.text.strip():
                return CorpusFormat.BITEXT if "\t" in raw.text else CorpusFormat.MONO
    return CorpusFormat.MONO


def validate_line(text: str, fmt: str) -> tuple[dict[str, str] | None, str | None]:
    """Parse one decoded line: ``(fields, None)`` or ``(None, reason)``; ``(None, None)`` for a blank line."""
    if not text.strip():
        return None, None
    if fmt == CorpusFormat.BITEXT:
        tabs = text.count("\t")
        if tabs == 0:
            return None, MISSING_TAB
        if tabs > 1:
            return None, EXTRA_TAB
        source, reference = (part.strip() for part in text.split("\t"))
        if not reference:
            return None, EMPTY_REFERENCE
        if not source:
            return None, EMPTY_SOURCE
        return {"source": source, "reference": reference}, None
    if "\t" in text:
        return None, TAB_IN_MONO
    return {"reference": text.strip()}, None


def iter_validated(
    path: str | Path,
    fmt: str,
    *,
    max_line_chars: int | None = None,
    display_name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[int, dict[str, str] | None, LineError | None]]:
    """Yield ``(line number, fields, None)`` for good lines, ``(line number, None, LineError)`` for bad
    ones and ``(line number, None, None)`` for blank lines (passed over, not errors).
    ``progress(bytes_read, total_bytes)`` is called now and then (bytes of the file as stored)."""
    max_line_chars = max_line_chars or settings.PARAFORGE_MAX_LINE_CHARS
    name = display_name or str(path)
    with _Input(path) as inp:
        if progress:
            progress(0, inp.total_bytes)
        for raw in _iter_raw_lines(inp, max_line_chars):
            if progress and raw.number % PROGRESS_EVERY_LINES == 0:
                progress(inp.raw_position, inp.total_bytes)
            if raw.error:
                yield raw.number, None, LineError(name, raw.number, raw.error)
                continue
            fields, reason = validate_line(raw.text, fmt)
            if reason:
                yield raw.number, None, LineError(name, raw.number, reason)
            else:
                yield raw.number, fields, None  # fields is None for a blank line
        if progress:
            progress(inp.total_bytes, inp.total_bytes)


# --- import ---------------------------------------------------------------------------------------


def shard_key(corpus_id: int, index: int) -> str:
    return f"corpora/{corpus_id}/shard-{index:05d}.jsonl.gz"


@dataclass
class ImportReport:
    lines_read: int = 0
    references: int = 0
    bad_lines: int = 0
    kept_errors: list[LineError] | None = None
    reasons: Counter | None = None

    def __post_init__(self):
        self.kept_errors = self.kept_errors or []
        self.reasons = self.reasons or Counter()

    def add_error(self, error: LineError) -> None:
        self.bad_lines += 1
        # the summary counts the kind of error, without the per-line detail in parentheses
        self.reasons[reason_kind(error.reason)] += 1
        if len(self.kept_errors) < MAX_BAD_LINES_KEPT:
            self.kept_errors.append(error)

    def summary(self) -> str:
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.reasons.items()))
        return f"{self.bad_lines} bad line(s) of {self.lines_read}" + (f": {parts}" if parts else "")


@dataclass(frozen=True)
class CorpusTerms:
    """Where a corpus's sentences come from and under which terms (``import_corpus --source --license --terms``):
    the release card names them, and ``export_release`` refuses a licence they do not allow."""

    source: str = ""
    license: str = NO_LICENSE
    terms: str = ""

    def as_params(self) -> dict[str, str]:
        return {"source": self.source, "license": self.license, "terms": self.terms}


def corpus_terms(source: str | None = None, license: str | None = None, terms: str | None = None) -> CorpusTerms:
    """The checked ``CorpusTerms``: ``license`` an SPDX id (``infra.licences.license_check``; none: NOASSERTION),
    ``source`` and ``terms`` one line of at most 500 characters each; a CorpusImportError says what is wrong."""
    try:
        spdx = license_check(license)
    except ValueError as exc:
        raise CorpusImportError(f"--license: {exc}") from None
    texts = {}
    for name, value in (("source", source), ("terms", terms)):
        text = " ".join(str(value or "").split())
        if len(text) > 500:
            raise CorpusImportError(f"--{name}: at most 500 characters, not {len(text)}")
        texts[name] = text
    return CorpusTerms(source=texts["source"], license=spdx, terms=texts["terms"])


def corpus_import(
    *,
    name: str,
    path: str | Path,
    format: str | None = None,
    on_error: str = "skip",
    shard_size: int | None = None,
    max_line_chars: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    job=None,
    display_name: str | None = None,
    on_bad_line: Callable[[LineError], None] | None = None,
    terms: CorpusTerms | None = None,
) -> Corpus:
    """Import ``path`` as corpus ``name``; returns the READY corpus.

    ``format``: ``bitext`` (source<TAB>reference), ``mono`` (one English sentence a line) or None to
    detect it from the first non-empty line. ``on_error``: ``skip`` reports bad lines and goes on;
    ``abort`` stops at the first bad line and removes everything written (no corpus row is left).
    ``terms``: where the sentences come from and their licence (``corpus_terms``; none: ``NOASSERTION``).
    Raises :class:`CorpusImportError` with a one-line reason.
    """
    if on_error not in ("skip", "abort"):
        raise CorpusImportError(f"on_error must be 'skip' or 'abort', not {on_error!r}")
    shard_size = int(shard_size or settings.PARAFORGE_SHARD_SIZE)
    if shard_size < 1:
        raise CorpusImportError(f"shard size must be at least 1, not {shard_size}")
    max_line_chars = int(max_line_chars or settings.PARAFORGE_MAX_LINE_CHARS)
    display = display_name or str(path)
    if not name or not name.strip():
        raise CorpusImportError("a corpus needs a name")
    name = name.strip()
    fmt = format or detect_format(path, max_line_chars=max_line_chars)
    if fmt not in CorpusFormat.values:
        raise CorpusImportError(f"format must be 'bitext' or 'mono', not {fmt!r}")
    with _Input(path):  # a missing or unreadable file fails here, before any row is created
        pass
    if Corpus.objects.filter(name=name).exists():
        raise CorpusImportError(f"a corpus named {name!r} already exists")

    storage = get_storage()
    terms = terms or CorpusTerms()
    corpus = Corpus.objects.create(
        name=name,
        format=fmt,
        status=CorpusStatus.IMPORTING,
        source_name=display[:500],
        import_job=job,
        source=terms.source,
        license=terms.license,
        terms=terms.terms,
    )
    corpus.storage_prefix = f"corpora/{corpus.pk}"
    corpus.save(update_fields=["storage_prefix"])
    report = ImportReport()

    def records() -> Iterator[dict[str, Any]]:
        index = 0
        for number, fields, error in iter_validated(
            path, fmt, max_line_chars=max_line_chars, display_name=display, progress=progress
        ):
            report.lines_read = number
            if error is not None:
                report.add_error(error)
                if on_bad_line:
                    on_bad_line(error)
                if on_error == "abort":
                    raise CorpusImportError(f"{error} (import aborted: nothing was kept)")
                continue
            if fields is None:
                continue
            yield {"i": index, "line": number, **fields}
            index += 1

    shard_rows: list[CorpusShard] = []
    try:
        stream = records()
        first_record = 0
        for shard_index in itertools.count():
            try:
                head = next(stream)
            except StopIteration:
                break
            info = write_jsonl_gz(
                shard_key(corpus.pk, shard_index),
                itertools.chain([head], itertools.islice(stream, shard_size - 1)),
                storage=storage,
            )
            shard_rows.append(
                CorpusShard(
                    corpus=corpus,
                    index=shard_index,
                    key=info["key"],
                    n_records=info["records"],
                    first_record=first_record,
                    sha256=info["sha256"],
                    bytes=info["bytes"],
                )
            )
            first_record += info["records"]
        report.references = first_record
        if report.references == 0:
            detail = f" ({report.summary()}; first: {report.kept_errors[0]})" if report.bad_lines else ""
            raise CorpusImportError(
                f"{display}: no valid {'pairs' if fmt == 'bitext' else 'sentences'} to import{detail}"
            )
        with transaction.atomic():
            CorpusShard.objects.bulk_create(shard_rows)
            corpus.status = CorpusStatus.READY
            corpus.n_references = report.references
            corpus.n_lines_read = report.lines_read
            corpus.n_bad_lines = report.bad_lines
            corpus.bad_lines = [e.as_dict() for e in report.kept_errors]
            corpus.save()
    except BaseException:
        corpus_discard(corpus)
        raise
    corpus.import_report = report  # the summary, for callers (not stored)
    return corpus


def corpus_discard(corpus: Corpus) -> None:
    """Remove a corpus's shards from storage and its rows (an aborted or abandoned import)."""
    delete_folder(get_storage(), f"corpora/{corpus.pk}")
    Corpus.objects.filter(pk=corpus.pk).delete()


def delete_folder(storage, folder: str) -> int:
    """Delete the keys under ``folder/`` (only those: on S3 a bare prefix ``corpora/1`` also matches
    ``corpora/10/...``, so keys are filtered on the folder with its slash)."""
    folder = folder.strip("/") + "/"
    if isinstance(storage, LocalStorage):
        return storage.delete_prefix(folder)  # a directory there: removed with what is in it
    keys = [k for k in storage.list(folder) if k.startswith(folder)]
    for key in keys:
        storage.delete(key)
    return len(keys)


# --- reading a corpus back -------------------------------------------------------------------------


def corpus_get(name_or_id: str) -> Corpus | None:
    """A corpus by its name, else by its primary key (what the CLIs accept as CORPUS); None if neither."""
    return named_or_numbered(Corpus, name_or_id)


def corpus_records(corpus: Corpus, *, shard: CorpusShard | None = None) -> Iterator[dict[str, Any]]:
    """Stream a corpus's records (all shards in order, or one)."""
    storage = get_storage()
    shards = [shard] if shard is not None else list(corpus.shards.order_by("index"))
    for s in shards:
        yield from read_jsonl_gz(s.key, storage=storage)
