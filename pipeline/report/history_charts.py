"""history.html's charts, inline SVG drawn by hand like report.html's (charts.py: its ticks): a metric per
run with the spec's threshold and the blessed and pushed runs marked, and each run's seconds per
component as a stacked bar. Colours come from the page's CSS classes, so the charts follow its light or
dark scheme."""

from __future__ import annotations

from typing import Any

from tfxd.pipeline.report.charts import tick_label, ticks
from tfxd.pipeline.report.markup import escape, number

# the components' colours in the stacked bars, in pipeline order (a component not listed takes grey)
_COMPONENT_COLORS = {"ExampleGen": "#1f6fb4", "StatisticsGen": "#6aa84f", "SchemaGen": "#93c47d",
                     "ExampleValidator": "#b6a13a", "Transform": "#e8710a", "Trainer": "#c0392b",
                     "Evaluator": "#8e44ad", "Pusher": "#16a085"}


def metric_chart(name: str, points: list[tuple[str, Any, bool | None, bool]], threshold: dict[str, Any]) -> str:
    """``points``: (run started, value, blessed, pushed) oldest first; a point per run with a value. The
    threshold's min and max as dashed lines."""
    width, height, left, right, top, bottom = 460, 240, 58, 16, 28, 52
    values = [(label, value, blessed, pushed) for label, raw, blessed, pushed in points
              if (value := number(raw)) is not None]
    limits = [v for v in (number(threshold.get("min")), number(threshold.get("max"))) if v is not None]
    ys = [value for _, value, _, _ in values] + limits
    if not values:
        return ""
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.08 or abs(y_lo) * 0.1 or 1.0
    y_lo, y_hi = y_lo - pad, y_hi + pad
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(index: int) -> float:
        return left + (index + 0.5) / len(values) * plot_w

    def sy(y: float) -> float:
        return top + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(name)} per run" data-metric="{escape(name)}">',
           f'<text x="{left}" y="16" font-weight="600">{escape(name)}</text>',
           f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" />',
           f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" />']
    for tick in ticks(y_lo, y_hi):
        out.append(f'<line class="grid" x1="{left}" y1="{sy(tick):.1f}" x2="{left + plot_w}" y2="{sy(tick):.1f}" />')
        out.append(f'<text x="{left - 6}" y="{sy(tick) + 4:.1f}" text-anchor="end">{escape(tick_label(tick))}</text>')
    for key in ("min", "max"):
        limit = number(threshold.get(key))
        if limit is not None:
            out.append(f'<line class="threshold" x1="{left}" y1="{sy(limit):.1f}" x2="{left + plot_w}" '
                       f'y2="{sy(limit):.1f}" />')
            out.append(f'<text x="{left + plot_w - 4}" y="{sy(limit) - 4:.1f}" text-anchor="end">{key} '
                       f'{escape(tick_label(limit))}</text>')
    out.append('<polyline class="series" stroke-width="2" points="'
               + " ".join(f"{sx(i):.1f},{sy(v):.1f}" for i, (_, v, _, _) in enumerate(values)) + '" />')
    for index, (label, value, blessed, pushed) in enumerate(values):
        x, y = sx(index), sy(value)
        out.append(f'<circle class="run {"blessed" if blessed else "notblessed"}" cx="{x:.1f}" cy="{y:.1f}" r="4">'
                   f'<title>{escape(label)}: {value:.4f}</title></circle>')
        if pushed:
            out.append(f'<circle class="pushed" cx="{x:.1f}" cy="{y:.1f}" r="7" />')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{escape(label[5:10])}</text>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 26}" text-anchor="middle">{escape(label[11:16])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def component_bars(runs: list[tuple[str, list[tuple[str, float]]]]) -> str:
    """A stacked horizontal bar per run (oldest first): each component's seconds, with a legend."""
    row, left, right, top = 18, 110, 60, 8
    width = 720
    longest = max(sum(seconds for _, seconds in parts) for _, parts in runs) or 1.0
    names = [name for name in _COMPONENT_COLORS if any(name == n for _, parts in runs for n, _ in parts)]
    names += sorted({n for _, parts in runs for n, _ in parts} - set(names))
    legend_y = top + row * len(runs) + 16
    height = legend_y + 18 * ((len(names) + 3) // 4) + 6
    scale = (width - left - right) / longest
    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           'aria-label="seconds per component per run">']
    for index, (label, parts) in enumerate(runs):
        y, x = top + index * row, float(left)
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(label.replace("T", " ")[:16])}</text>')
        for name, seconds in parts:
            w = seconds * scale
            out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{max(w, 0.5):.1f}" height="{row - 5}" '
                       f'fill="{_COMPONENT_COLORS.get(name, "#888")}"><title>{escape(name)} {seconds:.1f} s</title></rect>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 12}">{sum(s for _, s in parts):.1f} s</text>')
    for index, name in enumerate(names):
        x, y = left + (index % 4) * 150, legend_y + (index // 4) * 18
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{_COMPONENT_COLORS.get(name, "#888")}" />')
        out.append(f'<text x="{x + 14}" y="{y}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
