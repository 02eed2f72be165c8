"""`tfxd history`: a pipeline's runs, newest first, one line each, from what every run leaves in its root.

A run that ended (finished, failed, stopped by a validation gate, skipped for no new data, stopped by a
signal) wrote `<root>/runs/<run id>/summary.json` (pipeline/run/local_run.py); a run killed outright
(SIGKILL, out of memory, a closed laptop) wrote none, and left only its log on this machine
(`<local state>/runs/<run id>/logs/run.log`, tfxd.files.local_state): it reads as interrupted, unless the
root's run lock is held, and then the newest such run is the one running now. Summaries written by an older
tfxd read with the keys they have (LocalRun.from_json). A pipeline compiled for Kubeflow Pipelines or Vertex
AI is read from its tasks' records in its pipeline root instead (cluster_history.py)."""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import replace
from typing import Any

from tfxd import keys
from tfxd.files import is_uri, join, local_state
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
    return where, runs(where)


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
            found.append((HistoryLine.of(summary), summary))
        else:  # no summary: killed outright, or the run going on now (the newest one, with the lock held)
            status = RUNNING if running and not found and run_id == max(logged) else INTERRUPTED
            found.append((HistoryLine(run_id=run_id, started=started(run_id), status=status), None))
    return found


def replay_page(summary: dict[str, Any]) -> str | None:
    """history.html in a replay's root, from the records of every run of its pipeline where its tasks wrote
    theirs (the replay's root, or the compiled pipeline root on a bucket); its path, None before any task ran."""
    uris = [uri for uri in (summary.get("artifacts") or {}).values() if isinstance(uri, str) and uri]
    if not uris or not summary.get("root"):
        return None
    records_root = posixpath.dirname(run_folder(uris[0]))
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
                              runs(root) if found is None else found, thresholds, reports=found is None)


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
