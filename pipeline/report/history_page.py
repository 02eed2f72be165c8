"""history.html in a pipeline's root: every run of `tfxd run` on one page, rewritten after each run and
linked from each report.html. What a scheduled pipeline's users ask each week, answered with charts:
how each metric moved (its threshold drawn, the blessed and pushed runs marked), the drift distance per
span and feature (a heat map, the cell that stopped a run named), the examples per span, the seconds
per component per run, and the serving model's lineage (span -> examples -> transform graph -> model ->
evaluation -> push). One self-contained file like report.html: inline CSS and SVG, no script, nothing
fetched; light and dark (the reader's colour scheme)."""

from __future__ import annotations

from typing import Any

from tfxd.files import write_atomic
from tfxd.pipeline.report.history_charts import component_bars, metric_chart
from tfxd.pipeline.report.markup import as_dict, escape, fmt, number, table
from tfxd.pipeline.report.terminal import verdict_text
from tfxd.run_summary import HistoryLine, LocalRun, worst_column

_CSS = """
:root{color-scheme:light dark;--fg:#1d2330;--bg:#fafbfc;--panel:#fff;--line:#d8dde6;--muted:#5b6475;
--head:#eef1f6;--ok:#14532d;--bad:#b91c1c;--accent:#1f6fb4;--grid:#e3e7ee}
@media (prefers-color-scheme:dark){:root{--fg:#e4e8ef;--bg:#14171c;--panel:#1c2027;--line:#3a414d;
--muted:#9aa3b2;--head:#262b34;--ok:#7cd992;--bad:#f28b8b;--accent:#6cb0f0;--grid:#2c323c}}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;
padding:24px 32px;color:var(--fg);background:var(--bg);line-height:1.45}
h1{font-size:1.5em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 12px;background:var(--panel);font-size:.9em}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--head)}td.num{text-align:right;font-variant-numeric:tabular-nums}
.st-ok{color:var(--ok)}.st-failed,.st-stopped,.st-interrupted{color:var(--bad);font-weight:700}
.muted{color:var(--muted)}.mono{font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.charts{display:flex;flex-wrap:wrap;gap:16px}
svg{background:var(--panel);border:1px solid var(--line);border-radius:4px}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:var(--fg)}
svg .axis{stroke:var(--muted)}svg .grid{stroke:var(--grid)}svg .series{stroke:var(--accent);fill:none}
svg .threshold{stroke:var(--bad);stroke-dasharray:5 3}
svg .blessed{fill:var(--ok)}svg .notblessed{fill:var(--panel);stroke:var(--bad);stroke-width:1.5}
svg .pushed{fill:none;stroke:var(--ok);stroke-width:1.5}
.heat td.cell{text-align:right;font-variant-numeric:tabular-nums;min-width:4.5em}
.heat td.stopped{outline:2px solid var(--bad);font-weight:700}
.bar{background:var(--accent);height:10px;border-radius:2px;min-width:1px}
.lineage{display:flex;flex-wrap:wrap;align-items:stretch;gap:6px}
.lineage .step{border:1px solid var(--line);background:var(--panel);border-radius:6px;padding:6px 10px;
max-width:260px}.lineage .arrow{align-self:center;color:var(--muted)}
footer{margin-top:32px;color:var(--muted);font-size:.85em}
"""


def write(path: str, pipeline: str, runs: list[tuple[HistoryLine, LocalRun | None]],
          thresholds: dict[str, dict[str, Any]], reports: bool = True) -> str:
    """Write the page atomically (a reader never sees half of it); its path."""
    return write_atomic(path, render(pipeline, runs, thresholds, reports))


