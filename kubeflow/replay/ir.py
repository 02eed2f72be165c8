"""A compiled file as replay reads it: the PipelineSpec (from a Vertex PipelineJob or a KFP package), its
parameters and their types, the order its tasks run in, artifact types, and the `{{$...}}` placeholders
the launcher fills."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from tfxd.kubeflow.cluster_target import ClusterTarget
from tfxd.kubeflow.targets import TARGETS, cluster_target


class ReplayError(Exception):
    """The compiled file cannot be replayed (unreadable, or uses something replay does not support)."""


@dataclass
class Compiled:
    path: str
    kind: str  # the target it was compiled for: vertex (PipelineJob JSON) or kubeflow (PipelineSpec YAML)
    spec: dict[str, Any]  # the PipelineSpec
    runtime_config: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.get("pipelineInfo", {}).get("name") or "pipeline"

    @property
    def target(self) -> ClusterTarget:
        """The service that would run it, whose ways replay follows."""
        return cluster_target(self.kind)

    @property
    def pipeline_root(self) -> str | None:
        return self.runtime_config.get("gcsOutputDirectory") or self.spec.get("defaultPipelineRoot")


def load_compiled(path: str) -> Compiled:
    """A compiled file of one of the targets (kubeflow.targets): each says whether the document is one of
    its files (a KFP PipelineSpec in YAML or JSON, a Vertex PipelineJob in JSON with `pipelineSpec`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]  # JSON is YAML too
    except yaml.YAMLError as exc:
        raise ReplayError(f"{path} is neither JSON nor YAML: {exc}") from exc
    document = documents[0] if documents else None
    for target in TARGETS.values():
        found = target.read_compiled(document)
        if found is not None:
            return Compiled(path, target.NAME, *found)
    raise ReplayError(f"{path} is not a compiled pipeline: expected "
                      + " or ".join(target.COMPILED for target in TARGETS.values()))


# ---------------------------------------------------------------------------------------------- values

_TYPES = {"INT": "INT", "NUMBER_INTEGER": "INT", "DOUBLE": "DOUBLE", "NUMBER_DOUBLE": "DOUBLE",
          "STRING": "STRING", "BOOLEAN": "BOOLEAN", "STRUCT": "STRUCT", "LIST": "LIST"}


def declared_type(definition: dict[str, Any] | None) -> str:
    definition = definition or {}
    return _TYPES.get(definition.get("parameterType") or definition.get("type") or "STRING", "STRING")


def from_old_value(value: dict[str, Any]) -> Any:
    """pipeline_spec_pb2.Value (intValue / doubleValue / stringValue) -> Python."""
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "stringValue" in value:
        return value["stringValue"]
    return None


def coerce(value: Any, kind: str, what: str) -> Any:
    try:
        if kind == "INT":
            number = float(value) if not isinstance(value, int) else value
            if number != int(number):
                raise ValueError
            return int(number)
        if kind == "DOUBLE":
            return float(value)
        if kind == "BOOLEAN":
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                return value.lower() in ("true", "1")
            return bool(value)
        if kind in ("STRUCT", "LIST"):
            return json.loads(value) if isinstance(value, str) else value
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"{what}: {value!r} is not a valid {kind.lower()}") from exc
    return value if isinstance(value, str) else json.dumps(value)


def old_value(value: Any, kind: str) -> dict[str, Any]:
    """Python -> the (pre-2.1) pipeline_spec_pb2.Value that TFX's entrypoint reads without an inputs spec."""
    if kind == "INT" or (kind == "BOOLEAN" and isinstance(value, bool)):
        return {"intValue": str(int(value))}
    if kind == "DOUBLE":
        return {"doubleValue": float(value)}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value)}


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "INT"
    if isinstance(value, float):
        return "DOUBLE"
    return "STRING" if isinstance(value, str) else "STRUCT"


