"""The researcher's dashboard (staff only): a campaign's similarity, fluency and diversity tables
(ParaBank Tab. 4-5, the same numbers as ``manage.py report``) and plots, each downloadable.

``/research/campaigns/`` lists campaigns; ``/research/campaigns/<id>/`` is the dashboard;
``.../tables/<table>.csv|json`` and ``.../plots/<plot>.png`` are the downloads. Every page takes
``?min_judgments=N`` like the CLI's ``--min-judgments``.
"""
from __future__ import annotations

import json

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from annotation.models import Campaign
from config.numbers import ascii_int

from .diversity import LEVENSHTEIN_BINS
from .plots import PLOTS, by_length_png, similarity_vs_diversity_png
from .tables import TABLES, TITLES, build_table, render_csv

# the dashboards show every campaign's judgments aggregated: the admin permissions that show them there
RESEARCH_PERMS = ("annotation.view_campaign", "annotation.view_judgment")


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


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def _display(table: dict) -> dict:
    """Rows as formatted cells for the template (autoescaped there)."""
    rows = []
    for r in table["rows"]:
        cells = [_fmt(r["by_length"].get(b)) for b in table["buckets"]] + [_fmt(r["avg"])]
        if table["table"] == "diversity":
            cells += [str(r["levenshtein_bins"].get(b, 0)) for b in LEVENSHTEIN_BINS]
        else:
            cells += [_fmt(r["std"])]
        rows.append({"system": r["system"], "name": r["name"], "cells": cells, "n": r["n"]})
    extra = [f"Lev. {b}" for b in LEVENSHTEIN_BINS] if table["table"] == "diversity" else ["SD"]
    return {"name": table["table"], "title": TITLES[table["table"]], "headers": table["buckets"] + ["Avg."] + extra,
            "rows": rows}


def _query(min_judgments: int | None) -> str:
    return "" if min_judgments is None else f"?min_judgments={min_judgments}"


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_list(request: HttpRequest) -> HttpResponse:
    return render(request, "scoring/campaign_list.html", {"campaigns": Campaign.objects.order_by("name")})


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_dashboard(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        minimum = _min_judgments(request)
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    tables = {name: build_table(campaign, name, minimum) for name in TABLES}
    query = _query(minimum)
    downloads = [{"label": f"{name} table ({fmt.upper()})",
                  "url": reverse("campaign_table", args=[campaign.pk, name, fmt]) + query}
                 for name in TABLES for fmt in ("csv", "json")]
    plots = [{"name": p, "url": reverse("campaign_plot", args=[campaign.pk, p]) + query} for p in PLOTS]
    context = {"campaign": campaign, "tables": [_display(t) for t in tables.values()], "plots": plots,
               "downloads": downloads, "min_judgments": tables["similarity"]["min_judgments"],
               "counted_workers": tables["similarity"]["counted_workers"]}
    return render(request, "scoring/campaign_dashboard.html", context)


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_table(request: HttpRequest, campaign_id: int, table: str, fmt: str) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if table not in TABLES or fmt not in ("csv", "json"):
        raise Http404("no such table")
    try:
        result = build_table(campaign, table, _min_judgments(request))
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    if fmt == "csv":
        response = HttpResponse(render_csv(result), content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(json.dumps(result, ensure_ascii=False), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{table}.{fmt}"'
    return response


@staff_member_required
@permission_required(RESEARCH_PERMS, raise_exception=True)
def campaign_plot(request: HttpRequest, campaign_id: int, plot: str) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if plot not in PLOTS:
        raise Http404("no such plot")
    try:
        minimum = _min_judgments(request)
    except _BadParameter as exc:
        return HttpResponseBadRequest(str(exc))
    if plot == "similarity-diversity":
        png = similarity_vs_diversity_png(build_table(campaign, "similarity", minimum),
                                          build_table(campaign, "diversity", minimum))
    else:
        png = by_length_png(build_table(campaign, plot.split("-")[0], minimum))
    response = HttpResponse(png, content_type="image/png")
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{plot}.png"'
    return response
