"""The writers of a release's data files: gzip-compressed TSV or JSONL, or typed Parquet (``scoring.releases
.parquet``), each written as its rows stream in (``scoring.releases.rows``) and hashed as it is written, so the
manifest gets every file's SHA-256 and size without reading it again. The pairs come in Paraforge's layout (a pair
per TSV row, a reference per JSONL line) or in ParaBank 2's (``parabank2_paraphrases``: a reference per TSV line,
its score, the reference and up to five paraphrases in rank order).

Deterministic: gzip's mtime is 0 and its file name empty, columns and keys come in a fixed order
(``scoring.releases.columns``), so the same rows give byte-identical files. A TSV cell never breaks a row: tabs
and newlines inside a text become spaces, lists and objects are compact JSON, None an empty cell.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from annotation.models import Campaign
from generation.constraints.systems import system_rank
from infra.shards import HashingWriter
from infra.storage import LocalStorage
from scoring.models import ScoredResource
from scoring.releases import parquet
from scoring.releases.columns import JUDGMENT_COLUMNS, PAIR_COLUMNS, PARABANK2, PARABANK2_PARAPHRASES, PARAFORGE
from scoring.releases.filters import ReleaseFilters, score_order
from scoring.releases.parquet import JUDGMENTS_PARQUET, PAIRS_PARQUET, ParquetRows, pair_row
from scoring.releases.rows import PairScreen, judgment_rows, kept_records

Write = Callable[[str], None]


@contextlib.contextmanager
def gzip_lines(storage: LocalStorage, name: str, info: dict) -> Iterator[Write]:
    """Yield a ``write(text)`` into ``name`` gzip-compressed (mtime 0, no name: reproducible bytes);
    ``info`` gets ``sha256`` and ``bytes`` of the compressed file once it is closed."""
    with storage.open_write(name) as raw:
        hashing = HashingWriter(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6) as gz:
            buffered = io.BufferedWriter(gz, buffer_size=1 << 20)
            yield lambda text: buffered.write(text.encode("utf-8"))
            buffered.flush()
    info.update(sha256=hashing.sha256.hexdigest(), bytes=hashing.size)


@contextlib.contextmanager
def hashed(storage: LocalStorage, name: str, info: dict) -> Iterator[HashingWriter]:
    """Yield a binary sink into ``name``; ``info`` gets ``sha256`` and ``bytes`` once it is closed."""
    with storage.open_write(name) as raw:
        hashing = HashingWriter(raw)
        yield hashing
    info.update(sha256=hashing.sha256.hexdigest(), bytes=hashing.size)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return str(value).replace("\t", " ").replace("\r", " ").replace("\n", " ")


def _tsv(values) -> str:
    return "\t".join(_cell(v) for v in values) + "\n"


def _jsonl_reference(record: dict[str, Any], kept: list[dict[str, Any]]) -> str:
    """One reference and its kept paraphrases as a JSONL line (``JSONL_REFERENCE_KEYS``)."""
    paraphrases = [
        {
            "paraphrase": c["text"],
            "systems": c.get("systems") or [],
            "constraints": c.get("constraints") or {},
            "nll": c.get("nll"),
            "score": c.get("score"),
            "raw_score": c.get("raw_score"),
            "caveat": c.get("caveat"),
        }
        for c in kept
    ]
    line = {
        "ref_index": record.get("ref_index"),
        "reference": record["reference"],
        "source": record.get("source", ""),
        "length": record.get("length"),
        "paraphrases": paraphrases,
    }
    return json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"


def _tsv_pair(record: dict[str, Any], c: dict[str, Any]) -> str:
    """One pair as a TSV row (``PAIR_COLUMNS``)."""
    return _tsv(
        (
            record.get("ref_index"),
            record["reference"],
            record.get("source", ""),
            record.get("length"),
            c["text"],
            " ".join(c.get("systems") or []),
            c.get("nll"),
            c.get("score"),
            c.get("raw_score"),
            c.get("constraints") or {},
            c.get("caveat"),
        )
    )


def candidate_rank(candidate: dict[str, Any]) -> int | None:
    """A diverse-mode output's rank: the smallest ``k`` of its systems ``"r<k>"`` (None: not a ranked output)."""
    ranks = [rank for s in candidate.get("systems") or [] if (rank := system_rank(s)) is not None]
    return min(ranks, default=None)


