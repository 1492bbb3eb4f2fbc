"""The researcher's dashboard (staff only): a campaign's similarity, fluency and diversity tables
(ParaBank Tab. 4-5, the same numbers as ``manage.py report``), ParaBank 2's pairwise diversity view, the
reliability figures, the cost so far
per batch (``annotation.batches.costs``), the raters' quality-control figures (``annotation.quality.workers``), and
plots of each, downloadable.

``/research/campaigns/`` lists campaigns; ``/research/campaigns/<id>/`` is the dashboard;
``.../tables/<table>.csv|json`` and ``.../plots/<plot>.png`` are the downloads. Every page takes
``?min_judgments=N`` like the CLI's ``--min-judgments``, and ``?estimate=raw|zscore`` like ``--estimate``:
the dashboard applies it to the similarity table and the similarity plots (its raw / bias-corrected
switch is two links, the pages allow no inline script); a download refuses it (400) for a table or plot
without similarity, as the CLI does. A table left empty by the minimum says so and links the minimum that
fills it. Tables and plots come from ``scoring.dashboard.tables.CampaignTables`` (computed once per change).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from annotation.batches.costs import campaign_batch_costs
from annotation.models import Campaign
from annotation.quality.split_half import split_half_label
from api.numbers import ascii_int
from scoring.aggregation import ESTIMATES
from scoring.dashboard.plots import PLOTS, campaign_plot_png
from scoring.dashboard.tables import (
    REPORT_TABLES,
    TABLES,
    TITLES,
    ZSCORE_TITLE,
    CampaignTables,
    EstimateError,
    check_estimate,
    column_label,
    empty_reason,
    render_csv,
)
from scoring.diversity import LEVENSHTEIN_BINS
from scoring.permissions import RESEARCH_PERMS

# the dashboards show every campaign's judgments aggregated: the admin permissions that show them there


class _BadParameter(ValueError):
    pass


def _min_judgments(request: HttpRequest) -> int | None:
    value = request.GET.get("min_judgments", "").strip()
    if not value:
        return None
    try:  # ASCII digits only: "²".isdigit() is True but int("²") raises; int("١٢") is 12
        return ascii_int(value, name="min_judgments", minimum=0)
    except ValueError as exc:
        raise _BadParameter(str(exc)) from None


def _estimate(request: HttpRequest, table: str | None = None) -> str | None:
    """The ``estimate`` parameter, checked against ``table`` when given (the dashboard applies it to its
    similarity table only)."""
    value = request.GET.get("estimate")
    if value is None or value == "":
        return None
    try:
        return check_estimate(table, value) if table else check_estimate("similarity", value)
    except EstimateError as exc:
        raise _BadParameter(f"estimate: {exc}") from None


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def _fmt3(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _display(table: dict, fill_url: Callable[[int], str]) -> dict:
    """Rows as formatted cells for the template (autoescaped there), and why the table is empty (``_empty``)."""
    if table["table"] == "pairwise":
        return _display_pairwise(table)
    rows = []
    for r in table["rows"]:
        cells = [_fmt(r["by_length"].get(b)) for b in table["buckets"]] + [_fmt(r["avg"])]
        if table["table"] == "diversity":
            cells += [str(r["levenshtein_bins"].get(b, 0)) for b in LEVENSHTEIN_BINS]
        else:
            cells += [_fmt(r["std"])]
        rows.append({"system": r["system"], "name": r["name"], "cells": cells, "n": r["n"]})
    extra = [f"Lev. {b}" for b in LEVENSHTEIN_BINS] if table["table"] == "diversity" else ["SD"]
    title = ZSCORE_TITLE if table.get("estimate") == "zscore" else TITLES[table["table"]]
    return {
        "name": table["table"],
        "title": title,
        "headers": table["buckets"] + ["Avg."] + extra,
        "rows": rows,
        "workers_sd0": table.get("workers_sd0") if table.get("estimate") == "zscore" else None,
        "empty": _empty(table, fill_url),
    }


def _display_pairwise(table: dict) -> dict:
    """ParaBank 2's diversity view: against the reference, then one column per system (``column_label``)."""
    names = {r["system"]: r["name"] for r in table["rows"]}
    rows = [
        {
            "system": r["system"],
            "name": r["name"],
            "cells": [_fmt(r["ref_1_bleu"]), _fmt3(r["ref_iou"])]
            + [_fmt(r["pairwise"].get(s)) for s in table["systems"]]
            + [_fmt(r["avg"])],
            "n": r["n"],
        }
        for r in table["rows"]
    ]
    return {
        "name": "pairwise",
        "title": TITLES["pairwise"],
        "headers": ["1-BLEU ref", "I/U ref", *(column_label(s, names[s]) for s in table["systems"]), "Avg."],
        "rows": rows,
        "workers_sd0": None,
        "empty": None,
    }