def pipeline_parameters(compiled: Compiled, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pipeline's parameter values: the runtime config's (Vertex) or the defaults (KFP), then
    ``overrides``; each coerced to its declared type."""
    definitions = compiled.spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    values: dict[str, Any] = {}
    for key, definition in definitions.items():
        if "defaultValue" in definition:
            values[key] = definition["defaultValue"]
    for key, value in (compiled.runtime_config.get("parameters") or {}).items():
        values[key] = from_old_value(value) if isinstance(value, dict) else value
    values.update(compiled.runtime_config.get("parameterValues") or {})
    unknown = sorted(set(overrides or {}) - set(definitions))
    if unknown:
        known = ", ".join(sorted(definitions)) or "none"
        raise ReplayError(f"unknown pipeline parameter {', '.join(map(repr, unknown))} (the pipeline's: {known})")
    values.update(overrides or {})
    return {key: coerce(value, declared_type(definitions.get(key)), f"pipeline parameter {key}")
            for key, value in values.items()}


# ---------------------------------------------------------------------------------------------- the DAG


def producers(task: dict[str, Any]) -> set[str]:
    """The tasks ``task`` depends on: those it names, and those whose outputs it takes."""
    inputs = task.get("inputs", {})
    found = set(task.get("dependentTasks", []))
    for spec in inputs.get("artifacts", {}).values():
        if "taskOutputArtifact" in spec:
            found.add(spec["taskOutputArtifact"]["producerTask"])
    for spec in inputs.get("parameters", {}).values():
        if "taskOutputParameter" in spec:
            found.add(spec["taskOutputParameter"]["producerTask"])
    return found


def task_order(tasks: dict[str, Any]) -> list[str]:
    """The tasks in an order that runs every producer before its consumers (ties: by name)."""
    needs = {}
    for name, task in tasks.items():
        missing = sorted(producers(task) - set(tasks))
        if missing:
            raise ReplayError(f"task {name} depends on {', '.join(missing)}, which the pipeline does not have")
        needs[name] = producers(task)
    order: list[str] = []
    while needs:
        ready = sorted(name for name, wanted in needs.items() if not wanted - set(order))
        if not ready:
            raise ReplayError(f"the tasks {', '.join(sorted(needs))} depend on each other in a cycle")
        order.append(ready[0])
        del needs[ready[0]]
    return order


@dataclass(frozen=True)
class Dag:
    """The tasks replay runs, in order: the pipeline's own (those of TFX's sub-DAG where the file has an exit
    handler, else the root's), then the exit tasks, which run after them whatever their end (`triggerPolicy.
    strategy: ALL_UPSTREAM_TASKS_COMPLETED`). ``handed``: a nested task's `componentInputParameter` -> the
    root parameter the sub-DAG's task hands it."""

    tasks: dict[str, Any]
    order: list[str]
    exit_tasks: frozenset[str] = frozenset()
    nested: frozenset[str] = frozenset()
    handed: dict[str, str] = field(default_factory=dict)


def read_dag(spec: dict[str, Any]) -> Dag:
    """The file's tasks as replay runs them; a ReplayError for a sub-DAG that is not an exit handler's (a
    condition group, a loop), or one nested deeper, as replay runs neither."""
    root = spec.get("root", {}).get("dag", {}).get("tasks", {})
    components = spec.get("components", {})
    groups = [name for name, task in root.items() if "dag" in components.get(task.get("componentRef", {}).get("name"), {})]
    if not groups:
        return Dag(root, task_order(root))
    group = groups[0]
    exits = {name for name in root if name != group}
    for name in sorted(exits):  # every other root task, another group too, must be an exit task
        task = root[name]
        if name in groups or group not in task.get("dependentTasks", []) or (
                task.get("triggerPolicy", {}).get("strategy") != "ALL_UPSTREAM_TASKS_COMPLETED"):
            raise ReplayError(f"task {name}: sub-DAGs other than an exit handler's (conditions, loops) are not "
                              "replayed")
    component = components[root[group]["componentRef"]["name"]]
    nested = component["dag"].get("tasks", {})
    declared = component.get("inputDefinitions", {}).get("parameters", {})
    handed = {key: spec["componentInputParameter"] for key, spec in root[group].get("inputs", {}).get(
        "parameters", {}).items() if key in declared and "componentInputParameter" in spec}
    exit_tasks = {name: root[name] for name in exits}
    return Dag({**nested, **exit_tasks}, [*task_order(nested), *sorted(exits)], frozenset(exits), frozenset(nested),
               handed)


def title(type_schema: dict[str, Any]) -> str:
    """An artifact type's schema title (e.g. tfx.Model), from the type or its instance schema."""
    if type_schema.get("schemaTitle"):
        return type_schema["schemaTitle"]
    schema = yaml.safe_load(type_schema.get("instanceSchema") or "") or {}
    return schema.get("title", "tfx.Artifact") if isinstance(schema, dict) else "tfx.Artifact"


_PLACEHOLDER = re.compile(r"\{\{\$(.*?)\}\}")


def substitute(text: str, lookup: Callable[[str], str | None]) -> str | None:
    """Fill `{{$...}}` placeholders; None when one of them has no value (e.g. an input with no artifact)."""
    missing = False

    def fill(match: re.Match) -> str:
        nonlocal missing
        value = lookup(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    result = _PLACEHOLDER.sub(fill, text)
    return None if missing else result
