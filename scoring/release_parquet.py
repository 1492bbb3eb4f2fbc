"""The ``parquet`` release format: typed Parquet files written in fixed-size row groups, and the
``README.md`` dataset card whose YAML header the Hugging Face hub (and ``datasets.load_dataset`` on the
folder) reads.

Why Parquet: it is what NLP researchers load (``datasets``, pandas, polars, DuckDB), with real types
(integers, floats, lists of strings, the constraints as a list of structs) instead of text cells.

Streaming: rows are buffered ``ROW_GROUP_ROWS`` at a time and written as one row group each, so memory
is bounded by one row group whatever the release's size (``bench/release_memory.py --format parquet``).
Deterministic: same rows give byte-identical files: fixed schema, row-group size, compression (zstd,
level 3), format version and dictionary/statistics settings; Parquet keeps no timestamp (its footer names
the writer, ``parquet-cpp-arrow version X``, so the bytes are reproducible with the same pyarrow), and the
card holds no date.
"""

from __future__ import annotations

import json
import re
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from .aggregation import system_sort_key

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
CARD_FILE = "README.md"
DEFAULT_LICENSE = "unknown"
_LICENSE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")

_PHRASES = pa.list_(pa.list_(pa.string()))  # a constraint phrase is a list of tokens
CONSTRAINT = pa.struct(
    [("system", pa.string()), ("positive", _PHRASES), ("negative", _PHRASES), ("bos_avoid", _PHRASES)]
)
# the TSV columns (releases.PAIR_COLUMNS / JUDGMENT_COLUMNS), same names and order, typed
PAIRS_SCHEMA = pa.schema(
    [
        ("ref_index", pa.int64()),
        ("reference", pa.string()),
        ("source", pa.string()),
        ("length", pa.int32()),
        ("paraphrase", pa.string()),
        ("systems", pa.list_(pa.string())),
        ("nll", pa.float64()),
        ("score", pa.float64()),
        ("constraints", pa.list_(CONSTRAINT)),
    ]
)
JUDGMENTS_SCHEMA = pa.schema(
    [
        ("campaign", pa.string()),
        ("worker_id_anon", pa.int32()),
        ("counted", pa.bool_()),
        ("ref_id", pa.string()),
        ("ref_len", pa.int32()),
        ("ref_sent", pa.string()),
        ("sys_id", pa.list_(pa.string())),
        ("candidate", pa.string()),
        ("NLL", pa.float64()),
        ("human_score", pa.int32()),
        ("gm", pa.int32()),
    ]
)
PAIR_MEANINGS = {
    "ref_index": "the reference's index in its corpus",
    "reference": "the reference sentence",
    "source": "the other side of the bitext the reference came from (empty for a monolingual corpus)",
    "length": "the reference's length in tokens",
    "paraphrase": "the paraphrase",
    "systems": "the constraint systems (ParaBank Tab. 3) that produced this text",
    "nll": "the decoder's negative log-likelihood of the paraphrase (null if unknown)",
    "score": "predicted similarity to the reference, 0-100 (null: the regressor skipped the pair)",
    "constraints": "per system, the lexical constraints decoded with: positive, negative and beginning-avoid "
    "phrases (each a list of tokens)",
}
JUDGMENT_MEANINGS = {
    "campaign": "the evaluation campaign",
    "worker_id_anon": "the worker, numbered 1, 2, ... per campaign",
    "counted": "whether the worker counts in the campaign's aggregates",
    "ref_id": "the reference's id in the campaign",
    "ref_len": "the reference's length bucket (5, 10, 20, 40 tokens)",
    "ref_sent": "the reference sentence",
    "sys_id": 'the systems that produced the candidate ("0": the attention copy, "degraded": a degraded copy)',
    "candidate": "the judged candidate",
    "NLL": "the decoder's negative log-likelihood of the candidate (null if unknown)",
    "human_score": "the slider's similarity score, 0-100 (null: N/A, the candidate is nonsensical)",
    "gm": "fluency: 0 nonsensical, 1 meaningful but ungrammatical, 2 meaningful and grammatical",
}
PARABANK_BIBTEX = """@inproceedings{hu2019parabank,
  title     = {{ParaBank}: Monolingual Bitext Generation and Sentential Paraphrasing via
               Lexically-constrained Neural Machine Translation},
  author    = {Hu, J. Edward and Rudinger, Rachel and Post, Matt and Van Durme, Benjamin},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  volume    = {33},
  pages     = {6521--6528},
  year      = {2019},
  doi       = {10.1609/aaai.v33i01.33016521}
}"""


def license_check(value: str | None) -> str:
    """A Hugging Face licence identifier (``cc-by-4.0``, ``apache-2.0``, ``other``; default ``unknown``)."""
    value = DEFAULT_LICENSE if value is None or value == "" else value
    if not _LICENSE.match(value):
        raise ValueError(
            f"licence {value!r}: use a Hugging Face licence id, lowercase letters, digits, '.', '+' "
            f"or '-' (e.g. cc-by-4.0, apache-2.0, other, unknown)"
        )
    return value


def schema_columns(schema: pa.Schema) -> list[dict[str, str]]:
    """The manifest's record of a file's columns, in order: ``{name, type}`` (the Arrow type)."""
    return [{"name": field.name, "type": str(field.type)} for field in schema]


class ParquetRows:
    """Append rows (tuples in the schema's column order); every ``ROW_GROUP_ROWS`` rows become one row group."""

    def __init__(self, sink: BinaryIO, schema: pa.Schema, row_group_rows: int | None = None):
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
        constraints_struct(candidate.get("constraints")),
    )


