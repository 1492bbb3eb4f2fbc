"""Inverse document frequency over a corpus's English side: IDF = ln(N / df), a sentence a document."""

from __future__ import annotations

import gzip
import heapq
import io
import math
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from infra.storage import get_storage
from infra.textfiles import NotUtf8Error, atomic_write, open_text, read_lines

from ..named import named_or_numbered


class IdfFileError(ValueError):
    pass


def idf_value(n_documents: int, document_frequency: int) -> float:
    return math.log(n_documents / document_frequency)


class IdfValues(dict):
    """A loaded IDF table, token -> IDF, that cannot change after it is built: constraint selection
    may then remember, per table, which token texts join a reference's pool (generation/constraints/sets.py).
    Build one with ``IdfValues(pairs_or_mapping)``; copy it with ``dict(values)`` to edit."""

    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("IdfValues cannot be changed; copy it with dict(...) to edit")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __reduce__(self):  # (pickle and copy would otherwise refill it item by item)
        return IdfValues, (dict(self),)


_WHITESPACE = re.compile(r"\s")


def parse_idf_lines(lines: Iterable[tuple[int, str]], name: str) -> IdfValues:
    """``(line number, line)`` of ``token<TAB>idf`` lines (a header line ``token<TAB>idf`` is allowed), as
    :func:`infra.textfiles.read_lines` gives them -> {token: idf}; a bad line is an IdfFileError naming
    ``name`` and its line number.

    Refused, because selection would silently misbehave on them: a token that is empty, holds whitespace
    (spaCy tokens never do, so it could never match) or comes twice (which IDF?), and an IDF that is
    negative, NaN or infinite (ln(N/df) is none of them)."""
    table: dict[str, float] = {}
    for number, line in lines:
        line = line.rstrip("\n\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if number == 1 and parts[:2] == ["token", "idf"]:
            continue
        if len(parts) != 2:
            raise IdfFileError(f"{name}:{number}: expected token<TAB>idf, got {line[:80]!r}")
        token, text = parts
        if not token:
            raise IdfFileError(f"{name}:{number}: empty token")
        if _WHITESPACE.search(token):
            raise IdfFileError(f"{name}:{number}: token {token[:40]!r} holds whitespace")
        try:
            value = float(text)
        except ValueError:
            raise IdfFileError(f"{name}:{number}: IDF {text[:40]!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise IdfFileError(f"{name}:{number}: IDF {text[:40]!r} is not a finite number >= 0")
        if token in table:
            raise IdfFileError(f"{name}:{number}: token {token[:40]!r} appears twice")
        table[token] = value
    return IdfValues(table)


def read_idf_tsv(path: str | Path) -> IdfValues:
    """Read a local ``token<TAB>idf`` file, plain or gzipped (every line checked, see parse_idf_lines)."""
    try:
        lines = read_lines(path, newline=None)
    except OSError as exc:
        raise IdfFileError(f"cannot read IDF file {path}: {exc.strerror or exc}") from None
    try:
        table = parse_idf_lines(lines, str(path))
    except NotUtf8Error as exc:
        raise IdfFileError(str(exc)) from None
    finally:
        lines.close()
    if not table:
        raise IdfFileError(f"IDF file {path} holds no entries")
    return table


# --- counting, merging, tables ---------------------------------------------------------------------
# Document frequencies are counted per corpus shard on lowercased spaCy tokens (the tokenizer only; a
# token repeated in one sentence counts once), written as a sorted ``token<TAB>df`` gzip file per shard,
# then merged as sorted streams (memory does not grow with the number of shards) into the table's TSV.

DF_HEADER_PREFIX = "# documents\t"  # first line of a df file; tokens never hold whitespace


def sentence_tokens(docs) -> Iterator[set[str]]:
    """For each spaCy Doc, the set of its lowercased tokens (whitespace tokens left out)."""
    for doc in docs:
        yield {tok.lower_ for tok in doc if not tok.is_space}


def count_document_frequencies(
    sentences: Iterable[str], *, nlp=None, batch_size: int = 1000, progress: Callable[[int], None] | None = None
) -> tuple[int, Counter]:
    """``(number of sentences, Counter token -> number of sentences holding it)``."""
    from ..nlp import load_pipeline

    nlp = nlp or load_pipeline(tagger=False)
    df: Counter = Counter()
    n = 0
    for tokens in sentence_tokens(nlp.pipe(sentences, batch_size=batch_size)):
        df.update(tokens)
        n += 1
        if progress and n % batch_size == 0:
            progress(n)
    return n, df


def write_df_file(key: str, n_documents: int, df: Counter, *, storage=None) -> None:
    """Write one shard's counts (sorted by token, deterministic bytes) atomically to storage."""

    storage = storage or get_storage()
    with storage.open_write(key) as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            out = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
            out.write(f"{DF_HEADER_PREFIX}{n_documents}\n")
            for token in sorted(df):
                out.write(f"{token}\t{df[token]}\n")
            out.flush()
            out.detach()


def read_df_header(key: str, *, storage=None) -> int:
    """The number of documents a df file was counted over."""

    storage = storage or get_storage()
    with open_text(storage.open_read(key)) as text:
        first = text.readline().rstrip("\n")
    if not first.startswith(DF_HEADER_PREFIX):
        raise IdfFileError(f"{key}: not a document-frequency file")
    return int(first[len(DF_HEADER_PREFIX) :])


def _iter_df(key: str, storage) -> Iterator[tuple[str, int]]:
    with open_text(storage.open_read(key)) as text:
        text.readline()
        for line in text:
            token, _, count = line.rstrip("\n").rpartition("\t")
            yield token, int(count)


MERGE_FAN_IN = 64  # df files read at once; more shards are merged in rounds through local temporary files


def _sum_sorted(streams) -> Iterator[tuple[str, int]]:
    """Merge sorted ``(token, count)`` streams, summing the counts of equal tokens."""

    current, total = None, 0
    for token, count in heapq.merge(*streams):
        if token != current:
            if current is not None:
                yield current, total
            current, total = token, 0
        total += count
    if current is not None:
        yield current, total


def _iter_local_counts(path: Path) -> Iterator[tuple[str, int]]:

    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as fh:
        for line in fh:
            token, _, count = line.rstrip("\n").rpartition("\t")
            yield token, int(count)


def merge_df_files(keys: list[str], out_key: str, n_documents: int, *, storage=None, fan_in: int = MERGE_FAN_IN) -> int:
    """Merge sorted per-shard df files into ``out_key`` (``token<TAB>idf`` sorted by token). Returns the types.

    Streams: memory holds one line per input, never the vocabulary; at most ``fan_in`` inputs are open
    at once (S3 connections, file handles), larger sets are summed in rounds into local temporary files.
    """

    storage = storage or get_storage()
    if n_documents <= 0:
        raise IdfFileError("cannot compute IDF over zero documents")
    fan_in = max(2, fan_in)
    with tempfile.TemporaryDirectory(prefix="paraforge-idf-") as tmp:
        sources = [lambda k=k: _iter_df(k, storage) for k in keys]
        round_ = 0
        while len(sources) > fan_in:
            merged = []
            for start in range(0, len(sources), fan_in):
                path = Path(tmp) / f"r{round_}-{start}.tsv.gz"
                with gzip.open(path, "wt", encoding="utf-8", newline="\n", compresslevel=1) as fh:
                    for token, total in _sum_sorted([make() for make in sources[start : start + fan_in]]):
                        fh.write(f"{token}\t{total}\n")
                merged.append(lambda p=path: _iter_local_counts(p))
            sources, round_ = merged, round_ + 1
        n_types = 0
        with storage.open_write(out_key) as raw:
            out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            for token, total in _sum_sorted([make() for make in sources]):
                out.write(f"{token}\t{idf_value(n_documents, total)!r}\n")
                n_types += 1
            out.flush()
            out.detach()
    return n_types


def idf_table_key(table_id: int) -> str:
    return f"idf/{table_id}.tsv"


def iter_idf_table(table) -> Iterator[tuple[str, float]]:
    """Stream ``(token, idf)`` from an IdfTable's TSV in storage."""

    with open_text(get_storage().open_read(table.key)) as text:
        for line in text:
            line = line.rstrip("\n")
            if line and line != "token\tidf":
                token, _, value = line.rpartition("\t")
                yield token, float(value)


def idf_table_load(table) -> IdfValues:
    """An IdfTable (model instance, name or id) as IdfValues, token -> IDF."""
    return IdfValues(iter_idf_table(idf_table_get(table)))


def idf_table_get(table_or_name):
    """An IdfTable from an instance, a primary key or a name."""
    from ..models import IdfTable

    if isinstance(table_or_name, IdfTable):
        return table_or_name
    found = named_or_numbered(IdfTable, table_or_name)
    if found is None:
        raise IdfFileError(f"no IDF table named or numbered {str(table_or_name)!r}")
    return found


def idf_table_export(table, path: str | Path) -> int:
    """Copy an IdfTable's ``token<TAB>idf`` TSV to a local file. Returns the entries written."""

    table = idf_table_get(table)
    try:
        with get_storage().open_read(table.key) as src, atomic_write(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as exc:
        raise IdfFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    return table.n_types


def idf_table_import(name: str, path: str | Path):
    """Read a ``token<TAB>idf`` TSV (validated line by line) and store it as a new IdfTable with no corpus."""

    from django.db import transaction

    from ..models import IdfTable

    if not name or not name.strip():
        raise IdfFileError("an IDF table needs a name")
    if IdfTable.objects.filter(name=name).exists():
        raise IdfFileError(f"an IDF table named {name!r} already exists")
    table_dict = read_idf_tsv(path)
    with transaction.atomic():
        table = IdfTable.objects.create(name=name, n_types=len(table_dict), tokenizer="imported")
        table.key = idf_table_key(table.pk)
        with get_storage().open_write(table.key) as raw:
            out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            for token in sorted(table_dict):
                out.write(f"{token}\t{table_dict[token]!r}\n")
            out.flush()
            out.detach()
        table.save(update_fields=["key"])
    return table
