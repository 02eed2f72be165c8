"""A self-contained report.html per run, written from the run's summary.

One file a person can open anywhere (a laptop, a CI artifact, an air-gapped cluster): inline CSS,
hand-written SVG charts and no network references at all. Every key of the summary may be missing
or null (a run stopped early with `--to`, or failed), and each section then says what did not run
instead of failing. TensorFlow is never imported here; the statistics are read with the
tensorflow_metadata protos alone (plain protobuf), imported lazily.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable, Iterable
from typing import Any

STATS_FILE = "FeatureStats.pb"  # tfx.components.statistics_gen.executor.DEFAULT_FILE_NAME in TFX 1.16
SPLIT_PREFIX = "Split-"  # tfx.types.artifact_utils.get_split_uri lays splits out as Split-<name>
TOP_VALUES = 5

_SERIES_COLORS = ("#1f6fb4", "#e8710a")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;
padding:24px 32px;color:#1d2330;background:#fafbfc;line-height:1.45}
h1{font-size:1.5em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid #d8dde6;
padding-bottom:4px}h3{font-size:1.02em;margin:18px 0 6px}
.runid{color:#5b6475;font-family:ui-monospace,Menlo,Consolas,monospace}
.banner{padding:12px 16px;border-radius:6px;margin:14px 0;font-weight:600}
.banner ul{margin:6px 0 0;font-weight:400}
.blessed{background:#e3f4e6;border:1px solid #7cc48a;color:#14532d}
.notblessed{background:#fff4e0;border:1px solid #f0b35c;color:#6b3e00}
.failed{background:#fde8e8;border:1px solid #e58a8a;color:#7f1d1d}
.notevaluated{background:#eef1f6;border:1px solid #b8c1d1;color:#2f3a4d}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff;font-size:.92em}
th,td{border:1px solid #d8dde6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.st-ran{color:#14532d}.st-cached{color:#1f4f8f}.st-failed{color:#b91c1c;font-weight:700}
.st-notrun{color:#7a8294}
.bar{background:#1f6fb4;height:10px;border-radius:2px;min-width:1px}
.barcell{width:220px}
.muted{color:#5b6475}.mono{font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.charts{display:flex;flex-wrap:wrap;gap:16px}
svg{background:#fff;border:1px solid #d8dde6;border-radius:4px}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#1d2330}
.anomalies li{color:#7f1d1d}
footer{margin-top:32px;color:#7a8294;font-size:.85em}
"""


def write(summary: dict, path: str) -> str:
    """Write the report atomically, so a reader never sees half a file."""
    from pipeline.files import write_atomic

    return write_atomic(path, render(summary))