def parabank2_paraphrases(kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reference's kept pairs as ParaBank 2 lists them: at most ``PARABANK2_PARAPHRASES``, best first. A diverse
    resource's outputs (systems ``"r1"``, ``"r2"`` ...) come in rank order; other pairs (a beam resource's) by
    ``score`` (the calibrated one, as the line's score cell), highest first, pairs that share one by ``raw_score``
    (a calibration map's flat step), pairs without a score last; ties keep the pairs' order."""

    def order(item: tuple[int, dict[str, Any]]) -> tuple[float, float, float, int]:
        index, c = item
        rank = candidate_rank(c)
        return (math.inf if rank is None else rank, *score_order(c), index)

    return [c for _, c in sorted(enumerate(kept), key=order)][:PARABANK2_PARAPHRASES]


def _parabank2_line(record: dict[str, Any], paraphrases: list[dict[str, Any]]) -> str:
    """One reference as a line of ParaBank 2's TSV (no header): the first paraphrase's score, the reference, the
    paraphrases; a line ends after its last paraphrase."""
    return _tsv((paraphrases[0].get("score"), record["reference"], *(c["text"] for c in paraphrases)))


def write_pairs(
    write: Write,
    scored: ScoredResource,
    filters: ReleaseFilters,
    fmt: str,
    counts: dict[str, int],
    screen: PairScreen,
    layout: str = PARAFORGE,
) -> None:
    """The pairs file's text (``fmt`` tsv: a header, then a row per pair; jsonl: a line per reference; ``layout``
    parabank2, tsv only: a line per reference, no header)."""
    if layout == PARABANK2:
        for record, kept in kept_records(scored, filters, counts, screen, arrange=parabank2_paraphrases):
            write(_parabank2_line(record, kept))
        return
    if fmt == "tsv":
        write(_tsv(PAIR_COLUMNS))
    for record, kept in kept_records(scored, filters, counts, screen):
        if fmt == "jsonl":
            write(_jsonl_reference(record, kept))
        else:
            for c in kept:
                write(_tsv_pair(record, c))


def write_judgments(write: Write, campaigns: list[Campaign], counts: dict[str, int]) -> None:
    """The judgments file's text: a header, then a row per judgment (``counted`` as 0 or 1)."""
    write(_tsv(JUDGMENT_COLUMNS))
    for row in judgment_rows(campaigns, counts):
        campaign, anon, counted, ref_id, bucket, ref_text, sys_ids, text, nll, score, fluency = row
        write(
            _tsv((campaign, anon, int(counted), ref_id, bucket, ref_text, " ".join(sys_ids), text, nll, score, fluency))
        )


def write_parquet(
    out: LocalStorage,
    scored: ScoredResource,
    filters: ReleaseFilters,
    campaigns: list[Campaign],
    counts: dict[str, int],
    files: dict[str, dict],
    screen: PairScreen,
) -> None:
    """``pairs.parquet`` and ``judgments.parquet``: the rows of the TSV files, typed, a row group at a time."""
    files[PAIRS_PARQUET] = {"name": PAIRS_PARQUET}
    with hashed(out, PAIRS_PARQUET, files[PAIRS_PARQUET]) as sink:
        rows = ParquetRows(sink, parquet.PAIRS_SCHEMA)
        for record, kept in kept_records(scored, filters, counts, screen):
            for c in kept:
                rows.append(pair_row(record, c))
        rows.close()
    files[JUDGMENTS_PARQUET] = {"name": JUDGMENTS_PARQUET}
    with hashed(out, JUDGMENTS_PARQUET, files[JUDGMENTS_PARQUET]) as sink:
        rows = ParquetRows(sink, parquet.JUDGMENTS_SCHEMA)
        for row in judgment_rows(campaigns, counts):
            rows.append(row)
        rows.close()
