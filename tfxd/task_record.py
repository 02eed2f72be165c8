"""What one task of a compiled pipeline did, as it leaves it in its run's folder: the history of a pipeline
run on Kubeflow Pipelines or Vertex AI (and of its replays) is read from these records alone, through the
bucket's own client code, with no cluster API (keys.TASK_RECORDS says where).

components/cluster_task.py, the container's entry point around TFX's, writes one per task when the task
ends (ok, failed, stopped by a validation gate, interrupted by a signal); pipeline/run/cluster_history.py
reads a run's records back into a run summary. One type for both sides.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tfxd import keys
from tfxd.files import join

OK, FAILED, STOPPED, INTERRUPTED = "ok", "failed", "stopped", "interrupted"


@dataclass(frozen=True, kw_only=True)
class TaskRecord:
    pipeline: str
    task: str  # the node id: ExampleGen, Trainer...
    status: str  # OK, FAILED, STOPPED (a validation gate), INTERRUPTED (a signal)
    started: str  # RFC 3339, UTC, to the millisecond
    ended: str
    error: str | None = None  # the exception's message, for a task that did not end ok
    verdict: dict[str, Any] | None = None  # a gate stop's {gate, message, and the gate's record}
    # each output key's artifacts as the executor output gives them to the engine, and each input key's as the
    # engine gave them: {uri, metadata}. A task the engine took from its cache leaves no record, so the tasks
    # that always run (the Evaluator, Pusher) say through their inputs what the cached ones made.
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    inputs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return round((moment(self.ended) - moment(self.started)).total_seconds(), 2)

    def artifact(self, key: str, output: bool = True) -> dict[str, Any]:
        """The first output (or input) artifact under ``key`` ({uri, metadata}), or {}."""
        found = (self.artifacts if output else self.inputs).get(key) or [{}]
        return found[0]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> TaskRecord | None:
        """A record read back; None when it is not one (cut short, written by hand)."""
        if not isinstance(data, dict) or not all(isinstance(data.get(key), str) for key in (
                "pipeline", "task", "status", "started", "ended")):
            return None
        try:
            moment(data["started"]), moment(data["ended"])
        except ValueError:
            return None
        verdict = data.get("verdict")
        return cls(pipeline=data["pipeline"], task=data["task"], status=data["status"], started=data["started"],
                   ended=data["ended"], error=data.get("error") if isinstance(data.get("error"), str) else None,
                   verdict=verdict if isinstance(verdict, dict) else None,
                   artifacts=_artifacts(data.get("artifacts")), inputs=_artifacts(data.get("inputs")))


def _artifacts(value: Any) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(value, dict):
        return {}
    return {str(key): [item for item in items if isinstance(item, dict)] for key, items in value.items()
            if isinstance(items, list)}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def moment(text: str) -> datetime.datetime:
    """An RFC 3339 time as a datetime (a trailing Z taken as UTC)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def run_folder(output_uri: str, task: str) -> str | None:
    """The run's folder, from one of ``task``'s output artifacts: the part before the task's own folder
    (KFP 2.17's `<root>/<pipeline>/<run id>/<task>/<uuid>/<key>`, Vertex's `<root>/<project number>/<job id>/
    <task>_<task id>/<key>`; kubeflow/cluster_target.py's task_folder); None where the URI holds no such
    folder (an artifact a resolver found, made by another task)."""
    parts = output_uri.rstrip("/").split("/")
    for index in range(len(parts) - 2, 0, -1):  # the last part is the artifact's key
        if parts[index] == task or parts[index].startswith(f"{task}_"):
            return "/".join(parts[:index])
    return None


def path(folder: str, task: str) -> str:
    """Where ``task``'s record lies in the run folder ``folder``."""
    return join(folder, keys.TASK_RECORDS, f"{task}.json")


def dumps(record: TaskRecord) -> str:
    return json.dumps(record.to_json(), indent=2, sort_keys=True, default=str) + "\n"
