"""The dashboard's plots, drawn server-side with matplotlib (Agg, no pyplot: safe in threaded servers) as
PNG bytes. Inputs are the dicts of ``scoring.tables.build_table``; PNG metadata carries no date, so the
same tables give the same bytes."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

PLOTS = ("similarity-diversity", "similarity-by-length", "fluency-by-length", "diversity-by-length")
_YLABELS = {"similarity": "similarity (0-100)", "fluency": "meaningful and grammatical (%)",
            "diversity": "BLEU without brevity penalty"}


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    return out.getvalue()


def _text(value: str) -> str:
    """Literal text for matplotlib: a "$" would otherwise start mathtext."""
    return str(value).replace("$", r"\$")


def _label(row: dict) -> str:
    return _text(row["system"] if row["name"] == row["system"] else f"{row['system']} {row['name']}")


def similarity_vs_diversity_png(similarity: dict, diversity: dict) -> bytes:
    """One point per system: x = BLEU without brevity penalty (left = more diverse), y = mean similarity
    (ParaBank's trade-off of Tab. 4)."""
    bleu = {r["system"]: r["avg"] for r in diversity["rows"]}
    fig = Figure(figsize=(7, 5))
    ax = fig.add_subplot()
    points = [(bleu.get(r["system"]), r["avg"], _label(r)) for r in similarity["rows"]]
    points = [p for p in points if p[0] is not None and p[1] is not None]
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], color="#23395d")
        for x, y, label in points:
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
    else:
        ax.text(0.5, 0.5, "no system has both a similarity and a diversity score yet", ha="center",
                va="center", transform=ax.transAxes)
    ax.margins(0.12)
    ax.set_xlabel("BLEU without brevity penalty vs. reference (lower = more diverse)")
    ax.set_ylabel("mean similarity (0-100)")
    ax.set_title(f"Similarity against diversity — {_text(similarity['campaign'])}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def by_length_png(table: dict) -> bytes:
    """Grouped bars: for each system, one bar per length bucket (empty cells are left out)."""
    buckets, rows = table["buckets"], table["rows"]
    fig = Figure(figsize=(max(6.0, 0.6 * len(rows) * max(1, len(buckets)) / 2 + 2), 4.5))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(buckets))
    for j, bucket in enumerate(buckets):
        xs = [i + (j - (len(buckets) - 1) / 2) * width for i in range(len(rows))]
        ys = [r["by_length"].get(bucket) for r in rows]
        ax.bar([x for x, y in zip(xs, ys) if y is not None], [y for y in ys if y is not None], width=width,
               label=f"{bucket} tokens")
    ax.set_xticks(range(len(rows)), [_label(r) for r in rows], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(_YLABELS.get(table["table"], table["table"]))
    ax.set_title(f"{table['table'].capitalize()} by reference length — {_text(table['campaign'])}")
    if rows and buckets:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)
