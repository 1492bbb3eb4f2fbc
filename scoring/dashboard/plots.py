"""The dashboard's plots, drawn server-side with matplotlib (Agg, no pyplot: safe in threaded servers) as
PNG bytes. Inputs are the dicts of ``scoring.dashboard.tables.build_table``, and for the cost, reliability and rater
plots the figures of ``annotation.batches.costs``, ``scoring.reliability`` and ``annotation.quality.workers``; each
plot is a ``*_figure`` function (what the tests read the drawn values from) and its PNG. PNG metadata carries no
date, so the same figures give the same bytes. ``campaign_plot_png`` draws a campaign's plot once per change
of its tables (cached with them)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from annotation.batches.costs import campaign_batch_costs
from generation.constraints.systems import system_rank

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from scoring.dashboard.tables import CampaignTables

TABLE_PLOTS = ("similarity-diversity", "similarity-by-length", "fluency-by-length", "diversity-by-length")
PLOTS = (*TABLE_PLOTS, "cost-per-batch", "reliability", "raters")
_YLABELS = {
    "similarity": "similarity (0-100)",
    "fluency": "meaningful and grammatical (%)",
    "diversity": "BLEU without brevity penalty",
}


def _figure(figsize: tuple[float, float]) -> Figure:
    """A new figure on the Agg canvas: matplotlib (0.3 s) loads when a plot is drawn, not with the app."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    return out.getvalue()


def _text(value: str) -> str:
    """Literal text for matplotlib: a "$" would otherwise start mathtext."""
    return str(value).replace("$", r"\$")


def _label(row: dict) -> str:
    """ "17 neg 3rd lowest IDF"; the name alone where it says the system already ("rank 1" for "r1")."""
    alone = row["name"] == row["system"] or system_rank(row["system"]) is not None
    return _text(row["name"] if alone else f"{row['system']} {row['name']}")


