"""A run's summary (summary.json in its folder): what `tfxd run` (pipeline/run/local_run.py) and `tfxd replay`
(kubeflow/replay/runner.py) say a run did. Both share one core, built by the same rule for the run's
status; each adds what only it knows (a local run: its components, the evaluation's results and the
report; a replay: the compiled file, its tasks and where the cluster would have put things). The
terminal table and report.html (pipeline/report/) read the typed summary. `LocalRun.from_json` reads a
summary.json back (a notebook, a script, the report's tests; no verb does yet), taking a file that is
short or odd (written by an older tfxd, edited by hand) as empty parts, so the report's sections need not.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

OK, FAILED, INTERRUPTED, SKIPPED, NOT_RUN = "ok", "failed", "interrupted", "skipped", "not run"
STOPPED = "stopped"  # by a validation gate (validation.drift or validation.skew, action: fail)
RUNNING = "running"  # in `tfxd history`: a run going on now


def run_status(*, interrupted: bool, failed: bool, skipped: bool, not_run: bool = False,
               stopped: bool = False) -> str:
    """A run's status: stopped by a signal, else stopped by a validation gate, else a part failed, else a
    part never ran (a replay stopped before its end), else skipped (`data.on_no_new_data: skip` found
    nothing new), else ok."""
    return (INTERRUPTED if interrupted else STOPPED if stopped else FAILED if failed else NOT_RUN if not_run
            else SKIPPED if skipped else OK)


def worst_column(gate: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A gate record's column furthest past (or nearest to) its threshold, by distance over threshold, and
    its {distance, threshold, measure}; None without distances."""
    columns = {name: value for name, value in _mapping(gate.get("columns")).items()
               if isinstance(value, dict) and isinstance(value.get("distance"), (int, float))
               and isinstance(value.get("threshold"), (int, float))}

    def ratio(item: tuple[str, dict[str, Any]]) -> float:
        value = item[1]
        return value["distance"] / value["threshold"] if value["threshold"] > 0 else float("inf")

    return max(columns.items(), key=ratio) if columns else None


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What both summaries say, under the same keys."""

    pipeline: str
    run_id: str
    status: str  # run_status()
    examples: dict[str, Any] = field(default_factory=dict)  # splits, bad records, spans read and their day
    strategy: dict[str, Any] | None = None  # the Trainer's plan, as `tfxd plan --json` prints it
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> URI
    blessed: bool | None = None  # None: nothing was evaluated
    drift: dict[str, Any] | None = None  # validation.drift's distances (None: not checked)
    skew: dict[str, Any] | None = None  # validation.skew's distances (None: not checked)
    reason: str | None = None  # why a skipped run read nothing, or why a gate stopped it
    signal: str | None = None  # what stopped an interrupted run
    stopped_by: str | None = None  # the gate that stopped a stopped run: drift or skew

    def _core(self) -> dict[str, Any]:
        data: dict[str, Any] = {"pipeline": self.pipeline, "run_id": self.run_id, "status": self.status,
                                "examples": self.examples, "strategy": self.strategy, "artifacts": self.artifacts,
                                "blessed": self.blessed}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.signal is not None:
            data["signal"] = self.signal
        if self.stopped_by is not None:
            data["stopped_by"] = self.stopped_by
        return data


@dataclass(frozen=True, kw_only=True)
class LocalRun(RunSummary):
    """`tfxd run`'s summary."""

    components: list[dict[str, Any]] = field(default_factory=list)  # {name, status, seconds} in order
    metrics: dict[str, Any] = field(default_factory=dict)  # the evaluation's overall slice
    training: dict[str, Any] = field(default_factory=dict)  # training_report.TrainingReport.for_summary()
    evaluation: dict[str, Any] = field(default_factory=dict)  # slices, blessed, reasons, baseline
    anomalies: list[str] | None = None  # None: not checked
    pushed_to: str | None = None
    report: str | None = None  # report.html's path, once written
    seconds: float | None = None  # the run's, start to summary (None: written by an older tfxd)
    history: str | None = None  # history.html in the root, every run of the pipeline

    def to_json(self) -> dict[str, Any]:
        return {**self._core(), "components": self.components, "metrics": self.metrics, "training": self.training,
                "evaluation": self.evaluation, "anomalies": self.anomalies, "drift": self.drift, "skew": self.skew,
                "pushed_to": self.pushed_to, "report": self.report, "seconds": self.seconds,
                "history": self.history}

    @classmethod
    def from_json(cls, data: Any) -> LocalRun:
        """A summary.json read back, whatever it holds: a missing or mistyped key reads as absent."""
        data = _mapping(data)
        anomalies = data.get("anomalies")
        blessed, seconds = data.get("blessed"), data.get("seconds")
        return cls(
            pipeline=_text(data.get("pipeline")), run_id=_text(data.get("run_id")), status=_text(data.get("status")),
            examples=_mapping(data.get("examples")), strategy=_mapping(data.get("strategy")) or None,
            artifacts=_mapping(data.get("artifacts")), blessed=blessed if isinstance(blessed, bool) else None,
            drift=_mapping(data.get("drift")) or None, skew=_mapping(data.get("skew")) or None,
            reason=_text(data.get("reason")) or None, signal=_text(data.get("signal")) or None,
            stopped_by=_text(data.get("stopped_by")) or None,
            components=[c for c in _sequence(data.get("components")) if isinstance(c, dict)],
            metrics=_mapping(data.get("metrics")), training=_mapping(data.get("training")),
            evaluation=_mapping(data.get("evaluation")),
            anomalies=None if anomalies is None else [str(a) for a in _sequence(anomalies)],
            pushed_to=_text(data.get("pushed_to")) or None, report=_text(data.get("report")) or None,
            seconds=seconds if isinstance(seconds, (int, float)) else None,
            history=_text(data.get("history")) or None)


