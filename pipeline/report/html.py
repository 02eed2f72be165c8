"""A self-contained report.html per run, written from the run's summary (tfxd.run_summary.LocalRun).

One file a person can open anywhere (a laptop, a CI artifact, an air-gapped cluster): inline CSS,
hand-written SVG charts and no network references at all. Any part of the summary may be empty (a
run stopped early with `--to`, or failed; LocalRun.from_json reads a summary.json that is short or
odd as empty parts), and each section then says what did not run instead of failing. TensorFlow is never imported here; the statistics are read with the
tensorflow_metadata protos alone (plain protobuf), imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable

from tfxd.files import write_atomic
from tfxd.keys import HISTORY_PAGE
from tfxd.pipeline.report import charts, statistics
from tfxd.pipeline.report.markup import as_dict, as_list, escape, fmt, number, table
from tfxd.run_summary import SKIPPED, STOPPED, LocalRun

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


def write(summary: LocalRun, path: str) -> str:
    """Write the report atomically, so a reader never sees half a file."""
    return write_atomic(path, render(summary))


def render(summary: LocalRun) -> str:
    """The report's HTML text; each section degrades to a sentence when its data is missing."""
    pipeline = summary.pipeline or "pipeline"
    run_id = summary.run_id or "unknown run"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(pipeline)} run {escape(run_id)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f'<h1>{escape(pipeline)} <span class="runid">run {escape(run_id)}</span></h1>',
    ]
    for section in (_banner, _components, _data, _anomalies, _training, _evaluation, _artifacts):
        parts.append(_safe(section, summary))
    parts += [f'<p><a href="../../{HISTORY_PAGE}">Every run of this pipeline</a> ({HISTORY_PAGE} in its root)</p>',
              "<footer>Written by tfxd from the run's summary.json.</footer>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- helpers


def _safe(section: Callable[[LocalRun], str], summary: LocalRun) -> str:
    """A section that cannot be drawn says why, and the rest of the report still renders."""
    try:
        return section(summary)
    except Exception as error:  # the report must render whatever the summary holds
        return f'<p class="muted">This section could not be drawn: {escape(type(error).__name__)}: {escape(error)}</p>'


def _component_status(summary: LocalRun) -> dict[str, str]:
    return {str(c.get("name")): str(c.get("status")) for c in summary.components}


# ---------------------------------------------------------------- banner


def _banner(summary: LocalRun) -> str:
    """Stopped by a gate or failed beats everything; then blessed / not blessed; a run that never evaluated says so."""
    statuses = _component_status(summary)
    evaluation = summary.evaluation
    blessed = summary.blessed
    if blessed is None:
        blessed = evaluation.get("blessed")
    reasons = [str(r) for r in as_list(evaluation.get("reasons"))]
    pushed = summary.pushed_to
    failed = [name for name, status in statuses.items() if status == "failed"]
    evaluated = bool(evaluation) or statuses.get("Evaluator") in ("ran", "cached")
    if summary.status == STOPPED:
        css, text = "failed", f"Stopped by the {escape(summary.stopped_by or '')} gate: " + escape(summary.reason or "")
    elif failed:
        css, text = "failed", "Run failed in " + ", ".join(escape(n) for n in failed)
    elif summary.status == SKIPPED:
        css, text = "notevaluated", "Skipped: " + escape(summary.reason or "nothing to do")
    elif blessed is True:
        css, text = "blessed", "Model blessed"
    elif evaluated:
        css, text = "notblessed", "Model not blessed"
    else:
        css, text = "notevaluated", "Not evaluated: the run stopped before Evaluator, so the model was not blessed"
    out = [f'<div class="banner {css}">{text}']
    if css in ("notblessed", "failed") and reasons:
        out.append("<ul>" + "".join(f"<li>{escape(r)}</li>" for r in reasons) + "</ul>")
    out.append("</div>")
    if pushed:
        out.append(f'<p>Pushed to <span class="mono">{escape(pushed)}</span></p>')
    else:
        out.append('<p class="muted">Not pushed.</p>')
    return "\n".join(out)


# ---------------------------------------------------------------- components


def _components(summary: LocalRun) -> str:
    components = summary.components
    out = ["<h2>Components</h2>"]
    if not components:
        return out[0] + '\n<p class="muted">No components recorded.</p>'
    longest = max((number(c.get("seconds")) or 0.0 for c in components), default=0.0)
    rows: list[list[tuple[str, bool | str]]] = []
    for component in components:
        status = str(component.get("status") or "unknown")
        seconds = number(component.get("seconds"))
        width = 0.0 if not longest or seconds is None else max(0.0, seconds) / longest * 100
        bar = f'<div class="bar" style="width:{width:.1f}%"></div>' if seconds else ""
        css = "st-" + status.replace(" ", "")
        rows.append([
            (escape(component.get("name", "?")), False),
            (f'<span class="{escape(css)}">{escape(status)}</span>', False),
            ("&mdash;" if seconds is None else f"{seconds:.1f}", True),
            (bar, "barcell"),
        ])
    out.append(table(["component", "status", "seconds", "time"], rows))
    return "\n".join(out)


# ---------------------------------------------------------------- data


def _data(summary: LocalRun) -> str:
    out = ["<h2>Data</h2>"]
    examples = summary.examples
    splits = as_dict(examples.get("splits"))
    spans = as_list(examples.get("spans"))
    if spans:
        day = as_dict(examples.get("span_day"))
        why = f" ({escape(str(day.get('why')))})" if day.get("why") else ""
        out.append(f"<p>Span{'s' if len(spans) > 1 else ''} read: "
                   f"<span class=\"mono\">{escape(', '.join(map(str, spans)))}</span>{why}</p>")
    if splits:
        out.append(table(["split", "examples"], [[(escape(k), False), (fmt(v), True)] for k, v in splits.items()]))
    else:
        out.append('<p class="muted">No example counts recorded (ExampleGen did not run'
                   + (', or found no new data).</p>' if summary.status == SKIPPED else ').</p>'))
    bad = as_dict(examples.get("bad_records"))
    total = examples.get("bad_records_total")
    if total is None and bad:
        total = sum(v for v in bad.values() if number(v) is not None)
    if bad or total:
        out.append(f"<p>Bad records skipped: {fmt(total)}</p>")
        if bad:
            out.append(table(["reason", "records"], [[(escape(k), False), (fmt(v), True)] for k, v in bad.items()]))
    elif examples:
        out.append("<p>Bad records skipped: 0</p>")
    out.append(_drift(summary.drift or {}))
    out.append(_skew(summary.skew or {}))
    out.append(statistics.section(summary.artifacts.get("statistics"), list(splits)))
    return "\n".join(out)


def _drift(drift: dict) -> str:
    """validation.drift's distances per column against the previous span."""
    if not drift:
        return ""
    if not as_dict(drift.get("columns")):
        return f"<p>Drift: no earlier span than {escape(str(drift.get('span')))} to compare with yet.</p>"
    return (f"<p>Drift from span {escape(str(drift.get('previous_span')))} to span {escape(str(drift.get('span')))}:"
            "</p>" + _distances(drift))


def _skew(skew: dict) -> str:
    """validation.skew's distances per column, the train split against the eval split."""
    if not skew:
        return ""
    return "<p>Skew between the train and eval splits:</p>" + _distances(skew)


def _distances(gate: dict) -> str:
    columns = as_dict(gate.get("columns"))
    if not columns:
        return '<p class="muted">No column the pipeline reads to compare.</p>'
    beyond = as_dict(gate.get("beyond"))  # the gate's own verdict, as it stopped the run or not
    rows = [[(escape(name), False), (escape(str(value.get("measure"))), False), (fmt(value.get("distance")), True),
             (fmt(value.get("threshold")), True), ("beyond" if name in beyond else "ok", False)]
            for name, value in sorted(columns.items())]
    return table(["column", "measure", "distance", "threshold", ""], rows)


# ---------------------------------------------------------------- anomalies


def _anomalies(summary: LocalRun) -> str:
    anomalies = summary.anomalies
    out = ["<h2>Anomalies</h2>"]
    if anomalies is None:
        out.append('<p class="muted">Not checked (ExampleValidator did not run or reported nothing).</p>')
    elif not anomalies:
        out.append("<p>none</p>")
    else:
        out.append('<ul class="anomalies">' + "".join(f"<li>{escape(a)}</li>" for a in anomalies) + "</ul>")
    return "\n".join(out)


# ---------------------------------------------------------------- training


def _warm_start(warm: dict) -> str:
    """training.warm_start: where the weights came from, or why the model trained from scratch."""
    if not warm:
        return ""
    if warm.get("started"):
        return f'<p>Warm-started from <span class="mono">{escape(warm.get("from"))}</span>.</p>'
    source = f' from <span class="mono">{escape(warm.get("from"))}</span>' if warm.get("from") else ""
    return f"<p>Not warm-started{source}: {escape(warm.get('reason'))}; trained from scratch.</p>"


def _training(summary: LocalRun) -> str:
    out = ["<h2>Training</h2>"]
    plan = summary.strategy or {}
    if plan:
        line = (f"Strategy: {escape(plan.get('strategy', '?'))} &times;{escape(plan.get('replicas', '?'))} replicas, "
                f"global batch {escape(plan.get('global_batch_size', '?'))}, {escape(plan.get('precision', '?'))}")
        if plan.get("reason"):
            line += f" ({escape(plan['reason'])})"
        out.append(f"<p>{line}</p>")
        extra = {k: v for k, v in plan.items()
                 if k not in ("strategy", "replicas", "global_batch_size", "precision", "reason")}
        if extra:
            out.append(table(["plan", "value"], [[(escape(k), False), (escape(v), False)] for k, v in extra.items()]))
    training = summary.training
    if not training:
        out.append('<p class="muted">Training did not run.</p>')
        return "\n".join(out)
    if training.get("epochs") is not None:
        out.append(f"<p>Epochs: {fmt(training.get('epochs'))}</p>")
    out.append(_warm_start(as_dict(training.get("warm_start"))))
    history = [h for h in as_list(training.get("history")) if isinstance(h, dict)]
    drawn = charts.epoch_charts(history)
    if drawn:
        out.append('<div class="charts">' + "".join(drawn) + "</div>")
    else:
        out.append('<p class="muted">No per-epoch history recorded.</p>')
    metrics = as_dict(training.get("metrics"))
    if metrics:
        out.append("<h3>Final training metrics</h3>")
        rows = []
        for name, value in metrics.items():
            name = str(name)
            if name.startswith("val_") and name[4:] in metrics:
                continue
            if name.startswith("val_"):
                rows.append([(escape(name[4:]), False), ("&mdash;", True), (fmt(value), True)])
            else:
                rows.append([(escape(name), False), (fmt(value), True), (fmt(metrics.get("val_" + name)), True)])
        out.append(table(["metric", "train", "validation"], rows))
    return "\n".join(out)


# ---------------------------------------------------------------- evaluation


def _evaluation(summary: LocalRun) -> str:
    out = ["<h2>Evaluation</h2>"]
    evaluation = summary.evaluation
    slices = [s for s in as_list(evaluation.get("slices")) if isinstance(s, dict)]
    ran = _component_status(summary).get("Evaluator") in ("ran", "cached")
    if not slices and summary.metrics and (evaluation or ran):
        slices = [{"slice": "Overall", "metrics": summary.metrics}]
    if not evaluation and not slices:
        out.append('<p class="muted">Evaluation did not run.</p>')
        return "\n".join(out)
    if slices:
        columns: list[str] = []
        for entry in slices:
            for name in as_dict(entry.get("metrics")):
                if str(name) not in columns:
                    columns.append(str(name))
        rows = []
        for entry in slices:
            metrics = {str(k): v for k, v in as_dict(entry.get("metrics")).items()}
            rows.append([(escape(entry.get("slice", "?")), False)] + [(fmt(metrics.get(c)), True) for c in columns])
        out.append(table(["slice"] + columns, rows))
    else:
        out.append('<p class="muted">No metrics recorded.</p>')
    blessed = evaluation.get("blessed", summary.blessed)
    out.append(f"<p>Blessing: {'blessed' if blessed is True else 'not blessed'}</p>")
    reasons = [str(r) for r in as_list(evaluation.get("reasons"))]
    if reasons:
        out.append("<ul>" + "".join(f"<li>{escape(r)}</li>" for r in reasons) + "</ul>")
    baseline = evaluation.get("baseline")
    if baseline is None:
        out.append('<p class="muted">No baseline model (first blessed model, or no comparison).</p>')
    elif isinstance(baseline, dict):
        out.append("<h3>Baseline</h3>")
        out.append(table(["key", "value"], [[(escape(k), False), (fmt(v), not isinstance(v, str))]
                                             for k, v in baseline.items()]))
    else:
        out.append(f'<p>Baseline: <span class="mono">{escape(baseline)}</span></p>')
    return "\n".join(out)


# ---------------------------------------------------------------- artifacts


def _artifacts(summary: LocalRun) -> str:
    artifacts = summary.artifacts
    if not artifacts:
        return '<h2>Artifacts</h2>\n<p class="muted">No artifacts recorded.</p>'
    rows = [[(escape(k), False), (f'<span class="mono">{escape(v)}</span>', False)] for k, v in artifacts.items()]
    return "<h2>Artifacts</h2>\n" + table(["artifact", "path"], rows)
