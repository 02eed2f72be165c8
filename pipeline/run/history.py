"""`tfxd history`: a pipeline's runs, newest first, one line each, from what every run leaves in its root.

A run that ended (finished, failed, stopped by a validation gate, skipped for no new data, stopped by a
signal) wrote `<root>/runs/<run id>/summary.json` (pipeline/run/local_run.py); a run killed outright
(SIGKILL, out of memory, a closed laptop) wrote none, and left only its log on this machine
(`<local state>/runs/<run id>/logs/run.log`, tfxd.files.local_state): it reads as interrupted, unless the
root's run lock is held, and then the newest such run is the one running now. Summaries written by an older
tfxd read with the keys they have (LocalRun.from_json)."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import replace
from typing import Any

from tfxd import keys
from tfxd.files import is_uri, join, local_state
from tfxd.pipeline.report import history_page
from tfxd.pipeline.run import lock
from tfxd.run_summary import INTERRUPTED, HistoryLine, LocalRun, worst_column

RUNNING = "running"


def history(root: str, last: int | None = None) -> list[HistoryLine]:
    """The runs under ``root``, newest first (the ``last`` newest)."""
    lines = [line for line, _ in runs(root)]
    return lines[:last] if last else lines


def runs(root: str) -> list[tuple[HistoryLine, LocalRun | None]]:
    """The runs under ``root``, newest first, each with its summary (None: killed outright, or running)."""
    summaries = _summaries(root)
    logged = _logged(root)
    running = lock.holder(root)
    found: list[tuple[HistoryLine, LocalRun | None]] = []
    for run_id in sorted(set(summaries) | set(logged), reverse=True):
        if run_id in summaries:  # a summary cut short still has its folder's name
            summary = LocalRun.from_json(summaries[run_id])
            summary = summary if summary.run_id else replace(summary, run_id=run_id)
            found.append((_line(summary), summary))
        else:  # no summary: killed outright, or the run going on now (the newest one, with the lock held)
            status = RUNNING if running and not found and run_id == max(logged) else INTERRUPTED
            found.append((HistoryLine(run_id=run_id, started=started(run_id), status=status), None))
    return found


def write_page(root: str, pipeline: str, thresholds: dict[str, dict[str, Any]]) -> str:
    """history.html in ``root``, from every run's summary; its path."""
    return history_page.write(join(root, keys.HISTORY_PAGE), pipeline, runs(root), thresholds)


def started(run_id: str) -> str:
    """When the run started, from its id (outcome.new_run_id: local time to the microsecond)."""
    try:
        when = datetime.datetime.strptime(run_id, "%Y%m%d-%H%M%S-%f")
    except ValueError:
        return ""
    return when.astimezone().isoformat(timespec="seconds")


def _summaries(root: str) -> dict[str, Any]:
    """Every summary.json under ``root``'s runs/ (a bucket's too), by run id; an unreadable one as empty."""
    folder = join(root, "runs")
    found: dict[str, Any] = {}
    if is_uri(root):
        from tfx.dsl.io import fileio  # start-up: TFX's file systems load only for a bucket root

        names = [name.rstrip("/") for name in fileio.listdir(folder)] if fileio.exists(folder) else []
        for name in names:
            path = join(folder, name, "summary.json")
            if fileio.exists(path):
                with fileio.open(path, "r") as handle:
                    found[name] = _json(handle.read())
        return found
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name, "summary.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                found[name] = _json(handle.read())
    return found


def _logged(root: str) -> list[str]:
    """The runs of ``root`` this machine logged (every run, killed ones too: its log is written first)."""
    runs = os.path.join(local_state(root), "runs")
    return [name for name in (os.listdir(runs) if os.path.isdir(runs) else [])
            if os.path.isfile(os.path.join(runs, name, "logs", "run.log"))]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _line(summary: LocalRun) -> HistoryLine:
    splits = summary.examples.get("splits")
    plan = summary.strategy or {}
    seconds = summary.seconds
    if seconds is None and summary.components:  # an older tfxd's summary: its components' time
        seconds = round(sum(float(c.get("seconds") or 0) for c in summary.components), 1)
    return HistoryLine(
        run_id=summary.run_id, started=started(summary.run_id), status=summary.status or "unknown",
        reason=summary.reason, spans=list(summary.examples.get("spans") or []),
        examples={str(k): int(v) for k, v in splits.items()} if isinstance(splits, dict) else {},
        strategy=plan.get("strategy"), replicas=plan.get("replicas"),
        metrics={k: v for k, v in summary.metrics.items() if isinstance(v, (int, float))},
        blessed=summary.blessed if summary.evaluation else None, pushed=summary.pushed_to, drift=_verdict(summary.drift, summary, "drift"),
        skew=_verdict(summary.skew, summary, "skew"), seconds=seconds)


def _verdict(gate: dict[str, Any] | None, summary: LocalRun, name: str) -> dict[str, Any] | None:
    """A gate's verdict in short: stopped (it stopped the run), beyond (past a threshold, warned), within or
    nothing to compare; the worst column (run_summary.worst_column), its distance and threshold."""
    if not gate:
        return None
    columns = gate.get("columns") or {}
    verdict = ("stopped" if summary.stopped_by == name else "beyond" if gate.get("beyond")
               else "within" if columns else "nothing to compare")
    short: dict[str, Any] = {"verdict": verdict}
    if "span" in gate:
        short.update(span=gate.get("span"), previous_span=gate.get("previous_span"))
    worst = worst_column(gate)
    if worst is not None:
        column, value = worst
        short.update(feature=column, distance=value.get("distance"), threshold=value.get("threshold"))
    return short
