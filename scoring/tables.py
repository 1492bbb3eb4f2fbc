"""ParaBank's result tables (Tab. 4 top: similarity, Tab. 4 bottom: diversity, Tab. 5: fluency) and the
reliability figures for a campaign, as a dict (the JSON of ``manage.py report``), Markdown or CSV. Values
are unrounded except in Markdown (2 decimals, "-" for an empty cell; reliability 3 decimals).

The similarity table comes as the raw estimate (ParaBank's) or the bias-corrected one (``zscore``,
rules in ``scoring.aggregation``); the estimate means nothing for the other tables, so asking for one
there is an error rather than silently ignored."""

from __future__ import annotations

import io

from annotation.csv_safety import spreadsheet_csv_writer
from annotation.models import Campaign

from .aggregation import ESTIMATES, fluency_rows, load_campaign, similarity_rows, zscore_estimates
from .diversity import diversity_rows
from .reliability import reliability

TABLES = {"similarity": similarity_rows, "fluency": fluency_rows, "diversity": diversity_rows}
REPORT_TABLES = (*TABLES, "reliability")
TITLES = {
    "similarity": "Semantic similarity (0-100)",
    "fluency": "Meaningful and grammatical (%)",
    "diversity": "BLEU without brevity penalty (lower = more diverse)",
}
ZSCORE_TITLE = "Semantic similarity (0-100), bias-corrected (worker z-scores)"


class EstimateError(ValueError):
    """An estimate that is unknown, or asked for a table it means nothing for."""


def check_estimate(table: str, estimate: str | None) -> str | None:
    """``estimate`` if it is valid for ``table`` (None = the table's default), else ``EstimateError``."""
    if estimate is None:
        return None
    if estimate not in ESTIMATES:
        raise EstimateError(f"unknown estimate {estimate!r} (one of {', '.join(ESTIMATES)})")
    if table != "similarity":
        raise EstimateError(
            f"the estimate applies only to the similarity table, not {table!r}"
            + (" (which reports both estimates)" if table == "reliability" else "")
        )
    return estimate


def system_name(campaign: Campaign, system: str) -> str:
    """The campaign's own name for a system (an imported ParaBank campaign maps "35" to "PARANMT"), else
    the Tab. 3 name from generation.systems when it knows the number, else the number itself."""
    names = (campaign.settings or {}).get("system_names") or {}
    if system in names:
        return str(names[system])
    try:
        from generation.systems import get_system

        return str(get_system(int(system)).name)
    except Exception:  # noqa: BLE001 - no such module yet, not a number, or an unknown system
        return str(system)


def build_table(campaign: Campaign, table: str, min_judgments: int | None = None, estimate: str | None = None) -> dict:
    """One report table as a dict; ``estimate`` ("raw" default, or "zscore") only for ``similarity``."""
    if table not in REPORT_TABLES:
        raise ValueError(f"unknown table {table!r} (one of {', '.join(REPORT_TABLES)})")
    estimate = check_estimate(table, estimate)
    data = load_campaign(campaign, min_judgments)
    if table == "reliability":
        figures = reliability(data)
        return {
            "table": table,
            **{k: figures.pop(k) for k in ("split_half", "n_candidates", "krippendorff_alpha")},
            "campaign": campaign.name,
            "min_judgments": data.min_judgments,
            "counted_workers": len(data.counted_workers),
            **figures,
        }
    extra = {}
    if table == "similarity" and estimate == "zscore":
        z = zscore_estimates(data)
        rows = similarity_rows(data, z.means)
        extra = {"estimate": "zscore", "workers_sd0": z.workers_sd0}
    else:
        rows = TABLES[table](data)
        if table == "similarity":
            extra = {"estimate": "raw"}
    for row in rows:
        row["name"] = system_name(campaign, row["system"])
    ordered = [
        {"system": r["system"], "name": r["name"], **{k: v for k, v in r.items() if k not in ("system", "name")}}
        for r in rows
    ]
    return {
        "table": table,
        "campaign": campaign.name,
        "min_judgments": data.min_judgments,
        "counted_workers": len(data.counted_workers),
        **extra,
        "buckets": [str(b) for b in data.buckets],
        "rows": ordered,
    }


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fmt3(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _markdown_reliability(result: dict) -> str:
    sh = result["split_half"]
    return "\n".join(
        [
            f"**Reliability of the similarity judgments** — campaign {result['campaign']}",
            "",
            "| Measure | Raw | Bias-corrected (z-score) |",
            "|---|---:|---:|",
            f"| Split-half Spearman's rho ({result['n_splits']} splits, {result['n_candidates']} candidates with "
            f">= {result['min_judgments_per_candidate']} judgments) | {_fmt3(sh['raw'])} | {_fmt3(sh['zscore'])} |",
            f"| Krippendorff's alpha (interval) | {_fmt3(result['krippendorff_alpha'])} | |",
            "",
            f"{result['counted_workers']} counted workers (min. judgments {result['min_judgments']}); "
            f"{result['workers_sd0']} with SD 0 left out of the z-score estimate.",
            "",
        ]
    )


def render_markdown(result: dict) -> str:
    if result["table"] == "reliability":
        return _markdown_reliability(result)
    buckets = result["buckets"]
    title = ZSCORE_TITLE if result.get("estimate") == "zscore" else TITLES[result["table"]]
    lines = [
        f"**{title}** — campaign {result['campaign']}",
        "",
        "| # | System | " + " | ".join(buckets) + " | Avg. |",
        "|---|---|" + "---:|" * (len(buckets) + 1),
    ]
    for row in result["rows"]:
        cells = [row["system"], row["name"].replace("|", "\\|")] + [_fmt(row["by_length"].get(b)) for b in buckets]
        lines.append("| " + " | ".join(cells + [_fmt(row["avg"])]) + " |")
    if result.get("estimate") == "zscore":
        lines += ["", f"{result['workers_sd0']} worker(s) with SD 0 left out of the z-score estimate."]
    return "\n".join(lines) + "\n"


def render_csv(result: dict) -> str:
    out = io.StringIO()
    writer = spreadsheet_csv_writer(out, lineterminator="\n")  # opened in spreadsheets; names are imported text
    if result["table"] == "reliability":
        writer.writerow(["measure", "value"])
        for name, value in (
            ("split_half_raw", result["split_half"]["raw"]),
            ("split_half_zscore", result["split_half"]["zscore"]),
            ("krippendorff_alpha", result["krippendorff_alpha"]),
            ("n_candidates", result["n_candidates"]),
            ("workers_sd0", result["workers_sd0"]),
            ("counted_workers", result["counted_workers"]),
            ("min_judgments", result["min_judgments"]),
        ):
            writer.writerow([name, "" if value is None else value])
        return out.getvalue()
    buckets = result["buckets"]
    writer.writerow(["system", "name", *buckets, "avg", "std", "n"])
    for row in result["rows"]:
        writer.writerow(
            [
                row["system"],
                row["name"],
                *["" if row["by_length"].get(b) is None else row["by_length"][b] for b in buckets],
                "" if row["avg"] is None else row["avg"],
                "" if row["std"] is None else row["std"],
                row["n"],
            ]
        )
    return out.getvalue()
