"""ParaBank's result tables (Tab. 4 top: similarity, Tab. 4 bottom: diversity, Tab. 5: fluency), ParaBank 2's
diversity view (``pairwise``: 1-BLEU and intersection/union against the reference, pairwise 1-BLEU between
two systems' outputs for the same reference, ``scoring.diversity.pairwise_rows``), the
reliability figures and the raters' quality-control figures for a campaign, as a dict (the JSON of
``manage.py report``), Markdown or CSV. Values are unrounded except in Markdown (2 decimals, "-" for an
empty cell; reliability 3 decimals). Raters go by ``annotation.models.rater_name``, as everywhere.

The similarity table comes as the raw estimate (ParaBank's) or the bias-corrected one (``zscore``,
rules in ``scoring.aggregation``); the estimate means nothing for the other tables, so asking for one
there is an error rather than silently ignored.

Every table is computed once per change of what it is made of and kept in Django's cache (``CACHES``: Redis
in production, files under ``var/cache`` otherwise), shared by the dashboard, its plots and downloads,
``report`` and the API (``CampaignTables``). An entry's key carries a fingerprint of its inputs
(``campaign_fingerprints``), so a change never needs an invalidation: the next request asks for a key
that is not there yet, and old entries expire."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
from collections.abc import Callable

from django.core.cache import cache
from django.db.models import BigIntegerField, Count, ExpressionWrapper, F, Max, Sum, Value
from django.db.models.functions import Coalesce

from annotation.models import Campaign, Candidate, CandidateSystem, Judgment, Verification, Worker
from annotation.quality.split_half import split_half_label
from annotation.quality.workers import RaterFigures, campaign_rater_figures
from api.csv_safety import spreadsheet_csv_writer
from generation.constraints.systems import system_display_name, system_rank
from scoring.aggregation import ESTIMATES, CampaignData, fluency_rows, load_campaign, similarity_rows, zscore_estimates
from scoring.diversity import diversity_rows, pairwise_rows
from scoring.reliability import reliability_and_splits

log = logging.getLogger(__name__)

TABLES = {
    "similarity": similarity_rows,
    "fluency": fluency_rows,
    "diversity": diversity_rows,
    "pairwise": pairwise_rows,
}
REPORT_TABLES = (*TABLES, "reliability", "raters")
TITLES = {
    "similarity": "Semantic similarity (0-100)",
    "fluency": "Meaningful and grammatical (%)",
    "diversity": "BLEU without brevity penalty (lower = more diverse)",
    "pairwise": "ParaBank 2 diversity: 1-BLEU and token intersection/union against the reference, pairwise 1-BLEU "
    "between systems (higher 1-BLEU, lower I/U = more diverse)",
    "raters": "Raters: attention checks, degraded-copy test, mean scores",
}
ZSCORE_TITLE = "Semantic similarity (0-100), bias-corrected (worker z-scores)"
# the tables made of the counted raters' judgments, and those made of the candidates alone
COUNTING_RATERS = ("similarity", "fluency", "reliability")
SAMPLE_TABLES = ("diversity", "pairwise")
# Bump when a table's rules or shape change: entries made by the old code are then never read.
CACHE_VERSION = 2  # 2: reliability from 2 judgments per candidate, stepped up (annotation.quality.split_half)
# An entry whose fingerprint no longer matches is never read again; expiry frees its room (a campaign in
# collection leaves one set behind per change that was viewed). A current entry that expires is recomputed.
CACHE_SECONDS = 24 * 3600


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
    ``generation.constraints.systems.system_display_name`` ("17" -> its Tab. 3 name, "r3" -> "rank 3", else itself)."""
    names = (campaign.settings or {}).get("system_names") or {}
    if system in names:
        return str(names[system])
    return system_display_name(str(system))


