"""The shapes of a release's files: their names, their columns and keys in order, the caveats a pair's score can
carry, and how each column is described in the manifest and on the card.

Why here, apart from the writing: the writers (``scoring.releases.writers``), the manifest
(``scoring.releases.manifest``), the card's columns table and the documentation's column tables
(``docs/hooks/reference.py``) all read these, and one schema (``scoring.releases.parquet``) types every format,
so a column is named and described once. Nothing here touches the database; pyarrow loads only when a
schema is read.
"""

from __future__ import annotations

from typing import Any

from scoring.releases import parquet
from scoring.releases.parquet import JUDGMENT_MEANINGS, JUDGMENTS_PARQUET, PAIR_MEANINGS, PAIRS_PARQUET

# 2: one vocabulary (the judgments' ref_sent/candidate/sys_id/NLL/ref_len became reference/paraphrase/systems/
# nll/length_bucket, the JSONL paraphrases' text became paraphrase), a card in every format, copies left out
# 3: non-words left out as in a HIT batch, a caveat column for every pair without an honest score
# 4: score calibrated on the regressor's held-out judgments (when it has a map), its own prediction as raw_score
RELEASE_FORMAT = "paraforge-release/4"
FORMATS = ("tsv", "jsonl", "parquet")
# how the pairs are laid out: Paraforge's own columns (a pair per row, a reference per JSONL line), or ParaBank 2's
# TSV (a reference per line: score, reference, up to PARABANK2_PARAPHRASES paraphrases in rank order; tsv only)
PARAFORGE, PARABANK2 = "paraforge", "parabank2"
LAYOUTS = (PARAFORGE, PARABANK2)
PARABANK2_PARAPHRASES = 5
PARABANK2_FILE = "pairs.parabank2.tsv.gz"
PARABANK2_COLUMNS = ("score", "reference", *(f"paraphrase_{k}" for k in range(1, PARABANK2_PARAPHRASES + 1)))
PARABANK2_MEANINGS = {
    "score": "the first paraphrase's score, 0-100, as the paraforge layout's score column: its predicted similarity "
    "to the reference, calibrated when the regressor has a calibration map (empty: it has a caveat)",
    "reference": "the reference sentence",
    **{
        f"paraphrase_{k}": f"its rank-{k} paraphrase (a line ends after its last one: no empty cells)"
        for k in range(1, PARABANK2_PARAPHRASES + 1)
    },
}
PAIR_COLUMNS = (
    "ref_index",
    "reference",
    "source",
    "length",
    "paraphrase",
    "systems",
    "nll",
    "score",
    "raw_score",
    "constraints",
    "caveat",
)
JUDGMENT_COLUMNS = (
    "campaign",
    "worker_id_anon",
    "counted",
    "ref_id",
    "length_bucket",
    "reference",
    "systems",
    "paraphrase",
    "nll",
    "human_score",
    "gm",
)
JSONL_REFERENCE_KEYS = ("ref_index", "reference", "source", "length", "paraphrases")
JSONL_PARAPHRASE_KEYS = ("paraphrase", "systems", "constraints", "nll", "score", "raw_score", "caveat")
# a pair's caveat (parquet.PAIR_MEANINGS): why its score is null
NON_WORDS, LONG_REFERENCE, UNSCORED = "non_words", "long_reference", "unscored"
JUDGMENTS_FILE = "judgments.tsv.gz"
MANIFEST_FILE = "manifest.json"


def pairs_file_name(fmt: str, layout: str = PARAFORGE) -> str:
    if layout == PARABANK2:
        return PARABANK2_FILE
    return PAIRS_PARQUET if fmt == "parquet" else f"pairs.{fmt}.gz"


def judgments_file_name(fmt: str) -> str:
    return JUDGMENTS_PARQUET if fmt == "parquet" else JUDGMENTS_FILE