def render(pipeline: str, runs: list[tuple[HistoryLine, LocalRun | None]],
           thresholds: dict[str, dict[str, Any]], reports: bool = True) -> str:
    """The page's HTML; ``runs`` newest first, each line with its summary (None: a run killed outright);
    ``thresholds``: evaluation.thresholds of the spec ({metric: {min, max, max_drop}}); ``reports``: each
    run has its report.html beside the page (runs/<run id>/, a local run's), which its line links to."""
    oldest_first = list(reversed(runs))
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(pipeline)}: history</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
             f"<h1>{escape(pipeline)}: every run</h1>",
             f'<p class="muted">{len(runs)} run{"s" if len(runs) != 1 else ""}, newest first'
             + ("; each run's own page is its report.html.</p>" if reports else ", from the records its tasks left "
                "in the pipeline root.</p>"),
             _runs_table(runs, reports), _metrics(oldest_first, thresholds), _drift(oldest_first), _examples(oldest_first),
             _seconds(oldest_first), _lineage(runs, reports),
             "<footer>Written by tfxd from each run's summary.json, after every run.</footer>" if reports else
             "<footer>Written by tfxd history from each run's task records.</footer>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _run_link(line: HistoryLine, text: str, reports: bool) -> str:
    return f'<a href="runs/{escape(line.run_id)}/report.html">{text}</a>' if reports else text


def _runs_table(runs: list[tuple[HistoryLine, LocalRun | None]], reports: bool) -> str:
    rows: list[list[tuple[str, bool | str]]] = []
    for line, _ in runs:
        gates = [f"{name} {escape(verdict_text(verdict))}" for name, verdict in (("drift", line.drift),
                                                                                  ("skew", line.skew)) if verdict]
        rows.append([
            (_run_link(line, escape(line.started.replace("T", " ")[:16]), reports), ""),
            (escape(line.status) + (f'<br><span class="muted">{escape(line.reason)}</span>' if line.reason else ""),
             f"st-{line.status.replace(' ', '')}"),
            (escape(", ".join(map(str, line.spans))), ""),
            (escape(", ".join(f"{split} {count}" for split, count in line.examples.items())), ""),
            (escape(f"{line.strategy} x{line.replicas}" if line.strategy else ""), ""),
            ("<br>".join(f"{escape(name)} {fmt(value)}" for name, value in line.metrics.items()), ""),
            (fmt(line.blessed), ""),
            (escape(line.pushed_version), ""),
            ("<br>".join(gates), ""), (f"{line.seconds:.1f}" if line.seconds is not None else "", True)])
    return "<h2>Runs</h2>" + table(["started", "status", "spans", "examples", "strategy", "metrics", "blessed",
                                    "pushed", "gates", "seconds"], rows)


def _metrics(runs: list[tuple[HistoryLine, LocalRun | None]], thresholds: dict[str, dict[str, Any]]) -> str:
    """A chart per metric of the evaluation's overall slice: one point per run that was evaluated."""
    evaluated = [line for line, _ in runs if line.metrics]
    names = sorted({name for line in evaluated for name in line.metrics if name != "example_count"})
    if not names:
        return "<h2>Metrics per run</h2><p>No run was evaluated yet.</p>"
    charts = [metric_chart(name, [(line.started, line.metrics.get(name), line.blessed, bool(line.pushed))
                                  for line in evaluated], as_dict(thresholds.get(name)))
              for name in names]
    return ("<h2>Metrics per run</h2><p class=\"muted\">Filled: blessed; hollow: not blessed; ringed: pushed; "
            "dashed: the spec's threshold.</p>" f'<div class="charts">{"".join(charts)}</div>')


def _drift(runs: list[tuple[HistoryLine, LocalRun | None]]) -> str:
    """validation.drift's distance per span (the span each run judged) and feature, coloured by its share
    of the feature's threshold; the cell that stopped a run outlined and named."""
    cells: dict[str, dict[str, tuple[dict[str, Any], bool]]] = {}  # span -> feature -> (value, stopped the run)
    for _, summary in runs:
        record = as_dict(summary.drift) if summary else {}
        if not record.get("columns") or record.get("span") is None:
            continue
        stopped = summary is not None and summary.stopped_by == "drift"
        for feature, value in as_dict(record["columns"]).items():
            cells.setdefault(str(record["span"]), {})[feature] = (as_dict(value), stopped and feature in as_dict(
                record.get("beyond")))
    if not cells:
        return "<h2>Drift per span</h2><p>No span was compared with the one before it yet (validation.drift).</p>"
    spans = sorted(cells)
    features = sorted({feature for by_feature in cells.values() for feature in by_feature})
    rows = []
    for feature in features:
        row = [(escape(feature), "")]
        for span in spans:
            value, stopped = cells[span].get(feature, ({}, False))
            row.append(_heat_cell(feature, value, stopped))
        rows.append(row)
    return ("<h2>Drift per span</h2><p class=\"muted\">Each span against the one before it; the colour is the "
            "distance's share of the feature's threshold; an outlined cell stopped its run.</p>"
            + table(["feature", *spans], rows).replace("<table>", '<table class="heat">', 1))