def render(summary: dict) -> str:
    """The report's HTML text; each section degrades to a sentence when its data is missing."""
    summary = _as_dict(summary)
    pipeline = summary.get("pipeline") or "pipeline"
    run_id = summary.get("run_id") or "unknown run"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(pipeline)} run {_e(run_id)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f'<h1>{_e(pipeline)} <span class="runid">run {_e(run_id)}</span></h1>',
    ]
    for section in (_banner, _components, _data, _anomalies, _training, _evaluation, _artifacts):
        parts.append(_safe(section, summary))
    parts += ["<footer>Written by tfxd from the run's summary.json.</footer>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- helpers


def _e(value: Any) -> str:
    """HTML-escaped text of any value: summary strings come from specs, data and error messages."""
    return html.escape(str(value), quote=True)


def _as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


def _number(value: Any) -> float | None:
    """A finite float, or None for anything that is not a usable number (None, NaN, text, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _fmt(value: Any) -> str:
    """Numbers as people read them: counts without decimals, metrics with four (escaped text)."""
    if value is None:
        return "&mdash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return _e(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.4g}"
        return f"{value:,.4f}"
    return _e(value)


def _safe(section: Callable[[dict], str], summary: dict) -> str:
    """A section that cannot be drawn says why, and the rest of the report still renders."""
    try:
        return section(summary)
    except Exception as error:  # the report must render whatever the summary holds
        return f'<p class="muted">This section could not be drawn: {_e(type(error).__name__)}: {_e(error)}</p>'


def _table(headers: Iterable[str], rows: Iterable[Iterable[tuple[str, bool | str]]]) -> str:
    """An HTML table; cells are (already-escaped html, True for a number or a CSS class name)."""
    out = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>"]
    for row in rows:
        cells = []
        for content, kind in row:
            css = "num" if kind is True else (kind or "")
            cells.append(f'<td class="{css}">{content}</td>' if css else f"<td>{content}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _component_status(summary: dict) -> dict[str, str]:
    return {str(c.get("name")): str(c.get("status")) for c in _as_list(summary.get("components"))
            if isinstance(c, dict)}


# ---------------------------------------------------------------- banner


def _banner(summary: dict) -> str:
    """Failed beats everything; then blessed / not blessed; a run that never evaluated says so."""
    statuses = _component_status(summary)
    evaluation = _as_dict(summary.get("evaluation"))
    blessed = summary.get("blessed")
    if blessed is None:
        blessed = evaluation.get("blessed")
    reasons = [str(r) for r in _as_list(evaluation.get("reasons"))]
    pushed = summary.get("pushed_to")
    failed = [name for name, status in statuses.items() if status == "failed"]
    evaluated = bool(evaluation) or statuses.get("Evaluator") in ("ran", "cached")
    if failed:
        css, text = "failed", "Run failed in " + ", ".join(_e(n) for n in failed)
    elif blessed is True:
        css, text = "blessed", "Model blessed"
    elif evaluated:
        css, text = "notblessed", "Model not blessed"
    else:
        css, text = "notevaluated", "Not evaluated: the run stopped before Evaluator, so the model was not blessed"
    out = [f'<div class="banner {css}">{text}']
    if css in ("notblessed", "failed") and reasons:
        out.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>")
    out.append("</div>")
    if pushed:
        out.append(f'<p>Pushed to <span class="mono">{_e(pushed)}</span></p>')
    else:
        out.append('<p class="muted">Not pushed.</p>')
    return "\n".join(out)


# ---------------------------------------------------------------- components


def _components(summary: dict) -> str:
    components = [c for c in _as_list(summary.get("components")) if isinstance(c, dict)]
    out = ["<h2>Components</h2>"]
    if not components:
        return out[0] + '\n<p class="muted">No components recorded.</p>'
    longest = max((_number(c.get("seconds")) or 0.0 for c in components), default=0.0)
    rows = []
    for component in components:
        status = str(component.get("status") or "unknown")
        seconds = _number(component.get("seconds"))
        width = 0.0 if not longest or seconds is None else max(0.0, seconds) / longest * 100
        bar = f'<div class="bar" style="width:{width:.1f}%"></div>' if seconds else ""
        css = "st-" + status.replace(" ", "")
        rows.append([
            (_e(component.get("name", "?")), False),
            (f'<span class="{_e(css)}">{_e(status)}</span>', False),
            ("&mdash;" if seconds is None else f"{seconds:.1f}", True),
            (bar, "barcell"),
        ])
    out.append(_table(["component", "status", "seconds", "time"], rows))
    return "\n".join(out)


# ---------------------------------------------------------------- data


def _data(summary: dict) -> str:
    out = ["<h2>Data</h2>"]
    examples = _as_dict(summary.get("examples"))
    splits = _as_dict(examples.get("splits"))
    if splits:
        out.append(_table(["split", "examples"], [[(_e(k), False), (_fmt(v), True)] for k, v in splits.items()]))
    else:
        out.append('<p class="muted">No example counts recorded (ExampleGen did not run).</p>')
    bad = _as_dict(examples.get("bad_records"))
    total = examples.get("bad_records_total")
    if total is None and bad:
        total = sum(v for v in bad.values() if _number(v) is not None)
    if bad or total:
        out.append(f"<p>Bad records skipped: {_fmt(total)}</p>")
        if bad:
            out.append(_table(["reason", "records"], [[(_e(k), False), (_fmt(v), True)] for k, v in bad.items()]))
    elif examples:
        out.append("<p>Bad records skipped: 0</p>")
    out.append(_statistics(_as_dict(summary.get("artifacts")).get("statistics"), list(splits)))
    return "\n".join(out)


def _statistics(folder: Any, split_order: list[str]) -> str:
    """Per split, per feature tables read from StatisticsGen's Split-<name>/FeatureStats.pb."""
    out = ["<h3>Feature statistics</h3>"]
    if not folder:
        out.append('<p class="muted">No statistics artifact recorded (StatisticsGen did not run).</p>')
        return "\n".join(out)
    folder = str(folder)
    try:
        names = _list_dir(folder)
    except Exception as error:
        out.append(f'<p class="muted">Statistics folder <span class="mono">{_e(folder)}</span> '
                   f"could not be read: {_e(error)}</p>")
        return "\n".join(out)
    splits = [n[len(SPLIT_PREFIX):] for n in names if n.startswith(SPLIT_PREFIX)]
    rank = {name: i for i, name in enumerate(split_order)}
    splits.sort(key=lambda s: (rank.get(s, len(rank)), s))
    if not splits:
        out.append(f'<p class="muted">No Split-* folders in <span class="mono">{_e(folder)}</span>.</p>')
    for split in splits:
        path = _join(folder, SPLIT_PREFIX + split, STATS_FILE)
        out.append(f"<h3>Split {_e(split)}</h3>")
        try:
            stats = _load_stats(path)
        except Exception as error:
            out.append(f'<p class="muted">Statistics <span class="mono">{_e(path)}</span> '
                       f"could not be read: {_e(type(error).__name__)}: {_e(error)}</p>")
            continue
        for dataset in stats.datasets:
            out.append(_dataset_tables(dataset))
    return "\n".join(out)


def _is_remote(path: str) -> bool:
    return "://" in path


def _join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts) if _is_remote(parts[0]) else os.path.join(*parts)