def manifest_columns(fmt: str, layout: str = PARAFORGE) -> dict[str, Any]:
    """The manifest's ``columns``: per data file, its columns (parquet: with their Arrow types; jsonl: the
    reference object's keys and each paraphrase's; the parabank2 layout: its line's cells, up to the fifth
    paraphrase)."""
    if layout == PARABANK2:
        return {PARABANK2_FILE: list(PARABANK2_COLUMNS), JUDGMENTS_FILE: list(JUDGMENT_COLUMNS)}
    if fmt == "parquet":
        return {
            PAIRS_PARQUET: parquet.schema_columns(parquet.PAIRS_SCHEMA),
            JUDGMENTS_PARQUET: parquet.schema_columns(parquet.JUDGMENTS_SCHEMA),
        }
    pairs = (
        list(PAIR_COLUMNS)
        if fmt == "tsv"
        else {"object": list(JSONL_REFERENCE_KEYS), "paraphrases": list(JSONL_PARAPHRASE_KEYS)}
    )
    return {pairs_file_name(fmt): pairs, JUDGMENTS_FILE: list(JUDGMENT_COLUMNS)}


def _text_kind(field: Any, *, jsonl: bool = False) -> str:
    """How a column's Arrow type is written in a TSV cell (or a JSONL value)."""
    import pyarrow.types as pa_types  # loaded when used, not with the app

    kind = field.type
    if pa_types.is_integer(kind):
        return "integer"
    if pa_types.is_floating(kind):
        return "number or null" if jsonl else "number (empty: null)"
    if pa_types.is_boolean(kind):
        return "true/false" if jsonl else "0 or 1"
    if field.name == "constraints":
        return "object" if jsonl else "JSON object"
    if pa_types.is_list(kind):
        return "list of strings" if jsonl else "space-separated"
    return "string" if jsonl else "text"


def card_columns(fmt: str, layout: str = PARAFORGE) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Per data file, its ``(column, type, meaning)`` rows for the card: the Arrow types for parquet, how the text
    writes them else (one schema, ``scoring.releases.parquet``, for every format; the parabank2 layout's cells)."""
    pairs_name, judgments_name = pairs_file_name(fmt, layout), judgments_file_name(fmt)
    pairs_schema, judgments_schema = parquet.PAIRS_SCHEMA, parquet.JUDGMENTS_SCHEMA
    if fmt == "parquet":
        return [
            (pairs_name, [(f.name, str(f.type), PAIR_MEANINGS[f.name]) for f in pairs_schema]),
            (judgments_name, [(f.name, str(f.type), JUDGMENT_MEANINGS[f.name]) for f in judgments_schema]),
        ]
    judgments = [(f.name, _text_kind(f), JUDGMENT_MEANINGS[f.name]) for f in judgments_schema]
    if layout == PARABANK2:
        kinds = {f.name: _text_kind(f) for f in pairs_schema}  # score and reference as in the paraforge layout
        return [
            (pairs_name, [(c, kinds.get(c, "text"), PARABANK2_MEANINGS[c]) for c in PARABANK2_COLUMNS]),
            (judgments_name, judgments),
        ]
    if fmt == "jsonl":
        pairs_fields = {f.name: f for f in pairs_schema}
        pairs = [
            (k, _text_kind(pairs_fields[k], jsonl=True), PAIR_MEANINGS[k])
            if k in pairs_fields
            else (k, "list of objects", "the reference's paraphrases, each an object with the keys below")
            for k in JSONL_REFERENCE_KEYS
        ]
        pairs += [
            (f"paraphrases[].{k}", _text_kind(pairs_fields[k], jsonl=True), PAIR_MEANINGS[k])
            for k in JSONL_PARAPHRASE_KEYS
        ]
        return [(pairs_name, pairs), (judgments_name, judgments)]
    return [
        (pairs_name, [(f.name, _text_kind(f), PAIR_MEANINGS[f.name]) for f in pairs_schema]),
        (judgments_name, judgments),
    ]
