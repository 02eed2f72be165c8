"""What a local run did, read back from its ML Metadata store: each component's execution in this run
(ran, cached or failed, and its time) and the artifacts it produced or reused, followed through the
execution's own events so that a cached component reports the artifacts this run used."""

from __future__ import annotations

import json
from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx.types import artifact_utils

from tfxd import keys
from tfxd.components.evaluator.slices import metrics_per_slice
from tfxd.components.example_validator.executor import describe, read_anomalies
from tfxd.pipeline.run import metadata
from tfxd.pipeline.run.results import not_blessed_because
from tfxd.training_report import TrainingReport
from tfxd.training_report import read as read_training_report

_STATUS = {"COMPLETE": "ran", "CACHED": "cached", "FAILED": "failed", "RUNNING": "failed", "CANCELED": "failed"}


class RunRecords:
    """The executions of one run (those created since it started, and before ``until``: the next run's start)
    of one pipeline under ``root``."""

    def __init__(self, root: str, pipeline: str, since: float, until: float | None = None) -> None:
        self._store = metadata.open_store(root, readonly=True)
        self._pipeline = pipeline
        self._since_ms = int(since * 1000)
        self._until_ms = int(until * 1000) if until is not None else None
        self._executions: dict[str, Any] = {}

    def _in_run(self, execution: Any) -> bool:
        created = execution.create_time_since_epoch
        return created >= self._since_ms and (self._until_ms is None or created < self._until_ms)

    def executions(self) -> list[tuple[str, str, int, int]]:
        """Each node's execution in this run as (node id, state, created, last updated: ms), oldest first."""
        prefix = f"{self._pipeline}."
        found = []
        for context in self._store.get_contexts_by_type("node"):
            if context.name.startswith(prefix):
                execution = self.execution(context.name[len(prefix):])
                if execution is not None:
                    found.append((context.name[len(prefix):],
                                  metadata_store_pb2.Execution.State.Name(execution.last_known_state),
                                  execution.create_time_since_epoch, execution.last_update_time_since_epoch))
        return sorted(found, key=lambda item: item[2])

    def execution(self, node_id: str):
        """This run's newest execution of ``node_id``, or None."""
        if node_id not in self._executions:
            context = self._store.get_context_by_type_and_name("node", f"{self._pipeline}.{node_id}")
            recent = [e for e in self._store.get_executions_by_context(context.id) if self._in_run(e)] if context else []
            self._executions[node_id] = max(recent, key=lambda e: (e.create_time_since_epoch, e.id),
                                            default=None)
        return self._executions[node_id]

    def status(self, node_id: str) -> dict[str, Any]:
        """{name, status: ran | cached | failed | not run, seconds}."""
        execution = self.execution(node_id)
        if execution is None:
            return {"name": node_id, "status": "not run", "seconds": 0.0}
        state = metadata_store_pb2.Execution.State.Name(execution.last_known_state)
        seconds = max(0, execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        return {"name": node_id, "status": _STATUS.get(state, state.lower()), "seconds": round(seconds, 2)}

    def artifact(self, node_id: str, key: str, output: bool = True):
        """The first artifact under ``key`` among the execution's outputs (or inputs), or None."""
        execution = self.execution(node_id)
        if execution is None:
            return None
        kinds = ({metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT} if output
                 else {metadata_store_pb2.Event.INPUT, metadata_store_pb2.Event.DECLARED_INPUT})
        ids = [event.artifact_id for event in self._store.get_events_by_execution_ids([execution.id])
               if event.type in kinds and event.path.steps and event.path.steps[0].key == key]
        found = self._store.get_artifacts_by_id(ids[:1]) if ids else []
        return found[0] if found else None

    def tfx_artifact(self, node_id: str, key: str):
        """The output artifact as a TFX Artifact (with its split names and properties), or None."""
        found = self.artifact(node_id, key)
        if found is None:
            return None
        return artifact_utils.deserialize_artifact(self._store.get_artifact_types_by_id([found.type_id])[0],
                                                   found)


def _custom(artifact, name: str) -> Any:
    value = artifact.custom_properties.get(name) if artifact is not None else None
    if value is None:
        return None
    return value.string_value or value.int_value or value.double_value


def examples_report(records: RunRecords) -> dict[str, Any]:
    """Split counts and bad-record counts of the examples this run used."""
    examples = records.artifact("ExampleGen", "examples")
    report: dict[str, Any] = {}
    counts = _custom(examples, keys.SPLIT_COUNTS_PROPERTY)
    if counts:
        bad = json.loads(_custom(examples, keys.BAD_RECORDS_PROPERTY) or "{}")
        report = {"splits": json.loads(counts), "bad_records": bad, "bad_records_total": sum(bad.values()),
                  "uri": examples.uri}
    for name, key in (("spans", keys.SPANS_PROPERTY), ("span_day", keys.SPAN_DAY_PROPERTY)):
        text = _custom(examples, key)
        if text:
            report[name] = json.loads(text)
    return report


def no_new_data(records: RunRecords) -> str | None:
    """Why this run had nothing new to train on (ExampleGen's examples say so), or None."""
    return _custom(records.artifact("ExampleGen", "examples"), keys.NO_NEW_DATA_PROPERTY) or None


def training_report(records: RunRecords) -> TrainingReport | None:
    """The plan, final metrics and per-epoch history the Trainer wrote next to the model this run used."""
    model = records.artifact("Trainer", "model")
    return read_training_report(model.uri) if model is not None else None


def anomalies_report(records: RunRecords) -> list[str]:
    """Every anomaly ExampleValidator found, per split, in plain words."""
    artifact = records.tfx_artifact("ExampleValidator", "anomalies")
    if artifact is None:
        return []
    lines = []
    for split in artifact_utils.decode_split_names(artifact.split_names):
        lines += [f"split {split}: {line}" for line in describe(read_anomalies(artifact, split))]
    return lines


def drift_report(records: RunRecords) -> dict[str, Any]:
    """The drift gate's distances per column against the previous span (validation.drift), {} without."""
    return _gate_record(records, keys.DRIFT_PROPERTY)


def skew_report(records: RunRecords) -> dict[str, Any]:
    """The skew gate's distances per column, train against eval (validation.skew), {} without."""
    return _gate_record(records, keys.SKEW_PROPERTY)


def _gate_record(records: RunRecords, name: str) -> dict[str, Any]:
    artifact = records.artifact("ExampleValidator", "anomalies")
    text = _custom(artifact, name) if artifact is not None else None
    return json.loads(text) if text else {}


def evaluation_report(records: RunRecords) -> dict[str, Any]:
    """Metrics per slice, the blessing and, when not blessed, why; and the baseline compared against."""
    evaluation = records.artifact("Evaluator", "evaluation")
    blessing = records.artifact("Evaluator", "blessing")
    if evaluation is None or blessing is None:
        return {}
    blessed = _custom(blessing, "blessed") == 1
    baseline = records.artifact("Evaluator", "baseline_model", output=False)
    return {"slices": metrics_per_slice(evaluation.uri), "blessed": blessed,
            "reasons": [] if blessed else not_blessed_because(evaluation.uri),
            "baseline": baseline.uri if baseline is not None else None, "uri": evaluation.uri}


def pushed_to(records: RunRecords) -> str | None:
    """Where Pusher put the model in this run (or reused push), None when it did not push."""
    pushed = records.artifact("Pusher", "pushed_model")
    if pushed is None or _custom(pushed, "pushed") != 1:
        return None
    return _custom(pushed, "pushed_destination")


def artifact_uris(records: RunRecords) -> dict[str, str]:
    """Where this run's main artifacts are, for the report and for users."""
    wanted = {"examples": ("ExampleGen", "examples"), "statistics": ("StatisticsGen", "statistics"),
              "schema": ("SchemaGen", "schema"), "anomalies": ("ExampleValidator", "anomalies"),
              "transform_graph": ("Transform", "transform_graph"),
              "transformed_examples": ("Transform", "transformed_examples"), "model": ("Trainer", "model"),
              "evaluation": ("Evaluator", "evaluation")}
    uris = {}
    for name, (node, key) in wanted.items():
        artifact = records.artifact(node, key)
        if artifact is not None:
            uris[name] = artifact.uri
    return uris