def _empty(table: dict, fill_url: Callable[[int], str]) -> dict | None:
    """Why the table is empty (``empty_reason``) and the link to the minimum that fills it, if any."""
    reason = empty_reason(table)
    if reason is None:
        return None
    why, minimum = reason
    return {"why": why, "minimum": minimum, "url": None if minimum is None else fill_url(minimum)}


PLOT_TITLES = {
    "similarity-diversity": "Similarity against diversity per system",
    "similarity-by-length": "Similarity by reference length",
    "fluency-by-length": "Fluency by reference length",
    "diversity-by-length": "Diversity by reference length",
    "cost-per-batch": "Cost so far per batch against its estimate",
    "reliability": "Reliability: split-half rho (raw, z-score) with each split, and Krippendorff's alpha",
    "raters": "Per rater: attention checks passed, degraded-copy test p-value, mean score of degraded vs. real",
}


def _money(value, currency: str) -> str:
    return "–" if value is None else f"{value:,.2f} {currency}"


def _cost_rows(campaign: Campaign) -> list[dict]:
    return [
        {
            "label": c.label,
            "provider": c.provider,
            "status": c.status,
            "slots": c.slots,
            "approved": c.approved,
            "awaiting": c.awaiting,
            "estimate": _money(c.estimate, c.currency) if c.estimate is not None else c.note,
            "spent": _money(c.spent, c.currency),
            "bonuses": _money(c.bonuses_sent, c.currency),
            "awaiting_cost": _money(c.awaiting_cost, c.currency),
            "total": _money(c.spent_total, c.currency),
        }
        for c in campaign_batch_costs(campaign)
    ]


def _counted(rater, counted: set[int], minimum: int) -> str:
    """Whether the rater's judgments count in the tables above, and if not why: the same rule as the tables'."""
    if rater.worker_id in counted:
        return "counted"
    if rater.disqualified:
        return "not counted: disqualified"
    return f"not counted: fewer than {minimum} judgment{'s' if minimum != 1 else ''}"


def _rater_rows(tables: CampaignTables) -> list[dict]:
    rows = []
    counted = set(tables.counted_worker_ids())
    for r in tables.raters():
        rate = r.attention_pass_rate
        rows.append(
            {
                "name": r.name,
                "disqualified": r.disqualified,
                "counted": _counted(r, counted, tables.min_judgments),
                "judgments": r.judgments,
                "attention": f"{r.attention_passed}/{r.attention_checks}"
                + (f" ({rate:.0%})" if rate is not None else ""),
                "degraded_checks": r.degraded_checks,
                "degraded_p": "untested" if r.degraded_p is None else f"{r.degraded_p:.3g}",
                "real_mean": _fmt(r.real_mean),
                "degraded_mean": _fmt(r.degraded_mean),
            }
        )
    return rows