def similarity_vs_diversity_png(similarity: dict, diversity: dict) -> bytes:
    """One point per system: x = BLEU without brevity penalty (left = more diverse), y = mean similarity
    (ParaBank's trade-off of Tab. 4)."""
    bleu = {r["system"]: r["avg"] for r in diversity["rows"]}
    fig = _figure(figsize=(7, 5))
    ax = fig.add_subplot()
    points = [(bleu.get(r["system"]), r["avg"], _label(r)) for r in similarity["rows"]]
    points = [p for p in points if p[0] is not None and p[1] is not None]
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], color="#23395d")
        for x, y, label in points:
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
    else:
        ax.text(
            0.5,
            0.5,
            "no system has both a similarity and a diversity score yet",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.margins(0.12)
    ax.set_xlabel("BLEU without brevity penalty vs. reference (lower = more diverse)")
    ax.set_ylabel("mean similarity (0-100)")
    ax.set_title(f"Similarity against diversity — {_text(similarity['campaign'])}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def length_colours(buckets) -> dict:
    """One colour per length bucket, each distinct (matplotlib's tab10, or evenly spaced on viridis past ten):
    fixed here, not left to the colour cycle, so that a bucket without bars cannot lend its legend entry the
    first bucket's colour."""
    import matplotlib

    buckets = list(buckets)
    if len(buckets) <= 10:
        return {b: matplotlib.colormaps["tab10"](i) for i, b in enumerate(buckets)}
    cmap = matplotlib.colormaps["viridis"]
    return {b: cmap(i / (len(buckets) - 1)) for i, b in enumerate(buckets)}


def by_length_figure(table: dict) -> Figure:
    """Grouped bars: for each system, one bar per length bucket (empty cells are left out; the table's buckets
    are those with data, ``scoring.dashboard.tables.filled_buckets``, so the legend has no empty entry)."""
    from matplotlib.patches import Patch

    buckets, rows = table["buckets"], table["rows"]
    fig = _figure(figsize=(max(6.0, 0.6 * len(rows) * max(1, len(buckets)) / 2 + 2), 4.5))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(buckets))
    colours = length_colours(buckets)
    handles = []
    for j, bucket in enumerate(buckets):
        xs = [i + (j - (len(buckets) - 1) / 2) * width for i in range(len(rows))]
        ys = [r["by_length"].get(bucket) for r in rows]
        ax.bar(
            [x for x, y in zip(xs, ys) if y is not None],
            [y for y in ys if y is not None],
            width=width,
            color=colours[bucket],
        )
        handles.append(Patch(facecolor=colours[bucket], label=f"{bucket} tokens"))
    ax.set_xticks(range(len(rows)), [_label(r) for r in rows], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(_YLABELS.get(table["table"], table["table"]))
    ax.set_title(f"{table['table'].capitalize()} by reference length — {_text(table['campaign'])}")
    if rows and buckets:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def by_length_png(table: dict) -> bytes:
    return _png(by_length_figure(table))


def _money(value, currency: str) -> str:
    return f"{'$' if currency == 'USD' else currency + ' '}{value:,.2f}".replace("$", r"\$")


def cost_figure(costs: list) -> Figure:
    """One row per batch (``annotation.batches.costs.BatchCost``): stacked bars of what was paid so far (rewards and
    fees of approved assignments, then bonuses sent) and what awaits payment, over an outlined bar of the
    provider's estimate for the whole batch."""
    fig = _figure(figsize=(8, max(3.0, 0.55 * len(costs) + 1.8)))
    ax = fig.add_subplot()
    if not costs:
        ax.text(0.5, 0.5, "no HIT batch in this campaign yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ys = list(range(len(costs)))[::-1]  # the first batch on top
    segments = (
        ("spent", "paid: rewards and fees", "#23395d", None),
        ("bonuses_sent", "bonuses sent", "#4f86c6", None),
        ("awaiting_cost", "awaiting payment", "#c9daf0", "//"),
    )
    left = [0.0] * len(costs)
    for attr, label, color, hatch in segments:
        widths = [float(getattr(c, attr)) for c in costs]
        if costs:
            ax.barh(
                ys,
                widths,
                left=left,
                height=0.5,
                color=color,
                hatch=hatch,
                edgecolor="#23395d",
                linewidth=0.5,
                label=label,
            )
        left = [a + b for a, b in zip(left, widths)]
    estimates = [float(c.estimate) if c.estimate is not None else 0.0 for c in costs]
    if any(c.estimate is not None for c in costs):
        ax.barh(
            ys,
            estimates,
            height=0.8,
            fill=False,
            edgecolor="#b5473a",
            linewidth=1.5,
            linestyle="--",
            label="estimate (whole batch)",
            zorder=0,
        )
    for y, c, end in zip(ys, costs, left):
        text = f"{_money(c.spent_total, c.currency)} spent" + (
            f" of {_money(c.estimate, c.currency)}" if c.estimate is not None else f" ({_text(c.note)})"
        )
        ax.annotate(text, (max(end, float(c.estimate or 0)), y), textcoords="offset points", xytext=(4, -3), fontsize=8)
    if costs:
        ax.set_yticks(ys, [_text(f"{c.label} · {c.provider}") for c in costs], fontsize=8)
        currencies = sorted({c.currency for c in costs})
        ax.set_xlabel(f"amount ({currencies[0] if len(currencies) == 1 else 'each batch' + chr(39) + 's currency'})")
        ax.margins(x=0.35)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
    ax.set_title("Cost so far per batch")
    fig.tight_layout()
    return fig


def cost_png(costs: list) -> bytes:
    return _png(cost_figure(costs))


RELIABILITY_LABELS = ("split-half rho, raw", "split-half rho, z-score", "Krippendorff's alpha (interval)")


def reliability_figure(figures: dict, splits: dict) -> Figure:
    """Bars of the three reliability figures (``scoring.reliability.reliability``), each split's rho drawn as
    a dot over its split-half bar (``reliability_and_splits``); a figure that is undefined is written "n/a"."""
    values = [figures["split_half"]["raw"], figures["split_half"]["zscore"], figures["krippendorff_alpha"]]
    fig = _figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    xs = range(len(values))
    ax.bar(xs, [v if v is not None else 0.0 for v in values], width=0.6, color=["#23395d", "#4f86c6", "#7a9e7e"])
    for x, key in ((0, "raw"), (1, "zscore")):
        rhos = [r for r in splits.get(key, []) if r is not None]
        if rhos:
            offsets = [(i / max(1, len(rhos) - 1) - 0.5) * 0.4 for i in range(len(rhos))]
            ax.scatter(
                [x + o for o in offsets],
                rhos,
                s=12,
                color="#f0a030",
                edgecolor="black",
                linewidth=0.3,
                zorder=3,
                label="one split's rho" if x == 0 else None,
            )
    for x, v in zip(xs, values):
        ax.annotate(
            "n/a" if v is None else f"{v:.3f}",
            (x, v if v is not None and v > 0 else 0),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=9,
        )
    ax.set_xticks(list(xs), RELIABILITY_LABELS, fontsize=9)
    low = min(
        [0.0]
        + [v for v in values if v is not None]
        + [r for k in ("raw", "zscore") for r in splits.get(k, []) if r is not None]
    )
    ax.set_ylim(min(0.0, low - 0.05), 1.05)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel("reliability")
    ax.set_title(
        f"Reliability of the similarity judgments ({figures['n_candidates']} candidates with "
        f">= {figures['min_judgments_per_candidate']} judgments, {figures['n_splits']} splits)",
        fontsize=10,
    )
    if any(r is not None for k in ("raw", "zscore") for r in splits.get(k, [])):
        ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def reliability_png(figures: dict, splits: dict) -> bytes:
    return _png(reliability_figure(figures, splits))


def raters_figure(raters: list, *, min_pass_rate: float, p_max: float) -> Figure:
    """Per rater (``annotation.quality.workers.RaterFigures``), three panels: the attention-check pass rate (line:
    the lowest rate the campaign's rule keeps), the degraded-copy Mann-Whitney p-value on a log scale
    (line: the campaign's ``degraded_p_max``; "untested" below the minimum of checks), and the mean score of
    the degraded copies against the real candidates. Disqualified raters are drawn in red; raters go by
    their one name (``annotation.models.rater_name``)."""
    n = len(raters)
    fig = _figure(figsize=(max(8.5, 0.45 * n + 4.0), 9))
    attention, degraded, means = fig.subplots(3, 1, sharex=True)
    xs = list(range(n))
    colors = ["#b5473a" if r.disqualified else "#23395d" for r in raters]
    if not raters:
        attention.text(
            0.5,
            0.5,
            "no counted judgment in this campaign yet",
            ha="center",
            va="center",
            transform=attention.transAxes,
        )
    rates = [r.attention_pass_rate for r in raters]
    attention.bar(
        [x for x, v in zip(xs, rates) if v is not None],
        [v for v in rates if v is not None],
        color=[c for c, v in zip(colors, rates) if v is not None],
        width=0.7,
    )
    attention.axhline(
        min_pass_rate,
        color="#f0a030",
        linestyle="--",
        linewidth=1.2,
        label=f"lowest pass rate kept ({min_pass_rate:.0%})",
    )
    attention.set_ylim(0, 1.05)
    attention.set_ylabel("attention checks passed")
    attention.set_title(
        "Attention checks, degraded-copy test and mean scores per rater (red: disqualified)", fontsize=10
    )
    for x, rate in zip(xs, rates):
        if rate is None:
            attention.annotate("no checks", (x, 0), ha="center", va="bottom", rotation=90, fontsize=7, color="grey")
    ps = [r.degraded_p for r in raters]
    tested = [(x, p, c) for x, p, c in zip(xs, ps, colors) if p is not None]
    if tested:
        degraded.bar(
            [t[0] for t in tested], [max(t[1], 1e-12) for t in tested], color=[t[2] for t in tested], width=0.7
        )
    for x, p in zip(xs, ps):
        if p is None:
            degraded.annotate("untested", (x, p_max), ha="center", va="bottom", rotation=90, fontsize=7, color="grey")
    degraded.set_yscale("log")
    degraded.axhline(p_max, color="#f0a030", linestyle="--", linewidth=1.2, label=f"p max ({p_max:g})")
    degraded.set_ylabel("degraded-copy test p")
    width = 0.38
    real = [(x - width / 2, r.real_mean) for x, r in zip(xs, raters) if r.real_mean is not None]
    bad = [(x + width / 2, r.degraded_mean) for x, r in zip(xs, raters) if r.degraded_mean is not None]
    means.bar([p[0] for p in real], [p[1] for p in real], width=width, color="#4f86c6", label="real candidates")
    means.bar(
        [p[0] for p in bad],
        [p[1] for p in bad],
        width=width,
        color="#c9daf0",
        hatch="//",
        edgecolor="#23395d",
        linewidth=0.5,
        label="degraded copies",
    )
    means.set_ylim(0, 105)
    means.set_ylabel("mean score (N/A as 0)")
    means.set_xticks(xs, [_text(r.name) for r in raters], rotation=90, fontsize=8)
    for label, color in zip(means.get_xticklabels(), colors):
        label.set_color(color)
    for ax in (attention, degraded, means):
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def raters_png(raters: list, *, min_pass_rate: float, p_max: float) -> bytes:
    return _png(raters_figure(raters, min_pass_rate=min_pass_rate, p_max=p_max))


def campaign_plot_png(tables: CampaignTables, plot: str, estimate: str | None = None) -> bytes:
    """The dashboard's ``plot`` of a campaign (``tables``: its ``scoring.dashboard.tables.CampaignTables``) as PNG
    bytes, drawn once per change of the tables it shows and cached with them; the cost plot follows payments, not
    judgments, and is drawn each time (it reads a few rows per batch)."""
    if plot not in PLOTS:
        raise ValueError(f"unknown plot {plot!r} (one of {', '.join(PLOTS)})")
    if plot == "cost-per-batch":
        return cost_png(campaign_batch_costs(tables.campaign))
    return tables.cached(f"plot:{plot}:{estimate or 'raw'}", lambda: _draw(tables, plot, estimate))


def _draw(tables: CampaignTables, plot: str, estimate: str | None) -> bytes:
    campaign = tables.campaign
    if plot == "similarity-diversity":
        return similarity_vs_diversity_png(tables.table("similarity", estimate), tables.table("diversity"))
    if plot == "reliability":
        return reliability_png(*tables.reliability())
    if plot == "raters":
        return raters_png(
            tables.raters(),
            min_pass_rate=1 - float(campaign.setting("max_attention_failure_rate")),
            p_max=float(campaign.setting("degraded_p_max")),
        )
    return by_length_png(tables.table(plot.split("-")[0], estimate))
