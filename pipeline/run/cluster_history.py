"""The runs of a pipeline compiled for Kubeflow Pipelines or Vertex AI (and of its replays), read from the
records its tasks left in each run's folder (tfxd/task_record.py): one run summary per run, as a local run's
summary.json says it, so that `tfxd history` and history.html show both alike. No engine's API is needed:
the pipeline root is read through the same file code as everything else (TensorFlow's GCS filesystem for a
bucket).

What the records tell, and how:
- A run ended ok when Pusher recorded its end; stopped when ExampleValidator recorded a gate's verdict;
  failed when a task recorded its failure; interrupted when one recorded a signal; skipped when ExampleGen
  found no new data (the tasks after it are skipped by their condition and record nothing). Otherwise no
  task recorded the run's end: it is running, or it ended where no task could say (a pod killed outright,
  a run cancelled before a task began): unfinished, and the engine's console has the rest.
- A task the engine took from its cache leaves no record: the spans, examples and model it made are read
  from the inputs of the tasks that always run (the baseline's finder, the Evaluator, Pusher).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import posixpath
from dataclasses import replace
from typing import Any

from tfxd import keys, pushed
from tfxd import task_record as records
from tfxd.files import file_reader, join
from tfxd.run_summary import (
    FAILED,
    INTERRUPTED,
    OK,
    RUNNING,
    SKIPPED,
    STOPPED,
    EngineRun,
    HistoryLine,
    LocalRun,
)
from tfxd.training_report import read as read_training_report

UNFINISHED = "unfinished"
# a run's state as Kubeflow Pipelines (CANCELED) or Vertex AI (CANCELLED, QUEUED) says it, as history says it
_ENGINE_STATUS = {"PENDING": RUNNING, "QUEUED": RUNNING, "RUNNING": RUNNING, "PAUSED": RUNNING,
                  "CANCELING": INTERRUPTED, "CANCELLING": INTERRUPTED, "CANCELED": INTERRUPTED,
                  "CANCELLED": INTERRUPTED, "FAILED": FAILED, "SUCCEEDED": OK, "SKIPPED": OK}
_STATUS = {records.OK: "ran", records.FAILED: "failed", records.STOPPED: "failed", records.INTERRUPTED: "failed"}


def runs(root: str, pipeline: str, push_to: str | None = None) -> list[tuple[HistoryLine, LocalRun | None]]:
    """``pipeline``'s runs under ``root`` (a pipeline root, or a replay's root), newest first; with
    ``push_to``, also each version pushed there whose run left no record (pushed_runs)."""
    found: list[tuple[HistoryLine, LocalRun | None]] = []
    for folder, tasks in _records(root).items():
        mine = [task for task in tasks if task.pipeline == pipeline]
        if mine:
            summary = summary_of(posixpath.basename(folder), mine)
            found.append((replace(HistoryLine.of(summary), started=_local(min(task.started for task in mine))), summary))
    if push_to:
        found += pushed_runs(push_to, pipeline, {line.pushed_version for line, _ in found})
    return sorted(found, key=lambda run: run[0].started, reverse=True)


def pushed_runs(destination: str, pipeline: str, known: set[str]) -> list[tuple[HistoryLine, LocalRun | None]]:
    """The versions pushed to ``destination`` that no run's records name (``known`` versions): the records
    were removed (a bucket's lifecycle rule, a cleanup), the pushed model stays. Each reads as the run that
    pushed it, from the files beside the model (tfxd.pushed): the spans, the plan and the evaluation."""
    found: list[tuple[HistoryLine, LocalRun | None]] = []
    for version_dir in pushed.versions(destination):
        version = posixpath.basename(version_dir.rstrip("/"))
        if version in known:
            continue
        trained = read_training_report(join(version_dir, pushed.EXTRA_DIR))
        evaluation = pushed.read_json(version_dir, pushed.EVALUATION_FILE)
        spans = pushed.data_record(version_dir).spans
        summary = LocalRun(pipeline=pipeline, run_id=f"pushed {version}", status=OK, blessed=True,
                           reason="its run left no record; this is what its pushed version says",
                           examples={"spans": spans} if spans else {},
                           strategy=trained.plan.to_json() if trained else None,
                           metrics=evaluation.get("metrics") or {}, evaluation={"blessed": True}, pushed_to=version_dir)
        started = datetime.datetime.fromtimestamp(int(version), datetime.timezone.utc).isoformat()
        found.append((replace(HistoryLine.of(summary), started=_local(started)), summary))
    return found


def with_engine(found: list[tuple[HistoryLine, LocalRun | None]], engine: dict[str, EngineRun],
                service: str) -> list[tuple[HistoryLine, LocalRun | None]]:
    """The runs ``found`` in the records, each with its state as ``service`` knows it (``engine``, by run id):
    a run no task recorded the end of takes the service's word for its status; a run the service knows
    and no task recorded (failed or cancelled before a task began, queued) is added."""
    joined: list[tuple[HistoryLine, LocalRun | None]] = []
    for line, summary in found:
        run = engine.get(line.run_id)
        if run is not None and line.status == UNFINISHED:
            line = replace(line, status=_ENGINE_STATUS.get(run.state, UNFINISHED),
                           reason=f"{service} says {run.state}; no task recorded the run's end")
        joined.append((replace(line, engine=run.state) if run is not None else line, summary))
    known = {line.run_id for line, _ in found}
    joined += [(HistoryLine(run_id=run_id, started=_local(run.created) if run.created else "",
                            status=_ENGINE_STATUS.get(run.state, UNFINISHED), engine=run.state,
                            reason=f"{service} says {run.state}; none of its tasks left a record"), None)
               for run_id, run in engine.items() if run_id not in known]
    return sorted(joined, key=lambda run: run[0].started, reverse=True)


def summary_of(run_id: str, tasks: list[records.TaskRecord]) -> LocalRun:
    """One run's summary from its tasks' records."""
    by_task = {task.task: task for task in sorted(tasks, key=lambda task: task.started)}
    examples = _find(by_task, "ExampleGen", "examples")
    meta = examples.get("metadata", {})
    status, reason, gate = _status(by_task, meta)
    gates = {name: _json(_find(by_task, "ExampleValidator", "anomalies").get("metadata", {}).get(key))
             for name, key in (("drift", keys.DRIFT_PROPERTY), ("skew", keys.SKEW_PROPERTY))}
    if gate is not None:
        gates[gate["gate"]] = {key: value for key, value in gate.items() if key not in ("gate", "message")}
    model = _find(by_task, "Trainer", "model").get("uri")
    trained = read_training_report(model) if model else None
    evaluation = by_task["Evaluator"].artifact("evaluation") if "Evaluator" in by_task else {}
    blessing = by_task["Evaluator"].artifact("blessing") if "Evaluator" in by_task else {}
    pushed = by_task["Pusher"].artifact("pushed_model").get("metadata", {}) if "Pusher" in by_task else {}
    blessed = blessing.get("metadata", {}).get("blessed") == 1 if blessing else None
    return LocalRun(
        pipeline=tasks[0].pipeline, run_id=run_id, status=status, reason=reason,
        stopped_by=gate["gate"] if gate else None,
        examples={name: value for name, value in (
            ("splits", _json(meta.get(keys.SPLIT_COUNTS_PROPERTY))), ("spans", _json(meta.get(keys.SPANS_PROPERTY))),
            ("span_day", _json(meta.get(keys.SPAN_DAY_PROPERTY))), ("uri", examples.get("uri"))) if value},
        strategy=trained.plan.to_json() if trained else None,
        artifacts={name: uri for name, uri in (
            ("examples", examples.get("uri")), ("transform_graph", _find(by_task, "Transform", "transform_graph").get("uri")),
            ("model", model), ("evaluation", evaluation.get("uri"))) if uri},
        blessed=blessed, drift=gates["drift"] or None, skew=gates["skew"] or None,
        components=[{"name": name, "status": _STATUS.get(task.status, task.status), "seconds": task.seconds}
                    for name, task in by_task.items()],
        metrics=_json(evaluation.get("metadata", {}).get(keys.METRICS_PROPERTY)) or {},
        evaluation={"blessed": blessed} if blessing else {},
        pushed_to=pushed.get("pushed_destination") if pushed.get("pushed") == 1 else None,
        seconds=round((records.moment(max(t.ended for t in tasks))
                       - records.moment(min(t.started for t in tasks))).total_seconds(), 1))


def _status(by_task: dict[str, records.TaskRecord], examples: dict[str, Any]) -> tuple[str, str | None, dict | None]:
    """The run's status, why, and a gate's verdict when one stopped it."""
    for task in by_task.values():
        if task.status == records.STOPPED and task.verdict:
            return STOPPED, str(task.verdict.get("message") or task.error), task.verdict
    for task in by_task.values():
        if task.status in (records.INTERRUPTED, records.FAILED):
            return (INTERRUPTED if task.status == records.INTERRUPTED else FAILED), f"{task.task}: {task.error}", None
    if "Pusher" in by_task:
        return OK, None, None
    if examples.get(keys.NO_NEW_DATA_PROPERTY):
        return SKIPPED, str(examples[keys.NO_NEW_DATA_PROPERTY]), None
    return UNFINISHED, ("no task recorded the run's end: it is running, or it ended where no task could say "
                        "(see the run on the engine's console)"), None


def _find(by_task: dict[str, records.TaskRecord], node: str, key: str) -> dict[str, Any]:
    """``node``'s output under ``key``; where the engine took ``node`` from its cache, the same artifact as
    a later task's input (the newest task's that has it)."""
    if node in by_task and by_task[node].artifact(key):
        return by_task[node].artifact(key)
    return next((task.artifact(key, output=False) for task in reversed(by_task.values())
                 if task.artifact(key, output=False)), {})


def _records(root: str) -> dict[str, list[records.TaskRecord]]:
    """Every run folder under ``root`` holding task records (one level down in a replay's root, two in a
    pipeline root: `<pipeline or project number>/<run id>`), with its records."""
    reader = file_reader(root)
    isdir, listdir, opener = reader.isdir, reader.listdir, reader.open

    def folders(base: str) -> list[str]:
        return [join(base, name.rstrip("/")) for name in listdir(base)] if isdir(base) else []

    def read(folder: str) -> tuple[str, list[records.TaskRecord]]:
        where = join(folder, keys.TASK_RECORDS)
        if not isdir(where):
            return folder, []
        found = []
        for name in listdir(where):
            with opener(join(where, name.rstrip("/")), "r") as handle:
                record = records.TaskRecord.from_json(_json(handle.read()))
            if record is not None:
                found.append(record)
        return folder, found

    level = folders(root)
    candidates = level + [folder for base in level for folder in folders(base)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:  # a bucket answers each in tens of ms
        return {folder: found for folder, found in pool.map(read, candidates) if found}


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _local(text: str) -> str:
    return records.moment(text).astimezone().isoformat(timespec="seconds")