def _query(min_judgments: int | None, estimate: str | None = None) -> str:
    params = {k: v for k, v in (("min_judgments", min_judgments), ("estimate", estimate)) if v is not None}
    return "?" + urlencode(params) if params else ""


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_list(request: HttpRequest) -> HttpResponse:
    return render(request, "scoring/campaign_list.html", {"campaigns": Campaign.objects.order_by("name")})


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_dashboard(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        minimum, estimate = _min_judgments(request), _estimate(request)
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    results = CampaignTables(campaign, minimum)
    tables = {name: results.table(name, estimate if name == "similarity" else None) for name in TABLES}
    rel = results.table("reliability")

    def query(name: str) -> str:  # the estimate travels with what shows similarity
        return _query(minimum, estimate if name.startswith("similarity") else None)

    here = reverse("campaign_dashboard", args=[campaign.pk])

    def fill_url(at_least: int) -> str:
        return here + _query(at_least, estimate)

    downloads = [
        {
            "label": f"{name} table ({fmt.upper()})"
            + (" · bias-corrected" if name == "similarity" and estimate == "zscore" else ""),
            "url": reverse("campaign_table", args=[campaign.pk, name, fmt]) + query(name),
        }
        for name in REPORT_TABLES
        for fmt in ("csv", "json")
    ]
    plots = [
        {"name": p, "title": PLOT_TITLES[p], "url": reverse("campaign_plot", args=[campaign.pk, p]) + query(p)}
        for p in PLOTS
    ]
    switch = [
        {
            "label": label,
            "url": here + _query(minimum, None if name == "raw" else name),
            "current": (estimate or "raw") == name,
        }
        for name, label in zip(ESTIMATES, ("raw", "bias-corrected (worker z-scores)"))
    ]
    sh, stepped = rel["split_half"], rel["split_half_reliability"]
    reliability = {
        "label": split_half_label(rel["ratings"]),
        "reliability_raw": _fmt3(stepped["raw"]),
        "reliability_zscore": _fmt3(stepped["zscore"]),
        "raw": _fmt3(sh["raw"]),
        "zscore": _fmt3(sh["zscore"]),
        "alpha": _fmt3(rel["krippendorff_alpha"]),
        "n_candidates": rel["n_candidates"],
        "n_splits": rel["n_splits"],
        "workers_sd0": rel["workers_sd0"],
        "min_per_candidate": rel["min_judgments_per_candidate"],
        "empty": _empty(rel, fill_url),
    }
    raters = _rater_rows(results)
    context = {
        "campaign": campaign,
        "tables": [_display(t, fill_url) for t in tables.values()],
        "plots": plots,
        "downloads": downloads,
        "min_judgments": tables["similarity"]["min_judgments"],
        "counted_workers": tables["similarity"]["counted_workers"],
        "estimate": estimate or "raw",
        "switch": switch,
        "reliability": reliability,
        "costs": _cost_rows(campaign),
        "raters": raters,
        "rater_count": len(raters),
    }
    return render(request, "scoring/campaign_dashboard.html", context)


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_table(request: HttpRequest, campaign_id: int, table: str, fmt: str) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if table not in REPORT_TABLES or fmt not in ("csv", "json"):
        raise Http404("no such table")
    try:
        minimum, estimate = _min_judgments(request), _estimate(request, table)
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    result = CampaignTables(campaign, minimum).table(table, estimate)
    name = f"{table}-zscore" if estimate == "zscore" else table
    if fmt == "csv":
        response = HttpResponse(render_csv(result), content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(json.dumps(result, ensure_ascii=False), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{name}.{fmt}"'
    return response


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_plot(request: HttpRequest, campaign_id: int, plot: str) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if plot not in PLOTS:
        raise Http404("no such plot")
    try:
        minimum, estimate = _min_judgments(request), _estimate(request, plot.split("-")[0])
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    response = HttpResponse(
        campaign_plot_png(CampaignTables(campaign, minimum), plot, estimate), content_type="image/png"
    )
    if request.GET.get("download"):
        name = f"{plot}-zscore" if estimate == "zscore" else plot
        response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{name}.png"'
    return response
