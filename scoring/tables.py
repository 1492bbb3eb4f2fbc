"""ParaBank's result tables (Tab. 4 top: similarity, Tab. 4 bottom: diversity, Tab. 5: fluency) for a
campaign, as a dict (the JSON of ``manage.py report``), Markdown or CSV. Values are unrounded except in
Markdown (2 decimals, "-" for an empty cell)."""
from __future__ import annotations

import io

from annotation.csv_safety import spreadsheet_csv_writer
from annotation.models import Campaign

from .aggregation import fluency_rows, load_campaign, similarity_rows
from .diversity import diversity_rows

TABLES = {"similarity": similarity_rows, "fluency": fluency_rows, "diversity": diversity_rows}
TITLES = {"similarity": "Semantic similarity (0-100)", "fluency": "Meaningful and grammatical (%)",
          "diversity": "BLEU without brevity penalty (lower = more diverse)"}


def system_name(campaign: Campaign, system: str) -> str:
    """The campaign's own name for a system (an imported ParaBank campaign maps "35" to "PARANMT"), else
    the Tab. 3 name from generation.systems when it knows the number, else the number itself."""
    names = (campaign.settings or {}).get("system_names") or {}
    if system in names:
        return str(names[system])
    try:
        from generation.systems import get_system

        return str(get_system(int(system)).name)
    except Exception:  # no such module yet, not a number, or an unknown system
        return str(system)


def build_table(campaign: Campaign, table: str, min_judgments: int | None = None) -> dict:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r} (one of {', '.join(TABLES)})")
    data = load_campaign(campaign, min_judgments)
    rows = TABLES[table](data)
    for row in rows:
        row["name"] = system_name(campaign, row["system"])
    ordered = [{"system": r["system"], "name": r["name"], **{k: v for k, v in r.items() if k not in ("system", "name")}}
               for r in rows]
    return {"table": table, "campaign": campaign.name, "min_judgments": data.min_judgments,
            "counted_workers": len(data.counted_workers), "buckets": [str(b) for b in data.buckets],
            "rows": ordered}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_markdown(result: dict) -> str:
    buckets = result["buckets"]
    lines = [f"**{TITLES[result['table']]}** — campaign {result['campaign']}", "",
             "| # | System | " + " | ".join(buckets) + " | Avg. |",
             "|---|---|" + "---:|" * (len(buckets) + 1)]
    for row in result["rows"]:
        cells = [row["system"], row["name"].replace("|", "\\|")] + [_fmt(row["by_length"].get(b)) for b in buckets]
        lines.append("| " + " | ".join(cells + [_fmt(row["avg"])]) + " |")
    return "\n".join(lines) + "\n"


def render_csv(result: dict) -> str:
    buckets = result["buckets"]
    out = io.StringIO()
    writer = spreadsheet_csv_writer(out, lineterminator="\n")  # opened in spreadsheets; names are imported text
    writer.writerow(["system", "name", *buckets, "avg", "std", "n"])
    for row in result["rows"]:
        writer.writerow([row["system"], row["name"], *["" if row["by_length"].get(b) is None else row["by_length"][b]
                                                      for b in buckets],
                         "" if row["avg"] is None else row["avg"], "" if row["std"] is None else row["std"], row["n"]])
    return out.getvalue()
