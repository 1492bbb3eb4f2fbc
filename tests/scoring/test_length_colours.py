"""The by-length plots give every length its own colour (issue 37, item 7): "5 tokens" and "40 tokens" shared one
when the 40-token bucket had no bars (the legend drew the empty entry in the colour cycle's first colour)."""

from scoring.dashboard.plots import by_length_figure, length_colours
from scoring.dashboard.tables import filled_buckets


def table(buckets, rows) -> dict:
    return {"table": "similarity", "campaign": "demo-sample", "buckets": buckets, "rows": rows}


def test_every_length_has_its_own_colour_in_the_bars_and_the_legend():
    rows = [
        {"system": "15", "name": "s15", "by_length": {"5": 70.0, "10": 64.0, "20": 58.0, "40": None}},
        {"system": "22", "name": "s22", "by_length": {"5": 75.0, "10": 61.0, "40": None}},
    ]
    # issue 48: a length no reference has leaves the table and the legend (no empty "40", no "(no data)")
    buckets = filled_buckets(["5", "10", "20", "40"], rows)
    assert buckets == ["5", "10", "20"]
    ax = by_length_figure(table(buckets, rows)).axes[0]
    legend = {
        text.get_text(): handle.get_facecolor()
        for text, handle in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)
    }
    assert list(legend) == ["5 tokens", "10 tokens", "20 tokens"]
    assert len(set(legend.values())) == 3  # three lengths, three colours
    bars = {tuple(p.get_facecolor()) for p in ax.patches}
    assert bars == {legend["5 tokens"], legend["10 tokens"], legend["20 tokens"]}  # the bars wear their legend's colour


def test_more_lengths_than_a_palette_still_get_distinct_colours():
    buckets = list(range(5, 65, 5))  # 12 lengths
    assert len(set(length_colours(buckets).values())) == 12