def _list_dir(folder: str) -> list[str]:
    if _is_remote(folder):  # gs:// and friends, only when a summary points there
        import tensorflow as tf

        return [n.rstrip("/") for n in tf.io.gfile.listdir(folder)]
    return os.listdir(folder)


def _load_stats(path: str):
    """Parse the plain binary DatasetFeatureStatisticsList, as tfdv.load_stats_binary does."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    if _is_remote(path):
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as handle:
            data = handle.read()
    else:
        with open(path, "rb") as handle:
            data = handle.read()
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    stats.ParseFromString(data)
    return stats


def _dataset_tables(dataset) -> str:
    """A numeric table (min/mean/std/max) and a string table (unique, top values) for one split."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    type_name = statistics_pb2.FeatureNameStatistics.Type.Name
    examples = dataset.num_examples or dataset.weighted_num_examples
    numeric, strings, other = [], [], []
    for feature in dataset.features:
        name = ".".join(feature.path.step) if feature.path.step else feature.name
        kind = feature.WhichOneof("stats")
        common = _common_stats(feature, kind)
        count = common.num_non_missing if common is not None else 0
        missing = common.num_missing if common is not None else 0
        total = examples or (count + missing)
        pct = f"{missing / total * 100:.1f}%" if total else "&mdash;"
        head = [(_e(name), False), (_e(type_name(feature.type)), False), (_fmt(count), True),
                (_fmt(missing), True), (pct, True)]
        if kind == "num_stats":
            s = feature.num_stats
            numeric.append(head + [(_fmt(s.min), True), (_fmt(s.mean), True), (_fmt(s.std_dev), True),
                                   (_fmt(s.max), True), (_fmt(s.num_zeros), True)])
        elif kind == "string_stats":
            s = feature.string_stats
            top = ", ".join(f"{_e(_text(v.value))} ({_fmt(v.frequency)})" for v in s.top_values[:TOP_VALUES])
            strings.append(head + [(_fmt(s.unique), True), (top or "&mdash;", False)])
        else:
            other.append(head + [(_e(kind or "none"), False)])
    out = [f"<p>{_fmt(examples)} examples, {len(dataset.features)} features.</p>"]
    base = ["feature", "type", "count", "missing", "missing %"]
    if numeric:
        out.append(_table(base + ["min", "mean", "std", "max", "zeros"], numeric))
    if strings:
        out.append(_table(base + ["unique", f"top values (up to {TOP_VALUES})"], strings))
    if other:
        out.append(_table(base + ["statistics"], other))
    if not (numeric or strings or other):
        out.append('<p class="muted">No features in this split\'s statistics.</p>')
    return "\n".join(out)


def _common_stats(feature, kind: str | None):
    if kind in ("num_stats", "string_stats"):
        return getattr(feature, kind).common_stats
    if kind == "bytes_stats":
        return feature.bytes_stats.common_stats
    if kind == "struct_stats":
        return feature.struct_stats.common_stats
    return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------- anomalies


def _anomalies(summary: dict) -> str:
    anomalies = summary.get("anomalies")
    out = ["<h2>Anomalies</h2>"]
    if anomalies is None:
        out.append('<p class="muted">Not checked (ExampleValidator did not run or reported nothing).</p>')
    elif not _as_list(anomalies):
        out.append("<p>none</p>")
    else:
        out.append('<ul class="anomalies">' + "".join(f"<li>{_e(a)}</li>" for a in _as_list(anomalies)) + "</ul>")
    return "\n".join(out)


# ---------------------------------------------------------------- training


