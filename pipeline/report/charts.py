"""The training curves of report.html: a line chart per metric, train and validation per epoch, drawn
as inline SVG by hand (no script, no network)."""

from __future__ import annotations

import math

from tfxd.pipeline.report.markup import escape, number

_SERIES_COLORS = ("#1f6fb4", "#e8710a")


def epoch_charts(history: list[dict]) -> list[str]:
    """One chart for loss/val_loss, then one per other metric with its train and val_ series."""
    keys: list[str] = []
    for entry in history:
        for key in entry:
            key = str(key)
            if key not in ("epoch", "seconds", "train_seconds") and key not in keys:
                keys.append(key)
    bases: list[str] = []
    for key in keys:
        base = key[4:] if key.startswith("val_") else key
        if base not in bases:
            bases.append(base)
    if "loss" in bases:
        bases.remove("loss")
        bases.insert(0, "loss")
    charts = []
    for base in bases:
        series = []
        for key in (base, "val_" + base):
            points = []
            for i, entry in enumerate(history):
                x = number(entry.get("epoch"))
                y = number(entry.get(key))
                if y is not None:
                    points.append((x if x is not None else float(i + 1), y))
            if points:
                series.append((key, points))
        if series:
            charts.append(_svg_chart("losses" if base == "loss" else base, series))
    return charts


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:.4g}"


def _svg_chart(title: str, series: list[tuple[str, list[tuple[float, float]]]]) -> str:
    """A line chart as inline SVG (no xmlns: HTML5 does not need it, and it would be a URL)."""
    width, height = 460, 260
    left, right, top, bottom = 58, 16, 28, 40
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    x_pad = (x_hi - x_lo) * 0.03
    if y_hi == y_lo:
        pad = abs(y_lo) * 0.1 or 1.0
        y_lo, y_hi = y_lo - pad, y_hi + pad
    else:
        pad = (y_hi - y_lo) * 0.05
        y_lo, y_hi = y_lo - pad, y_hi + pad
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x_lo + x_pad) / (x_hi - x_lo + 2 * x_pad) * plot_w

    def sy(y: float) -> float:
        return top + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(title)} per epoch">',
           f'<text x="{left}" y="16" font-weight="600">{escape(title)}</text>']
    # axes
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#5b6475" />')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#5b6475" />')
    for tick in ticks(y_lo, y_hi):
        y = sy(tick)
        out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e3e7ee" />')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(tick_label(tick))}</text>')
    x_ticks = [t for t in ticks(x_lo, x_hi, min(10, max(1, int(x_hi - x_lo)))) if float(t).is_integer()] \
        or ticks(x_lo, x_hi)
    for tick in x_ticks:
        x = sx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#5b6475" />')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{escape(tick_label(tick))}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">epoch</text>')
    # series, then the legend on a white box above them
    legend = [f'<rect x="{left + plot_w - 156}" y="{top}" width="154" height="{8 + 16 * len(series)}" '
              'fill="#ffffff" fill-opacity="0.85" stroke="#d8dde6" />']
    for i, (name, points) in enumerate(series):
        color = _SERIES_COLORS[i % len(_SERIES_COLORS)]
        dash = ' stroke-dasharray="5 3"' if name.startswith("val_") else ""
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"{dash} />')
        for x, y in points:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}" />')
        lx, ly = left + plot_w - 150, top + 10 + i * 16
        legend.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{color}" stroke-width="2"{dash} />')
        legend.append(f'<text x="{lx + 24}" y="{ly + 4}">{escape(name)}</text>')
    out += legend
    out.append("</svg>")
    return "\n".join(out)