@dataclass(frozen=True, kw_only=True)
class ReplayRun(RunSummary):
    """`tfxd replay`'s summary: a compiled file's run here, and where the cluster would have put things."""

    file: str  # the compiled file
    format: str  # its kind (Kubeflow YAML, Vertex JSON)
    root: str
    run_dir: str
    logs: str
    parameters: dict[str, Any]
    beam: Any  # the Beam arguments the tasks ran with, or how they were taken
    tasks: list[dict[str, Any]]  # {name, kind, status, seconds, log, outputs} in order
    evaluation: str | None = None  # the ModelEvaluation's URI
    model: str | None = None  # the blessing's current and baseline models
    baseline: str | None = None
    pushed: bool | None = None
    pushed_destination: str | None = None
    pushed_destination_on_cluster: str | None = None
    pipeline_root_on_cluster: str | None = None
    buckets: dict[str, str] = field(default_factory=dict)  # bucket -> the folder standing for it here
    warm_start: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        gates = {name: value for name, value in (("drift", self.drift), ("skew", self.skew)) if value is not None}
        return {**self._core(), "file": self.file, "format": self.format, "root": self.root, "run_dir": self.run_dir,
                "logs": self.logs, "parameters": self.parameters, "beam": self.beam, "tasks": self.tasks,
                "evaluation": self.evaluation, "model": self.model, "baseline": self.baseline, "pushed": self.pushed,
                "pushed_destination": self.pushed_destination,
                "pushed_destination_on_cluster": self.pushed_destination_on_cluster,
                "pipeline_root_on_cluster": self.pipeline_root_on_cluster, "buckets": self.buckets,
                **({"warm_start": self.warm_start} if self.warm_start is not None else {}), **gates,
                "notes": self.notes}


@dataclass(frozen=True)
class EngineRun:
    """A run as Kubeflow Pipelines or Vertex AI knows it (`tfxd history --ask-engine`)."""

    state: str  # the service's own word: RUNNING, SUCCEEDED, FAILED, CANCELED (KFP) or CANCELLED (Vertex)...
    created: str  # ISO 8601
    name: str = ""  # the run's display name


@dataclass(frozen=True)
class HistoryLine:
    """One run, as `tfxd history` prints it and `--json` gives it."""

    run_id: str
    started: str  # ISO 8601, this machine's time zone, from the run id
    status: str  # ok, failed, stopped (by a gate), skipped (no new data), interrupted, not run, running
    reason: str | None = None  # why it was skipped or stopped
    spans: list[Any] = field(default_factory=list)
    examples: dict[str, int] = field(default_factory=dict)  # split -> examples
    strategy: str | None = None
    replicas: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # the evaluation's overall slice
    blessed: bool | None = None  # None: not evaluated
    pushed: str | None = None  # the pushed version's path
    drift: dict[str, Any] | None = None  # None: not checked; else the verdict and the largest distance
    skew: dict[str, Any] | None = None
    seconds: float | None = None
    engine: str | None = None  # the run's state as Kubeflow Pipelines or Vertex AI says it, where asked

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def of(cls, summary: LocalRun) -> HistoryLine:
        """A run's line, from its summary (a local run's summary.json, or a cluster run's task records)."""
        splits = summary.examples.get("splits")
        plan = summary.strategy or {}
        seconds = summary.seconds
        if seconds is None and summary.components:  # an older tfxd's summary: its components' time
            seconds = round(sum(float(c.get("seconds") or 0) for c in summary.components), 1)
        return cls(
            run_id=summary.run_id, started=started(summary.run_id), status=summary.status or "unknown",
            reason=summary.reason, spans=list(summary.examples.get("spans") or []),
            examples={str(k): int(v) for k, v in splits.items()} if isinstance(splits, dict) else {},
            strategy=plan.get("strategy"), replicas=plan.get("replicas"),
            metrics={k: v for k, v in summary.metrics.items() if isinstance(v, (int, float))},
            blessed=summary.blessed if summary.evaluation else None, pushed=summary.pushed_to, drift=_verdict(summary.drift, summary, "drift"),
            skew=_verdict(summary.skew, summary, "skew"), seconds=seconds)

    @property
    def pushed_version(self) -> str:
        """The pushed model's version (its folder's name under push.to), or ""."""
        return self.pushed.rstrip("/").rsplit("/", 1)[-1] if self.pushed else ""


def started(run_id: str) -> str:
    """When the run started, from its id (outcome.new_run_id: local time to the microsecond)."""
    try:
        when = datetime.datetime.strptime(run_id, "%Y%m%d-%H%M%S-%f")
    except ValueError:
        return ""
    return when.astimezone().isoformat(timespec="seconds")


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


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sequence(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _text(value: Any) -> str:
    return "" if value is None else str(value)
