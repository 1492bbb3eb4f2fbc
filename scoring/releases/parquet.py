"""The ``parquet`` release format: typed Parquet files written in fixed-size row groups (the ``README.md`` card
whose YAML header the Hugging Face hub and ``datasets.load_dataset`` on the folder read is
``scoring.releases.card``'s), and the columns of every release's files with their meanings.

Why Parquet: it is what NLP researchers load (``datasets``, pandas, polars, DuckDB), with real types
(integers, floats, lists of strings, the constraints as a list of structs) instead of text cells.

Streaming: rows are buffered ``ROW_GROUP_ROWS`` at a time and written as one row group each, so memory
is bounded by one row group whatever the release's size (``bench/release_memory.py --format parquet``).
Deterministic: same rows give byte-identical files: fixed schema, row-group size, compression (zstd,
level 3), format version and dictionary/statistics settings; Parquet keeps no timestamp (its footer names
the writer, ``parquet-cpp-arrow version X``, so the bytes are reproducible with the same pyarrow).

One vocabulary: the same thing has the same column name in every file of every format (``reference``,
``paraphrase``, ``systems``, ``nll``); the judgments keep ParaBank's released names only for what the pairs do
not have (``ref_id``, ``human_score``, ``gm``, ``worker_id_anon``), and ``length_bucket`` is not the pairs'
``length`` (a bucket, 5/10/20/40, not a count).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, BinaryIO

from scoring.aggregation import system_sort_key

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP_ROWS = 10_000
PARQUET_OPTIONS = {
    "compression": "zstd",
    "compression_level": 3,
    "version": "2.6",
    "data_page_version": "1.0",
    "use_dictionary": True,
    "write_statistics": True,
    "write_page_index": False,
}
PAIRS_PARQUET = "pairs.parquet"
JUDGMENTS_PARQUET = "judgments.parquet"


@functools.cache
def _schemas() -> dict[str, Any]:
    """The Arrow types, built once on first use: pyarrow loads when a release is written or described, not
    with the app (issue 37)."""
    import pyarrow as pa

    phrases = pa.list_(pa.list_(pa.string()))  # a constraint phrase is a list of tokens
    constraint = pa.struct(
        [("system", pa.string()), ("positive", phrases), ("negative", phrases), ("bos_avoid", phrases)]
    )
    # the TSV columns (columns.PAIR_COLUMNS / JUDGMENT_COLUMNS), same names and order, typed
    pairs = pa.schema(
        [
            ("ref_index", pa.int64()),
            ("reference", pa.string()),
            ("source", pa.string()),
            ("length", pa.int32()),
            ("paraphrase", pa.string()),
            ("systems", pa.list_(pa.string())),
            ("nll", pa.float64()),
            ("score", pa.float64()),
            ("raw_score", pa.float64()),
            ("constraints", pa.list_(constraint)),
            ("caveat", pa.string()),
        ]
    )
    judgments = pa.schema(
        [
            ("campaign", pa.string()),
            ("worker_id_anon", pa.int32()),
            ("counted", pa.bool_()),
            ("ref_id", pa.string()),
            ("length_bucket", pa.int32()),
            ("reference", pa.string()),
            ("systems", pa.list_(pa.string())),
            ("paraphrase", pa.string()),
            ("nll", pa.float64()),
            ("human_score", pa.int32()),
            ("gm", pa.int32()),
        ]
    )
    return {"CONSTRAINT": constraint, "PAIRS_SCHEMA": pairs, "JUDGMENTS_SCHEMA": judgments}


def __getattr__(name: str) -> Any:
    """``CONSTRAINT``, ``PAIRS_SCHEMA`` and ``JUDGMENTS_SCHEMA``, built on first use (``_schemas``)."""
    if name not in ("CONSTRAINT", "PAIRS_SCHEMA", "JUDGMENTS_SCHEMA"):  # e.g. the import system's "__path__"
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _schemas()[name]


PAIR_MEANINGS = {
    "ref_index": "the reference's index in its corpus",
    "reference": "the reference sentence",
    "source": "the other side of the bitext the reference came from (empty for a monolingual corpus)",
    "length": "the reference's length in tokens",
    "paraphrase": "the paraphrase",
    "systems": "the constraint systems (ParaBank Tab. 3) that produced this text",
    "nll": "the decoder's negative log-likelihood of the paraphrase (null if unknown)",
    "score": "similarity to the reference, 0-100: the regressor's prediction calibrated on its held-out judgments "
    "(the expected mean human similarity of pairs predicted like this one), or its raw prediction when the "
    "regressor has no calibration map (the card and the manifest's calibration say which; null: not scored, see "
    "caveat)",
    "raw_score": "the regressor's own predicted similarity, 0-100, before calibration (equal to score when there is "
    "no calibration map; null with score)",
    "constraints": "per system, the lexical constraints decoded with: positive, negative and beginning-avoid "
    "phrases (each a list of tokens)",
    "caveat": "why the pair has no honest score (null: none): non_words (it holds a word that is not English, kept "
    "by --keep-non-words), long_reference (its reference is longer than any the regressor was trained on), "
    "unscored (the regressor skipped it)",
}
JUDGMENT_MEANINGS = {
    "campaign": "the evaluation campaign",
    "worker_id_anon": "the worker, numbered 1, 2, ... per campaign",
    "counted": "whether the worker counts in the campaign's aggregates",
    "ref_id": "the reference's id in the campaign (ParaBank's ref_id)",
    "length_bucket": "the reference's length bucket, 5, 10, 20 or 40 tokens (ParaBank's ref_len)",
    "reference": "the reference sentence (ParaBank's ref_sent)",
    "systems": 'the systems that produced the judged paraphrase ("0": the attention copy, "degraded": a degraded '
    "copy; ParaBank's sys_id)",
    "paraphrase": "the judged paraphrase (ParaBank's candidate)",
    "nll": "the decoder's negative log-likelihood of the paraphrase (null if unknown; ParaBank's NLL)",
    "human_score": "the slider's similarity score, 0-100 (null: N/A, the paraphrase is nonsensical)",
    "gm": "fluency: 0 nonsensical, 1 meaningful but ungrammatical, 2 meaningful and grammatical",
}


def schema_columns(schema: pa.Schema) -> list[dict[str, str]]:
    """The manifest's record of a file's columns, in order: ``{name, type}`` (the Arrow type)."""
    return [{"name": field.name, "type": str(field.type)} for field in schema]


class ParquetRows:
    """Append rows (tuples in the schema's column order); every ``ROW_GROUP_ROWS`` rows become one row group."""

    def __init__(self, sink: BinaryIO, schema: pa.Schema, row_group_rows: int | None = None):
        import pyarrow.parquet as pq

        self.schema, self.row_group_rows = schema, row_group_rows or ROW_GROUP_ROWS
        self.writer = pq.ParquetWriter(sink, schema, **PARQUET_OPTIONS)
        self.columns: list[list] = [[] for _ in schema.names]
        self.rows = 0

    def append(self, row: tuple) -> None:
        for column, value in zip(self.columns, row):
            column.append(value)
        if len(self.columns[0]) >= self.row_group_rows:
            self.flush()

    def flush(self) -> None:
        if not self.columns[0]:
            return
        import pyarrow as pa

        table = pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(self.columns, self.schema)], schema=self.schema
        )
        self.writer.write_table(table, row_group_size=self.row_group_rows)
        self.rows += table.num_rows
        self.columns = [[] for _ in self.schema.names]

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _phrases(value: Any) -> list[list[str]]:
    """A constraint side as a list of token lists (a phrase stored as one string is split on spaces)."""
    out = []
    for phrase in value or []:
        out.append([str(t) for t in phrase] if isinstance(phrase, (list, tuple)) else str(phrase).split())
    return out


def constraints_struct(constraints: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A shard record's ``{system: {positive, negative, bos_avoid}}`` as a list of structs, by system number."""
    return [
        {
            "system": str(system),
            "positive": _phrases(c.get("positive")),
            "negative": _phrases(c.get("negative")),
            "bos_avoid": _phrases(c.get("bos_avoid")),
        }
        for system, c in sorted((constraints or {}).items(), key=lambda kv: system_sort_key(str(kv[0])))
    ]


def pair_row(record: dict[str, Any], candidate: dict[str, Any]) -> tuple:
    return (
        record.get("ref_index"),
        record["reference"],
        record.get("source") or "",
        record.get("length"),
        candidate["text"],
        [str(s) for s in candidate.get("systems") or []],
        candidate.get("nll"),
        candidate.get("score"),
        candidate.get("raw_score"),
        constraints_struct(candidate.get("constraints")),
        candidate.get("caveat"),
    )
