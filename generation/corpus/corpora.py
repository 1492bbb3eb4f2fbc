"""Corpus import: stream a bitext or monolingual file into gzip JSONL shards, validating every line.

Plain functions, no request cycle: the ``import_corpus`` job kind (import_job.py), which the CLI and the
admin start, calls :func:`corpus_import` with the job's :class:`ImportCorpusParams` (the command's options,
the stored params and the worker's reading all come from that one class). The user's file is read through
``infra.textfiles.LineReader`` (gzip by its bytes, BOM, strict UTF-8 naming the line and the byte). Memory
stays flat whatever the file's size: lines are read one at a time and bounded, each shard is written as a
stream, and only the first ``MAX_BAD_LINES_KEPT`` errors are kept.

Records: ``{"i": corpus-wide index, "line": line number in the file, "reference": ..., "source": ...}``
(``source`` for bitexts only), in shards ``corpora/<corpus_id>/shard-00000.jsonl.gz``.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from infra.licences import NO_LICENSE, license_check
from infra.shards import read_jsonl_gz, write_jsonl_gz
from infra.storage import LocalStorage, get_storage
from infra.textfiles import LineReader, TextFileError, undecodable_byte
from jobs.params import ParamsError, check_bounds, fail, int_at_least, param, to_json

from ..models import Corpus, CorpusFormat, CorpusShard, CorpusStatus
from ..named import named_or_numbered

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


def reason_kind(reason: str) -> str:
    """The kind of a bad line's reason, without its per-line detail (for the summary counts)."""
    return next((kind for kind in REASONS if reason.startswith(kind)), reason)


class CorpusImportError(Exception):
    """A clear, one-line reason the import cannot go on (names the file, and the line where there is one)."""


class ImportParamsError(CorpusImportError, ParamsError):
    """A setting of an import that cannot work (``str()`` names it as stored, ``option_message`` as the
    command's option)."""


@dataclass(frozen=True)
class LineError:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- reading ------------------------------------------------------------------------------------


def open_corpus_file(path: str | Path, *, max_line_chars: int) -> LineReader:
    """The user's file, line by line (``infra.textfiles.LineReader``: gzip by its bytes, BOM, bounded lines); a
    missing, unreadable or UTF-16/32 file is a CorpusImportError naming it."""
    try:
        return LineReader(path, max_chars=max_line_chars)
    except TextFileError as exc:
        raise CorpusImportError(str(exc)) from None


def check_corpus_file(path: str | Path) -> None:
    """Open and close the file: a missing or unreadable one fails here, before any job or row is created."""
    open_corpus_file(path, max_line_chars=1).close()