def campaign_fingerprints(campaign: Campaign) -> tuple[str, str]:
    """Short hashes of what a campaign's tables are made of: (its sample: the candidates, the systems that
    produced them and the campaign's settings such as system names; that and its judgments: the counted ones
    -- count, ids, scores and fluency choices -- and which of its workers are disqualified). A new judgment,
    an imported one corrected, a crowd submission verified or flagged, a worker disqualified or reinstated
    each change the second; sums weighted by id make a swap of two values show too.

    Made to be cheap, since every view asks for it (about 5 ms at ParaBank's size, 50 at ten times): three
    aggregate queries and one over the few disqualified workers, no row read. Judgments are found through
    their assignment's campaign (the same campaign as their candidate's, by construction: a HIT's items and an
    import's rows are the campaign's own), which spares two joins; a new system is seen by the highest
    candidate-system id anywhere (a system added to another campaign recomputes this one's tables too, which is
    rare and harmless). A rater renamed (a login changed) shows under the new name from the next change."""
    candidates = Candidate.objects.filter(reference__campaign=campaign).aggregate(
        n=Count("id"), ids=Sum("id"), last=Max("id")
    )
    systems = CandidateSystem.objects.aggregate(last=Max("id"))
    sample = (campaign.pk, campaign.created_at.isoformat(), campaign.settings, candidates, systems)

    def weighted(field: F | Coalesce):
        return Sum(ExpressionWrapper(F("id") * field, output_field=BigIntegerField()))

    judgments = Judgment.objects.filter(
        assignment__campaign=campaign, assignment__verification=Verification.VERIFIED
    ).aggregate(
        n=Count("id"),
        ids=Sum("id"),
        last=Max("id"),
        scores=weighted(Coalesce("score", Value(101))),  # N/A as 101, outside the slider's range
        fluency=weighted(F("fluency")),
    )
    disqualified = sorted(
        Worker.objects.filter(disqualified=True, assignments__campaign=campaign).values_list("pk", flat=True).distinct()
    )
    return _digest(sample), _digest((sample, judgments, disqualified))


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:24]


class CampaignTables:
    """A campaign's tables at one minimum of judgments per worker, each computed at most once per change of its
    inputs and shared through the cache by every reader (the dashboard, plots, downloads, ``report``, the API).
    The campaign is loaded from the database only when something asked for is not cached yet."""

    def __init__(self, campaign: Campaign, min_judgments: int | None = None):
        self.campaign = campaign
        self.min_judgments = campaign.min_judgments_per_worker if min_judgments is None else int(min_judgments)
        self._fingerprints: tuple[str, str] | None = None
        self._data: CampaignData | None = None

    @property
    def data(self) -> CampaignData:
        if self._data is None:
            self._data = load_campaign(self.campaign, self.min_judgments)
        return self._data

    def cached(self, name: str, compute: Callable[[], object], *, judgments: bool = True, minimum: bool = True):
        """The cached value of ``name``, else ``compute()`` stored. ``judgments=False``: the value depends on the
        sample only (diversity), so new judgments keep it; ``minimum=False``: not on the minimum (raters)."""
        if self._fingerprints is None:
            self._fingerprints = campaign_fingerprints(self.campaign)
        fingerprint = self._fingerprints[1 if judgments else 0]
        at = f":min{self.min_judgments}" if minimum else ""
        key = f"scoring:tables:v{CACHE_VERSION}:campaign{self.campaign.pk}:{fingerprint}{at}:{name}"
        try:
            value = cache.get(key)
        except Exception:  # a cache that is down slows the page, it does not break it
            log.warning("cache unavailable, computing %s", key, exc_info=True)
            return compute()
        if value is None:
            value = compute()
            try:
                cache.set(key, value, CACHE_SECONDS)
            except Exception:  # as above
                log.warning("cache unavailable, not storing %s", key, exc_info=True)
        return value

    def table(self, table: str, estimate: str | None = None) -> dict:
        """One report table as a dict; ``estimate`` ("raw" default, or "zscore") only for ``similarity``."""
        if table not in REPORT_TABLES:
            raise ValueError(f"unknown table {table!r} (one of {', '.join(REPORT_TABLES)})")
        estimate = check_estimate(table, estimate)
        if table == "raters":
            return {"table": table, "campaign": self.campaign.name, "rows": [rater_row(r) for r in self.raters()]}
        counts = self.cached("counts", self._counts)
        if table == "reliability":
            figures = dict(self.reliability()[0])
            return {
                "table": table,
                **{k: figures.pop(k) for k in ("split_half", "n_candidates", "krippendorff_alpha")},
                "campaign": self.campaign.name,
                **counts,
                **figures,
            }
        extra = {}
        if table == "similarity":
            extra = {"estimate": estimate or "raw"}
            if estimate == "zscore":
                rows, extra["workers_sd0"] = self.cached("similarity-zscore", self._zscore_rows)
            else:
                rows = self.cached("similarity", lambda: similarity_rows(self.data))
        elif table in SAMPLE_TABLES:
            rows = self.cached(table, lambda: TABLES[table](self.data), judgments=False, minimum=False)
        else:
            rows = self.cached(table, lambda: TABLES[table](self.data))
        if table == "pairwise":  # one column per system instead of the length buckets
            return {
                "table": table,
                "campaign": self.campaign.name,
                **counts,
                "systems": [r["system"] for r in rows],
                "rows": [self._named(r) for r in rows],
            }
        named = [self._named(r) for r in rows]
        every = self.cached("buckets", lambda: self.data.buckets, judgments=False, minimum=False)
        return {
            "table": table,
            "campaign": self.campaign.name,
            **counts,
            **extra,
            "buckets": filled_buckets([str(b) for b in every], named),
            "rows": named,
        }

    def counted_worker_ids(self) -> list[int]:
        """The pks of the workers counted at this minimum (``scoring.aggregation.counted_workers``)."""
        return self.cached("counted-workers", lambda: sorted(self.data.counted_workers))

    def reliability(self) -> tuple[dict, dict]:
        """(the reliability figures, each split's rho): ``scoring.reliability.reliability_and_splits``."""
        return self.cached("reliability", lambda: reliability_and_splits(self.data))

    def raters(self) -> list[RaterFigures]:
        """Every rater's quality-control figures (``annotation.quality.workers.campaign_rater_figures``)."""
        return self.cached("raters", lambda: campaign_rater_figures(self.campaign), minimum=False)

    def _counts(self) -> dict:
        return {
            "min_judgments": self.data.min_judgments,
            "counted_workers": len(self.data.counted_workers),
            "most_rater_judgments": self.data.most_judgments,
        }

    def _zscore_rows(self) -> tuple[list[dict], int]:
        z = zscore_estimates(self.data)
        return similarity_rows(self.data, z.means), z.workers_sd0

    def _named(self, row: dict) -> dict:
        """The row with the system's name second (names come from the settings, part of the fingerprint)."""
        return {
            "system": row["system"],
            "name": system_name(self.campaign, row["system"]),
            **{k: v for k, v in row.items() if k not in ("system", "name")},
        }


