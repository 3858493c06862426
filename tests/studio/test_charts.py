"""Server-side SVG charts: bar heights in proportion, values and labels escaped, a legend for several series."""

from __future__ import annotations

import re

from shop_assistant.studio.charts import bar_chart


def bars(svg: str) -> list[tuple[float, str]]:
    return [(float(h), title) for h, title in re.findall(r'height="([\d.]+)" fill="#\w+"><title>([^<]*)</title>', svg)]


def test_bars_are_in_proportion_and_carry_their_values():
    svg = str(bar_chart(["Mon", "Tue"], [("Chats", [2, 4])], title="Per day", height=200))
    (mon, mon_title), (tue, tue_title) = bars(svg)
    assert tue == 200 - 24 - 34 and mon == tue / 2  # the tallest bar fills the plot
    assert (mon_title, tue_title) == ("Mon · Chats: 2", "Tue · Chats: 4")
    assert svg.startswith('<svg class="chart" role="img"') and 'aria-label="Per day"' in svg
    assert 'class="legend"' not in svg  # one series needs no legend


def test_an_empty_chart_draws_flat_bars_and_several_series_get_a_legend():
    svg = str(bar_chart(["a", "b"], [("One", [0, 0]), ("Two", [0, 0])], title="Nothing"))
    assert [h for h, _ in bars(svg)] == [0.0] * 4
    legend = re.findall(r'<text x="([\d.]+)" y="[\d.]+" class="legend">([^<]*)</text>', svg)
    assert [name for _, name in legend] == ["One", "Two"] and float(legend[0][0]) < float(legend[1][0])


def test_labels_are_escaped():
    svg = str(bar_chart(["<script>"], [("a&b", [1])], title='"x"'))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&amp;b" in svg and 'aria-label="&quot;x&quot;"' in svg