def _training(summary: dict) -> str:
    out = ["<h2>Training</h2>"]
    plan = _as_dict(summary.get("strategy"))
    if plan:
        line = (f"Strategy: {_e(plan.get('strategy', '?'))} &times;{_e(plan.get('replicas', '?'))} replicas, "
                f"global batch {_e(plan.get('global_batch_size', '?'))}, {_e(plan.get('precision', '?'))}")
        if plan.get("reason"):
            line += f" ({_e(plan['reason'])})"
        out.append(f"<p>{line}</p>")
        extra = {k: v for k, v in plan.items()
                 if k not in ("strategy", "replicas", "global_batch_size", "precision", "reason")}
        if extra:
            out.append(_table(["plan", "value"], [[(_e(k), False), (_e(v), False)] for k, v in extra.items()]))
    training = _as_dict(summary.get("training"))
    if not training:
        out.append('<p class="muted">Training did not run.</p>')
        return "\n".join(out)
    if training.get("epochs") is not None:
        out.append(f"<p>Epochs: {_fmt(training.get('epochs'))}</p>")
    history = [h for h in _as_list(training.get("history")) if isinstance(h, dict)]
    charts = _charts(history)
    if charts:
        out.append('<div class="charts">' + "".join(charts) + "</div>")
    else:
        out.append('<p class="muted">No per-epoch history recorded.</p>')
    metrics = _as_dict(training.get("metrics"))
    if metrics:
        out.append("<h3>Final training metrics</h3>")
        rows = []
        for name, value in metrics.items():
            name = str(name)
            if name.startswith("val_") and name[4:] in metrics:
                continue
            if name.startswith("val_"):
                rows.append([(_e(name[4:]), False), ("&mdash;", True), (_fmt(value), True)])
            else:
                rows.append([(_e(name), False), (_fmt(value), True), (_fmt(metrics.get("val_" + name)), True)])
        out.append(_table(["metric", "train", "validation"], rows))
    return "\n".join(out)


def _charts(history: list[dict]) -> list[str]:
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
                x = _number(entry.get("epoch"))
                y = _number(entry.get(key))
                if y is not None:
                    points.append((x if x is not None else float(i + 1), y))
            if points:
                series.append((key, points))
        if series:
            charts.append(_svg_chart("losses" if base == "loss" else base, series))
    return charts


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
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


def _tick_label(value: float) -> str:
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
           f'aria-label="{_e(title)} per epoch">',
           f'<text x="{left}" y="16" font-weight="600">{_e(title)}</text>']
    # axes
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#5b6475" />')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#5b6475" />')
    for tick in _ticks(y_lo, y_hi):
        y = sy(tick)
        out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e3e7ee" />')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(_tick_label(tick))}</text>')
    x_ticks = [t for t in _ticks(x_lo, x_hi, min(10, max(1, int(x_hi - x_lo)))) if float(t).is_integer()] \
        or _ticks(x_lo, x_hi)
    for tick in x_ticks:
        x = sx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#5b6475" />')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_e(_tick_label(tick))}</text>')
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
        legend.append(f'<text x="{lx + 24}" y="{ly + 4}">{_e(name)}</text>')
    out += legend
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------- evaluation


def _evaluation(summary: dict) -> str:
    out = ["<h2>Evaluation</h2>"]
    evaluation = _as_dict(summary.get("evaluation"))
    slices = [s for s in _as_list(evaluation.get("slices")) if isinstance(s, dict)]
    ran = _component_status(summary).get("Evaluator") in ("ran", "cached")
    if not slices and _as_dict(summary.get("metrics")) and (evaluation or ran):
        slices = [{"slice": "Overall", "metrics": summary["metrics"]}]
    if not evaluation and not slices:
        out.append('<p class="muted">Evaluation did not run.</p>')
        return "\n".join(out)
    if slices:
        columns: list[str] = []
        for entry in slices:
            for name in _as_dict(entry.get("metrics")):
                if str(name) not in columns:
                    columns.append(str(name))
        rows = []
        for entry in slices:
            metrics = {str(k): v for k, v in _as_dict(entry.get("metrics")).items()}
            rows.append([(_e(entry.get("slice", "?")), False)] + [(_fmt(metrics.get(c)), True) for c in columns])
        out.append(_table(["slice"] + columns, rows))
    else:
        out.append('<p class="muted">No metrics recorded.</p>')
    blessed = evaluation.get("blessed", summary.get("blessed"))
    out.append(f"<p>Blessing: {'blessed' if blessed is True else 'not blessed'}</p>")
    reasons = [str(r) for r in _as_list(evaluation.get("reasons"))]
    if reasons:
        out.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>")
    baseline = evaluation.get("baseline")
    if baseline is None:
        out.append('<p class="muted">No baseline model (first blessed model, or no comparison).</p>')
    elif isinstance(baseline, dict):
        out.append("<h3>Baseline</h3>")
        out.append(_table(["key", "value"], [[(_e(k), False), (_fmt(v), not isinstance(v, str))]
                                             for k, v in baseline.items()]))
    else:
        out.append(f'<p>Baseline: <span class="mono">{_e(baseline)}</span></p>')
    return "\n".join(out)


# ---------------------------------------------------------------- artifacts


def _artifacts(summary: dict) -> str:
    artifacts = _as_dict(summary.get("artifacts"))
    if not artifacts:
        return '<h2>Artifacts</h2>\n<p class="muted">No artifacts recorded.</p>'
    rows = [[(_e(k), False), (f'<span class="mono">{_e(v)}</span>', False)] for k, v in artifacts.items()]
    return "<h2>Artifacts</h2>\n" + _table(["artifact", "path"], rows)