def filled_buckets(buckets: list[str], rows: list[dict]) -> list[str]:
    """The length buckets with a value in some row: a campaign without 40-token references gets no empty "40"
    column, nor a "40 tokens" legend entry with no bar."""
    return [b for b in buckets if any(r["by_length"].get(b) is not None for r in rows)]


def build_table(campaign: Campaign, table: str, min_judgments: int | None = None, estimate: str | None = None) -> dict:
    """One report table as a dict (``CampaignTables.table``); ``estimate`` only for ``similarity``."""
    return CampaignTables(campaign, min_judgments).table(table, estimate)


def rater_row(rater: RaterFigures) -> dict:
    """A rater's figures as a table row, named by ``annotation.models.rater_name``."""
    figures = dataclasses.asdict(rater)
    del figures["worker_id"]  # one name per rater, the same as on every other screen
    return {"name": figures.pop("name"), **figures, "attention_pass_rate": rater.attention_pass_rate}


def empty_reason(result: dict) -> tuple[str, int | None] | None:
    """Why a table made of counted raters' judgments shows nothing, and the minimum of judgments per worker
    that would fill it (None where no minimum would): no rater has reached the minimum yet, or none is
    counted at all. None when raters are counted, or for a table that does not count raters."""
    if result["table"] not in COUNTING_RATERS or result["counted_workers"]:
        return None
    most, minimum = result["most_rater_judgments"], result["min_judgments"]
    if not most:
        return "No counted judgment by a rater in good standing yet.", None
    return (
        f"No rater has {minimum} judgment{'s' if minimum != 1 else ''} yet; the most any rater has is {most}.",
        most,
    )