def _heat_cell(feature: str, value: dict[str, Any], stopped: bool) -> tuple[str, str]:
    distance, threshold = number(value.get("distance")), number(value.get("threshold"))
    if distance is None:
        return "", ""
    share = min(distance / threshold, 1.0) if threshold else 1.0
    hue = 120 - 120 * share  # green within, red at the threshold and past it
    said = f"{distance:.4f}" + (f" &gt; {threshold:g}: stopped by {escape(feature)}" if stopped else "")
    background = f"hsl({hue:.0f} 70% 50% / {0.15 + 0.35 * share:.2f})"
    return (f'<span style="display:block;background:{background}">{said}</span>',
            "cell stopped" if stopped else "cell")


def _examples(runs: list[tuple[HistoryLine, LocalRun | None]]) -> str:
    """Examples read per span (the newest run that read each span), as bars."""
    per_span: dict[str, int] = {}
    for line, _ in runs:
        if line.spans and line.examples:
            per_span[", ".join(map(str, line.spans))] = sum(line.examples.values())
    if not per_span:
        return "<h2>Examples per span</h2><p>No run read spans yet (data.path without a date pattern reads all).</p>"
    most = max(per_span.values()) or 1
    rows: list[list[tuple[str, bool | str]]] = [[(escape(span), ""), (fmt(count), True),
             (f'<div class="bar" style="width:{220 * count / most:.0f}px"></div>', "")]
            for span, count in sorted(per_span.items())]
    return "<h2>Examples per span</h2>" + table(["spans", "examples", ""], rows)


def _seconds(runs: list[tuple[HistoryLine, LocalRun | None]]) -> str:
    timed = [(line.started, [(str(c.get("name")), number(c.get("seconds")) or 0.0) for c in summary.components])
             for line, summary in runs if summary is not None and summary.components]
    if not timed:
        return ""
    return "<h2>Seconds per component per run</h2>" + component_bars(timed)


def _lineage(runs: list[tuple[HistoryLine, LocalRun | None]], reports: bool) -> str:
    """The serving model's lineage: the newest run that pushed, from the spans it read to the push."""
    pushed = next(((line, summary) for line, summary in runs if line.pushed and summary is not None), None)
    if pushed is None:
        return "<h2>The serving model</h2><p>No run has pushed a model yet.</p>"
    line, summary = pushed
    assert summary is not None
    artifacts = summary.artifacts
    worst = worst_column(summary.drift or {})
    steps = [("spans", ", ".join(map(str, line.spans)) or "every file of data.path"),
             ("examples", artifacts.get("examples")), ("transform graph", artifacts.get("transform_graph")),
             ("model", artifacts.get("model")), ("evaluation", artifacts.get("evaluation")),
             ("push", line.pushed)]
    boxes = [f'<div class="step"><b>{escape(name)}</b><br><span class="mono">{escape(where or "")}</span></div>'
             for name, where in steps]
    note = f" (its drift: {escape(worst[0])} {worst[1]['distance']:.4f})" if worst else ""
    return (f"<h2>The serving model</h2><p>Pushed by run {_run_link(line, escape(line.run_id), reports)}{note}.</p>"
            + '<div class="lineage">'
            + '<span class="arrow">&rarr;</span>'.join(boxes) + "</div>")
