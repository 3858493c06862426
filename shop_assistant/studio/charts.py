"""Small charts as inline SVG, drawn on the server: no chart library, nothing for the browser to run. Every label
goes through ``format_html``, so text from the database is escaped."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2456c7", "#3aa76d", "#e08a1e", "#b03a48")


def bar_chart(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    width: int = 640,
    height: int = 200,
) -> SafeString:
    """Grouped bars: one group per label, one bar per series, a value over each bar and a legend.

    ``series``: (name, values), each with one value per label."""
    top, bottom, left, right = 24, 34, 8, 8
    plot_h = height - top - bottom
    peak = max([max(values, default=0) for _, values in series] + [1])
    group_w = (width - left - right) / max(len(labels), 1)
    bar_w = max(group_w * 0.8 / max(len(series), 1), 2)
    bars, texts = [], []
    for g, label in enumerate(labels):
        x0 = left + g * group_w + group_w * 0.1
        for s, (name, values) in enumerate(series):
            value = values[g]
            h = plot_h * value / peak
            x, y = x0 + s * bar_w, top + plot_h - h
            bars.append((f"{x:.1f}", f"{y:.1f}", f"{bar_w - 1:.1f}", f"{h:.1f}", PALETTE[s % len(PALETTE)],
                         f"{label} · {name}: {_fmt(value)}"))  # fmt: skip
            if value:
                texts.append((f"{x + bar_w / 2:.1f}", f"{y - 3:.1f}", _fmt(value)))
        texts.append((f"{x0 + group_w * 0.4:.1f}", f"{height - bottom + 14:.1f}", label))
    entries, x = [], left
    for i, (name, _) in enumerate(series):
        entries.append((x, height - 12, PALETTE[i % len(PALETTE)], x + 14, height - 3, name))
        x += 14 + 6 * len(name) + 18  # about 6 units a character at the legend's 11-unit font
    legend = format_html_join(
        "",
        '<rect x="{}" y="{}" width="10" height="10" fill="{}"></rect><text x="{}" y="{}" class="legend">{}</text>',
        entries,
    )
    return format_html(
        '<svg class="chart" role="img" viewBox="0 0 {w} {h}" width="100%" aria-label="{title}">'
        "<title>{title}</title>"
        '<line x1="{l}" y1="{base}" x2="{r}" y2="{base}" stroke="#c9ccd1"></line>{bars}{texts}{legend}</svg>',
        w=width, h=height, title=title, l=left, r=width - right, base=top + plot_h,
        bars=format_html_join(
            "", '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>', bars
        ),
        texts=format_html_join("", '<text x="{}" y="{}" text-anchor="middle">{}</text>', texts),
        legend=legend if len(series) > 1 else mark_safe(""),
    )  # fmt: skip


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