def _blank(value) -> object:
    return "" if value is None else value


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fmt3(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _markdown_reliability(result: dict) -> str:
    sh, rel = result["split_half"], result["split_half_reliability"]
    return "\n".join(
        [
            f"**Reliability of the similarity judgments** — campaign {result['campaign']}",
            "",
            "| Measure | Raw | Bias-corrected (z-score) |",
            "|---|---:|---:|",
            f"| {split_half_label(result['ratings'])} | {_fmt3(rel['raw'])} | {_fmt3(rel['zscore'])} |",
            f"| Split-half Spearman's rho of the half means ({result['n_splits']} splits, {result['n_candidates']} "
            f"candidates with >= {result['min_judgments_per_candidate']} judgments) | {_fmt3(sh['raw'])} | "
            f"{_fmt3(sh['zscore'])} |",
            f"| Krippendorff's alpha (interval) | {_fmt3(result['krippendorff_alpha'])} | |",
            "",
            f"{result['counted_workers']} counted workers (min. judgments {result['min_judgments']}); "
            f"{result['workers_sd0']} with SD 0 left out of the z-score estimate.",
            "",
        ]
    )


def _markdown_raters(result: dict) -> str:
    lines = [
        f"**{TITLES['raters']}** — campaign {result['campaign']}",
        "",
        "| Rater | Judgments | Attention checks passed | Degraded checks | Degraded-copy test p | Mean, real | "
        "Mean, degraded | |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        p = "untested" if r["degraded_p"] is None else f"{r['degraded_p']:.3g}"
        cells = [
            r["name"].replace("|", "\\|"),
            str(r["judgments"]),
            f"{r['attention_passed']}/{r['attention_passed'] + r['attention_failed']}",
            str(r["degraded_checks"]),
            p,
            _fmt(r["real_mean"]),
            _fmt(r["degraded_mean"]),
            "disqualified" if r["disqualified"] else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def column_label(system: str, name: str) -> str:
    """A pairwise table's column header for a system: its name where that is a rank ("rank 1", short), else the
    system as the "#" column shows it (a Tab. 3 name is too long for a column)."""
    return name if system_rank(system) is not None else system


def _markdown_pairwise(result: dict) -> str:
    names = {r["system"]: r["name"] for r in result["rows"]}
    columns = [column_label(s, names[s]).replace("|", "\\|") for s in result["systems"]]
    lines = [
        f"**{TITLES['pairwise']}** — campaign {result['campaign']}",
        "",
        "| # | System | 1-BLEU ref | I/U ref | " + " | ".join(columns) + " | Avg. |",
        "|---|---|---:|---:|" + "---:|" * (len(columns) + 1),
    ]
    for row in result["rows"]:
        cells = [row["system"], row["name"].replace("|", "\\|"), _fmt(row["ref_1_bleu"]), _fmt3(row["ref_iou"])]
        cells += [_fmt(row["pairwise"].get(s)) for s in result["systems"]] + [_fmt(row["avg"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(result: dict) -> str:
    if result["table"] == "reliability":
        return _markdown_reliability(result) + _markdown_empty(result)
    if result["table"] == "raters":
        return _markdown_raters(result)
    if result["table"] == "pairwise":
        return _markdown_pairwise(result)
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
    return "\n".join(lines) + "\n" + _markdown_empty(result)


def _markdown_empty(result: dict) -> str:
    reason = empty_reason(result)
    if reason is None:
        return ""
    text, minimum = reason
    return f"\n{text}" + (f" Try --min-judgments {minimum}.\n" if minimum is not None else "\n")


def render_csv(result: dict) -> str:
    out = io.StringIO()
    writer = spreadsheet_csv_writer(out, lineterminator="\n")  # opened in spreadsheets; names are imported text
    if result["table"] == "reliability":
        writer.writerow(["measure", "value"])
        for name, value in (
            ("split_half_raw", result["split_half"]["raw"]),
            ("split_half_zscore", result["split_half"]["zscore"]),
            ("split_half_reliability_raw", result["split_half_reliability"]["raw"]),
            ("split_half_reliability_zscore", result["split_half_reliability"]["zscore"]),
            ("ratings", result["ratings"]),
            ("krippendorff_alpha", result["krippendorff_alpha"]),
            ("n_candidates", result["n_candidates"]),
            ("workers_sd0", result["workers_sd0"]),
            ("counted_workers", result["counted_workers"]),
            ("min_judgments", result["min_judgments"]),
        ):
            writer.writerow([name, "" if value is None else value])
        return out.getvalue()
    if result["table"] == "raters":
        columns = list(result["rows"][0] if result["rows"] else rater_row(RaterFigures(0, False)))
        writer.writerow(columns)
        for row in result["rows"]:
            writer.writerow(["" if row[k] is None else row[k] for k in columns])
        return out.getvalue()
    if result["table"] == "pairwise":
        writer.writerow(["system", "name", "ref_1_bleu", "ref_iou", *result["systems"], "avg", "n"])
        for row in result["rows"]:
            figures = [row["ref_1_bleu"], row["ref_iou"], *(row["pairwise"].get(s) for s in result["systems"])]
            writer.writerow(
                [row["system"], row["name"], *("" if v is None else v for v in figures), _blank(row["avg"]), row["n"]]
            )
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