def _lines(reader: LineReader) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line number, text, None)`` of each line, or ``(line number, None, reason)`` for a line that is not
    text this import takes (the reason's columns count characters, as ``infra.textfiles`` does)."""
    max_chars = reader.max_chars
    try:
        for number, text, length in reader:
            nul = text.find("\x00")
            if nul >= 0:  # valid UTF-8, but never text: a UTF-16 file without a byte-order mark
                yield number, None, f"{NUL_BYTE} at column {nul + 1} (UTF-16 file?)"
            elif "\r" in text:  # CR-only line endings: lines would be merged into one reference
                yield number, None, _cr_reason(text.index("\r"))
            elif not text.isascii() and (bad := undecodable_byte(text)):
                yield number, None, f"{INVALID_UTF8} ({bad})"
            elif length > max_chars:
                yield number, None, f"{TOO_LONG} ({length} characters, limit {max_chars})"
            else:
                yield number, text, None
    except TextFileError as exc:
        raise CorpusImportError(str(exc)) from None


def _cr_reason(index: int) -> str:
    return (
        f"{CR_IN_LINE} at column {index + 1} (CR-only line endings are not supported: convert the file to LF or CRLF)"
    )


def detect_format(path: str | Path, *, max_line_chars: int | None = None) -> str:
    """``bitext`` if the first non-empty line holds a tab, else ``mono``."""
    max_line_chars = max_line_chars or settings.PARAFORGE_MAX_LINE_CHARS
    with open_corpus_file(path, max_line_chars=max_line_chars) as reader:
        for _, text, _ in itertools.islice(_lines(reader), 1000):
            if text is not None and text.strip():
                return CorpusFormat.BITEXT if "\t" in text else CorpusFormat.MONO
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
    with open_corpus_file(path, max_line_chars=max_line_chars) as reader:
        if progress:
            progress(0, reader.total_bytes)
        for number, text, problem in _lines(reader):
            if progress and number % PROGRESS_EVERY_LINES == 0:
                progress(reader.bytes_read, reader.total_bytes)
            if problem:
                yield number, None, LineError(name, number, problem)
                continue
            fields, reason = validate_line(text, fmt)
            if reason:
                yield number, None, LineError(name, number, reason)
            else:
                yield number, fields, None  # fields is None for a blank line
        if progress:
            progress(reader.total_bytes, reader.total_bytes)


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
    the release card names them, and ``export_release`` refuses a licence they do not allow. Checked when made:
    ``license`` an SPDX id in SPDX's case (``infra.licences.license_check``; none: NOASSERTION), ``source``
    and ``terms`` one line of at most 500 characters each (runs of spaces made one); a CorpusImportError
    (``--license: ...``, as the admin's form reads it) says what is wrong."""

    source: str = field(
        default="", metadata=param(help="where the sentences come from (a dataset's name, a URL, a citation)")
    )
    license: str = field(
        default=NO_LICENSE,
        metadata=param(
            help="the sentences' licence as an SPDX id (CC-BY-4.0, CC-BY-SA-4.0, CC-BY-NC-4.0, ...; LicenseRef-NAME "
            "for terms of their own; default NOASSERTION: not stated); a release may not grant more than it allows"
        ),
    )
    terms: str = field(default="", metadata=param(help="the terms in words, for the release card"))

    def __post_init__(self) -> None:
        try:
            spdx = license_check(self.license)
        except ValueError as exc:
            raise ImportParamsError(f"--license: {exc}") from None
        object.__setattr__(self, "license", spdx)
        for name in ("source", "terms"):
            text = " ".join(str(getattr(self, name) or "").split())
            if len(text) > 500:
                raise ImportParamsError(f"--{name}: at most 500 characters, not {len(text)}")
            object.__setattr__(self, name, text)

    def as_params(self) -> dict[str, str]:
        return to_json(self)


def corpus_terms(source: str | None = None, license: str | None = None, terms: str | None = None) -> CorpusTerms:
    """The checked ``CorpusTerms`` of what a form or a command was given (None: not given)."""
    return CorpusTerms(source=source or "", license=license or NO_LICENSE, terms=terms or "")


@dataclass(frozen=True)
class ImportCorpusParams:
    """The settings of an ``import_corpus`` job, as its params store them and ``import_corpus`` takes them.

    Checked when made (an :class:`ImportParamsError`): a name, a known format and ``on_error``, sizes of at
    least 1. ``format`` None: detected from the first non-empty line; ``shard_size`` / ``max_line_chars``
    None: the settings' (PARAFORGE_SHARD_SIZE / PARAFORGE_MAX_LINE_CHARS). Jobs stored before ``source``,
    ``license`` and ``terms`` existed read as NOASSERTION."""

    name: str = field(metadata=param(help="the corpus's name", cli=False))
    path: str = field(metadata=param(help="the file the worker reads (plain or gzip)", cli=False))
    format: str | None = field(
        default=None,
        metadata=param(
            help="default: bitext if the first non-empty line holds a tab, else mono", choices=CorpusFormat.values
        ),
    )
    on_error: str = field(
        default="skip",
        metadata=param(
            help="skip bad lines (reported) or abort, keeping nothing (default: skip)", choices=("skip", "abort")
        ),
    )
    shard_size: int | None = field(
        # a shard is one worker task's references: above a million, one task's memory and time are not bounded
        default=None,
        metadata=param(help="references per shard (default PARAFORGE_SHARD_SIZE)", minimum=1, maximum=1_000_000),
    )
    max_line_chars: int | None = field(
        default=None,
        metadata=param(help="longer lines are bad (default PARAFORGE_MAX_LINE_CHARS)", minimum=1, maximum=1_000_000),
    )
    display_name: str | None = field(
        default=None,
        metadata=param(help="the file as errors name it (an upload's own name); default: the path", cli=False),
    )
    remove_file: bool = field(
        default=False,
        metadata=param(
            help="delete the file once imported (an upload's copy)", cli=False, form=False, stored="non_default"
        ),
    )
    terms: CorpusTerms = field(default=CorpusTerms(), metadata=param(flatten=True))

    def __post_init__(self) -> None:
        if not self.name or not str(self.name).strip():
            raise ImportParamsError("a corpus needs a name")
        object.__setattr__(self, "path", os.fspath(self.path))
        object.__setattr__(self, "format", self.format or None)  # "" (a form's "detect") is None
        object.__setattr__(self, "display_name", self.display_name or None)
        if self.format is not None and self.format not in CorpusFormat.values:
            raise fail(
                "{0} must be 'bitext' or 'mono', not {value!r}", "format", error=ImportParamsError, value=self.format
            )
        if self.on_error not in ("skip", "abort"):
            raise fail(
                "{0} must be 'skip' or 'abort', not {value!r}", "on_error", error=ImportParamsError, value=self.on_error
            )
        for name in ("shard_size", "max_line_chars"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, int_at_least(name, getattr(self, name), 1, error=ImportParamsError))
        check_bounds(self, error=ImportParamsError)


def corpus_import(
    params: ImportCorpusParams,
    *,
    progress: Callable[[int, int], None] | None = None,
    job=None,
    on_bad_line: Callable[[LineError], None] | None = None,
) -> Corpus:
    """Import ``params.path`` as corpus ``params.name``; returns the READY corpus.

    ``format``: ``bitext`` (source<TAB>reference), ``mono`` (one English sentence a line) or None to
    detect it from the first non-empty line. ``on_error``: ``skip`` reports bad lines and goes on;
    ``abort`` stops at the first bad line and removes everything written (no corpus row is left).
    ``progress(bytes_read, total_bytes)`` now and then; ``on_bad_line`` for each bad line; ``job``: the
    import job the corpus records. Raises :class:`CorpusImportError` with a one-line reason.
    """
    path = params.path
    shard_size = params.shard_size or settings.PARAFORGE_SHARD_SIZE
    max_line_chars = params.max_line_chars or settings.PARAFORGE_MAX_LINE_CHARS
    display = params.display_name or path
    name = params.name.strip()
    check_corpus_file(path)  # a missing or unreadable file fails here, before any row is created
    fmt = params.format or detect_format(path, max_line_chars=max_line_chars)
    if Corpus.objects.filter(name=name).exists():
        raise CorpusImportError(f"a corpus named {name!r} already exists")

    storage = get_storage()
    terms = params.terms
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
                if params.on_error == "abort":
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
