"""`tfxd history`: a pipeline's runs, newest first, one line each, from what every run leaves in its root.

A run that ended (finished, failed, stopped by a validation gate, skipped for no new data, stopped by a
signal) wrote `<root>/runs/<run id>/summary.json` (pipeline/run/local_run.py); a run killed outright
(SIGKILL, out of memory, a closed laptop) wrote none, and left only its log on this machine
(`<local state>/runs/<run id>/logs/run.log`, tfxd.files.local_state): it reads as interrupted, unless the
root's run lock is held, and then the newest such run is the one running now. Summaries written by an older
tfxd read with the keys they have (LocalRun.from_json). A pipeline compiled for Kubeflow Pipelines or Vertex
AI is read from its tasks' records in its pipeline root instead (cluster_history.py)."""

from __future__ import annotations

import datetime
import json
import os
import posixpath
from dataclasses import replace
from typing import Any

from tfxd import keys
from tfxd.files import file_reader, join, local_state
from tfxd.pipeline.report import history_page
from tfxd.pipeline.run import cluster_history, lock
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement
from tfxd.run_summary import INTERRUPTED, RUNNING, HistoryLine, LocalRun, started
from tfxd.task_record import run_folder


def runs_of(loaded: LoadedSpec, target: str, root: str | None = None) -> tuple[str, list[tuple[HistoryLine, LocalRun | None]]]:
    """Where ``loaded``'s runs on ``target`` are read from (``root``, else the spec's root locally and the
    pipeline root on a cluster), and the runs there, newest first."""
    placement = Placement(loaded, target)
    if placement.on_cluster:
        where = root or placement.pipeline_root()  # the push destination is read with the pipeline's own root
        return where, cluster_history.runs(where, loaded.spec.name, None if root else placement.push_to())
    where = root or loaded.resolve(loaded.spec.root or "")
    return where, runs(where, loaded.spec.name)


def runs(root: str, pipeline: str | None = None) -> list[tuple[HistoryLine, LocalRun | None]]:
    """The runs under ``root``, newest first, each with its summary (None: killed outright, or running); a
    run killed outright says what ML Metadata saw of ``pipeline``'s tasks in it, where there is a store."""
    summaries = _summaries(root)
    logged = _logged(root)
    running = lock.holder(root)
    found: list[tuple[HistoryLine, LocalRun | None]] = []
    newer: str | None = None
    for run_id in sorted(set(summaries) | set(logged), reverse=True):
        if run_id in summaries:  # a summary cut short still has its folder's name
            summary = LocalRun.from_json(summaries[run_id])
            summary = summary if summary.run_id else replace(summary, run_id=run_id)
            found.append((HistoryLine.of(summary), summary))
        elif running and not found and run_id == max(logged):  # the run going on now: the lock is held
            found.append((HistoryLine(run_id=run_id, started=started(run_id), status=RUNNING), None))
        else:  # no summary: killed outright
            line = HistoryLine(run_id=run_id, started=started(run_id), status=INTERRUPTED)
            found.append((_killed(line, root, pipeline, newer) if pipeline else line, None))
        newer = run_id
    return found


def _killed(line: HistoryLine, root: str, pipeline: str, newer: str | None) -> HistoryLine:
    """A run killed outright, as ML Metadata saw its tasks (those it began between its start and the next
    run's): which had finished, the one the kill stopped, the spans and examples read, how long it went."""
    # start-up: ML Metadata (and TFX's artifact types) load only for a run killed outright
    from tfxd.pipeline.run.metadata import metadata_path
    from tfxd.pipeline.run.records import RunRecords, examples_report

    if not os.path.isfile(metadata_path(root)) or _moment(line.run_id) is None:
        return line

    records = RunRecords(root, pipeline, _moment(line.run_id) or 0.0, _moment(newer) if newer else None)
    executions = records.executions()
    if not executions:
        return replace(line, reason="killed outright before any task began (ML Metadata)")
    finished = [node for node, state, _, _ in executions if state in ("COMPLETE", "CACHED")]
    stopped = [node for node, state, _, _ in executions if state in ("RUNNING", "CANCELED", "FAILED")]
    reason = (f"killed outright while {', '.join(stopped)} ran" if stopped else "killed outright between tasks") + (
        f"; {', '.join(finished)} had finished (ML Metadata)" if finished else " (ML Metadata)")
    report = examples_report(records)
    splits = report.get("splits") or {}
    return replace(line, reason=reason, spans=list(report.get("spans") or []),
                   examples={str(key): int(value) for key, value in splits.items()},
                   seconds=round((max(item[3] for item in executions) - min(item[2] for item in executions)) / 1000, 1))


def _moment(run_id: str | None) -> float | None:
    """A run id's start (to the second) as seconds since the epoch; None for an id that is not a time."""
    text = started(run_id or "")
    return datetime.datetime.fromisoformat(text).timestamp() if text else None


def replay_page(summary: dict[str, Any]) -> str | None:
    """history.html in a replay's root, from the records of every run of its pipeline where its tasks wrote
    theirs (the replay's root, or the compiled pipeline root on a bucket); its path, None before any task ran."""
    folders = [run_folder(uri, name.split(".")[0]) for name, uri in (summary.get("artifacts") or {}).items()
               if isinstance(uri, str) and uri]
    folder = next((found for found in folders if found), None)
    if folder is None or not summary.get("root"):
        return None
    records_root = posixpath.dirname(folder)
    return write_page(summary["root"], summary["pipeline"], {}, cluster_history.runs(records_root, summary["pipeline"]))


def no_runs_yet(loaded: LoadedSpec, target: str, where: str, spec_path: str) -> str:
    """What `tfxd history` says where it found no run, and what makes the first."""
    first = (f"`tfxd submit {spec_path} --target {target}` or a replay of its compiled file makes the first"
             if Placement(loaded, target).on_cluster else f"`tfxd run {spec_path}` makes the first")
    return f"no runs of {loaded.spec.name} yet under {where}: {first}"


def write_page(root: str, pipeline: str, thresholds: dict[str, dict[str, Any]],
               found: list[tuple[HistoryLine, LocalRun | None]] | None = None, path: str | None = None) -> str:
    """history.html (in ``root``, or at ``path``) from the runs ``found`` (else every local run's summary
    under ``root``, each linked to its report.html); its path."""
    return history_page.write(path or join(root, keys.HISTORY_PAGE), pipeline,
                              runs(root, pipeline) if found is None else found, thresholds, reports=found is None)


def _summaries(root: str) -> dict[str, Any]:
    """Every summary.json under ``root``'s runs/ (a bucket's too), by run id; an unreadable one as empty."""
    folder = join(root, "runs")
    reader = file_reader(root)
    found: dict[str, Any] = {}
    for name in [name.rstrip("/") for name in reader.listdir(folder)] if reader.isdir(folder) else []:
        path = join(folder, name, "summary.json")
        if reader.exists(path):
            with reader.open(path, "r") as handle:
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