def size_category(n: int) -> str:
    """The hub's ``size_categories`` value for ``n`` rows."""
    bounds = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
        (1_000_000_000, "100M<n<1B"),
        (10_000_000_000, "1B<n<10B"),
        (100_000_000_000, "10B<n<100B"),
        (1_000_000_000_000, "100B<n<1T"),
    ]
    return next((label for limit, label in bounds if n < limit), "n>1T")


def _fence(text: str, info: str = "") -> str:
    """``text`` in a Markdown code block whose fence no backtick run inside it can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _code(text: Any) -> str:
    """Inline code for a short value (names come from users: backticks cannot break out)."""
    text = str(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}" if longest else f"`{text}`"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


def _number(value: Any) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def dataset_card(manifest: dict[str, Any]) -> str:
    """The release's ``README.md``: the hub's YAML header (configs and data files, licence, task, size,
    language, name) and the manifest's facts (counts, regressor and its held-out rho, generation settings,
    filters, files) with the citation of ParaBank. Built from the manifest only, so it is as reproducible."""
    counts, regressor = manifest["counts"], manifest["regressor"]
    name = f"Paraforge paraphrases: {manifest['resource']} {manifest['version']}"
    header = {
        "pretty_name": name,
        "license": manifest["license"],
        "language": ["en"],
        "task_categories": ["text2text-generation", "sentence-similarity"],
        "size_categories": [size_category(counts["pairs"])],
        "tags": ["paraphrase", "paraphrase-generation", "parabank", "paraforge"],
        "configs": [
            {"config_name": "pairs", "data_files": [{"split": "train", "path": PAIRS_PARQUET}], "default": True},
            {"config_name": "judgments", "data_files": [{"split": "train", "path": JUDGMENTS_PARQUET}]},
        ],
    }
    files = manifest["files"]
    rows = {PAIRS_PARQUET: counts["pairs"], JUDGMENTS_PARQUET: counts["judgments"]}
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000).rstrip("\n"),
        "---",
        "",
        f"# {name}",
        "",
        f"Paraphrases of the references of resource {_code(manifest['resource'])}, generated with lexically "
        "constrained decoding the way ParaBank (Hu et al., 2019) was built, each pair scored by a similarity "
        "regressor trained on human judgments (0-100), together with those judgments. Release "
        f"{_code(manifest['version'])}, format `{manifest['format']}`; `manifest.json` beside this card holds "
        "every fact below and the SHA-256 of each file.",
        "",
        "## Configurations",
        "",
        "| config | file | rows | SHA-256 |",
        "|---|---|---:|---|",
    ]
    for config, file in (("pairs (default)", PAIRS_PARQUET), ("judgments", JUDGMENTS_PARQUET)):
        lines.append(f"| {config} | `{file}` | {rows[file]:,} | `{files[file]['sha256']}` |")
    lines += [
        "",
        "```python",
        "from datasets import load_dataset",
        'pairs = load_dataset("path/to/this/folder", "pairs", split="train")',
        'judgments = load_dataset("path/to/this/folder", "judgments", split="train")',
        f'# or: load_dataset("parquet", data_files="{PAIRS_PARQUET}"); pandas.read_parquet("{PAIRS_PARQUET}")',
        "```",
        "",
    ]
    for title, schema, meanings in (
        ("pairs", PAIRS_SCHEMA, PAIR_MEANINGS),
        ("judgments", JUDGMENTS_SCHEMA, JUDGMENT_MEANINGS),
    ):
        lines += [f"### Columns of `{title}`", "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{f.name}` | `{f.type}` | {meanings[f.name]} |" for f in schema]
        lines.append("")
    lines += [
        "Pairs are grouped by reference in shard order. The judgments are every verified judgment of the "
        "campaigns that evaluated the resource's generation job and of the regressor's training campaign "
        f"({', '.join(_code(c) for c in manifest['campaigns']) or 'none'}), in ParaBank's release columns.",
        "",
        "## Counts",
        "",
        "| | read | released |",
        "|---|---:|---:|",
        f"| references | {counts['references_read']:,} | {counts['references']:,} |",
        f"| pairs | {counts['pairs_read']:,} | {counts['pairs']:,} |",
        "",
        f"Unscored pairs released: {counts['pairs_unscored']:,}. Judgments: {counts['judgments']:,} from "
        f"{counts['campaigns']:,} campaign(s).",
        "",
        "## Similarity regressor",
        "",
        f"{_code(regressor['name'])}: held-out Spearman's rho {_number(regressor['spearman_test'])} "
        "(by-reference split; see the metrics).",
        "",
        _fence(_json({"metrics": regressor.get("metrics"), "signature": regressor.get("signature")}), "json"),
        "",
        "## Generation settings",
        "",
        _fence(_json(manifest.get("generation")), "json"),
        "",
        "## Filters",
        "",
        _fence(_json(manifest.get("filters")), "json"),
        "",
        "## Citation",
        "",
        "Paraforge follows ParaBank; please cite it: J. Edward Hu, Rachel Rudinger, Matt Post and Benjamin Van "
        'Durme (2019). "ParaBank: Monolingual Bitext Generation and Sentential Paraphrasing via '
        'Lexically-constrained Neural Machine Translation." AAAI 2019.',
        "",
        _fence(PARABANK_BIBTEX, "bibtex"),
        "",
    ]
    return "\n".join(lines)
