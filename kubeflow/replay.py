"""`tfxd replay FILE`: a compiled spec (Vertex PipelineJob JSON or KFP v2 PipelineSpec YAML) executed here,
task by task, the way the KFP v2 launcher / Vertex Pipelines executes it, with the local install in place
of the pipeline image. What a user (and the test suite) runs to know a compiled file works before it
reaches a cluster.

- Tasks run in dependency order (`dependentTasks` and the producers their inputs name). A container
  task gets the ExecutorInput JSON the launcher builds (input parameters, input artifacts as they came
  back in the producers' output metadata, output artifacts with local URIs, `outputFile`) in place of
  `{{$}}`; its command runs with this interpreter, PYTHONPATH starting with the project (as in the
  image), TF_USE_LEGACY_KERAS=1, and its output goes to `<root>/<run id>/logs/<task>.log`. A
  `lifecycle.preCacheCheck` container (TFX's file-based ExampleGen driver) runs first; the span,
  version, fingerprint and resolved input_config it writes become the task's parameters and its
  output artifact's metadata, as on Vertex.
- The image's project (pipeline.placement.IMAGE_PROJECT_DIR) is ``project_dir``; a bucket path
  (`gs://B/P`, `s3://B/P`) in a parameter or an argument is `<root>/bucket/B/P`: nothing is written to
  a bucket (the Pusher's destination included).
- Every output artifact of a finished task is recorded in `<root>/artifacts.json` (name, schemaTitle,
  uri, metadata, state, creation order): resolver tasks (TFX's latest-blessed-model queries) are
  answered from it, newest first, as Vertex answers them from ML Metadata; importer tasks add to it.
- Beam: by default the compiled Beam flags are replaced by the direct runner in memory with one worker
  (``beam_in_memory``): the data is local and small, one process needs no worker start-up per task,
  and it is what `tfxd run --set beam.workers=1` does. ``beam_in_memory=False`` keeps the compiled
  flags (a direct runner with a process per CPU, as in the container).
- No caching: every task runs on every replay.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.beam_args import direct_args
from pipeline.files import write_json
from pipeline.local_run import RunFailed
from pipeline.placement import IMAGE_PROJECT_DIR

INDEX_FILE = "artifacts.json"
BUCKET_DIR = "bucket"
BUCKET_SCHEMES = ("gs", "s3")
NAME_PREFIX = "tfxd-replay"
_IN_MEMORY_BEAM = direct_args("in_memory", 1)
# Beam flags that pick the runner and its workers: replaced by _IN_MEMORY_BEAM under beam_in_memory.
_RUNNER_FLAGS = {"runner", "direct_running_mode", "direct_num_workers", "environment_type", "environment_config",
                 "flink_master", "flink_submit_uber_jar", "spark_master_url", "spark_submit_uber_jar",
                 "sdk_container_image", "update_compatibility_version"}
_TFX_ENTRYPOINTS = ("kubeflow_v2_run_executor", "file_based_example_gen.driver")
# The Vertex custom-job Trainer launches replicas in the cloud; replayed, tfxd's Trainer trains here.
_LOCAL_EXECUTORS = {"kubeflow.vertex_trainer.Executor": "components.trainer.executor.Executor"}

TaskCallback = Callable[[str, dict[str, Any]], None]


class ReplayError(Exception):
    """The compiled file cannot be replayed (unreadable, or uses something replay does not support)."""


class TaskFailed(RunFailed):
    """A task failed: names it, its exit code and its log; ``summary`` is the replay up to there."""

    def __init__(self, task: str, reason: str, log: str, exit_code: int | None = None,
                 summary: dict[str, Any] | None = None) -> None:
        super().__init__(task, reason, log)
        self.task = task
        self.exit_code = exit_code
        self.summary = summary or {}


# ---------------------------------------------------------------------------------------------- the file


@dataclass
class Compiled:
    path: str
    kind: str  # "vertex" (PipelineJob JSON) or "kubeflow" (PipelineSpec YAML)
    spec: dict[str, Any]  # the PipelineSpec
    runtime_config: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.get("pipelineInfo", {}).get("name") or "pipeline"

    @property
    def pipeline_root(self) -> str | None:
        return self.runtime_config.get("gcsOutputDirectory") or self.spec.get("defaultPipelineRoot")


def load_compiled(path: str) -> Compiled:
    """A Vertex PipelineJob (JSON with `pipelineSpec`) or a KFP PipelineSpec (YAML or JSON)."""
    import yaml

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
    if isinstance(document, dict) and isinstance(document.get("pipelineSpec"), dict):
        return Compiled(path, "vertex", document["pipelineSpec"], document.get("runtimeConfig") or {})
    if isinstance(document, dict) and "root" in document and "deploymentSpec" in document:
        return Compiled(path, "kubeflow", document)
    raise ReplayError(f"{path} is not a compiled pipeline: expected a Vertex PipelineJob (pipelineSpec, "
                      "runtimeConfig) or a KFP PipelineSpec (root, deploymentSpec)")


# ---------------------------------------------------------------------------------------------- values

_TYPES = {"INT": "INT", "NUMBER_INTEGER": "INT", "DOUBLE": "DOUBLE", "NUMBER_DOUBLE": "DOUBLE",
          "STRING": "STRING", "BOOLEAN": "BOOLEAN", "STRUCT": "STRUCT", "LIST": "LIST"}


def _declared_type(definition: dict[str, Any] | None) -> str:
    definition = definition or {}
    return _TYPES.get(definition.get("parameterType") or definition.get("type") or "STRING", "STRING")


def _from_old_value(value: dict[str, Any]) -> Any:
    """pipeline_spec_pb2.Value (intValue / doubleValue / stringValue) -> Python."""
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "stringValue" in value:
        return value["stringValue"]
    return None


def _coerce(value: Any, kind: str, what: str) -> Any:
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


def _old_value(value: Any, kind: str) -> dict[str, Any]:
    """Python -> the (pre-2.1) pipeline_spec_pb2.Value that TFX's entrypoint reads without an inputs spec."""
    if kind == "INT" or (kind == "BOOLEAN" and isinstance(value, bool)):
        return {"intValue": str(int(value))}
    if kind == "DOUBLE":
        return {"doubleValue": float(value)}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value)}


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "INT"
    if isinstance(value, float):
        return "DOUBLE"
    return "STRING" if isinstance(value, str) else "STRUCT"


# ---------------------------------------------------------------------------------------------- paths


@dataclass
class Localizer:
    """The image's project -> ``project_dir``; a bucket (`gs://B/...`) -> `<root>/bucket/B/...`."""

    project_dir: str
    root: str
    seen: dict[str, str] = field(default_factory=dict)  # bucket URI prefix -> local folder

    _PROJECT = re.compile(re.escape(IMAGE_PROJECT_DIR) + r"(?![\w.-])")
    _BUCKET = re.compile(r"\b(" + "|".join(BUCKET_SCHEMES) + r")://([A-Za-z0-9_.-]+)")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            value = self._PROJECT.sub(lambda _: self.project_dir.rstrip("/") or "/", value)
            return self._BUCKET.sub(self._bucket, value)
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        return value

    def _bucket(self, match: re.Match) -> str:
        local = os.path.join(self.root, BUCKET_DIR, match.group(2))
        self.seen[match.group(0)] = local
        return local

    def on_cluster(self, path: str | None) -> str | None:
        """A local path under a mapped bucket as the cluster would have it."""
        if not path:
            return None
        for uri, local in self.seen.items():
            if path == local or path.startswith(local + os.sep):
                return uri + path[len(local):].replace(os.sep, "/")
        return None


# ---------------------------------------------------------------------------------------------- the DAG


def _producers(task: dict[str, Any]) -> set[str]:
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
        missing = sorted(_producers(task) - set(tasks))
        if missing:
            raise ReplayError(f"task {name} depends on {', '.join(missing)}, which the pipeline does not have")
        needs[name] = _producers(task)
    order: list[str] = []
    while needs:
        ready = sorted(name for name, wanted in needs.items() if not wanted - set(order))
        if not ready:
            raise ReplayError(f"the tasks {', '.join(sorted(needs))} depend on each other in a cycle")
        order.append(ready[0])
        del needs[ready[0]]
    return order


# ---------------------------------------------------------------------------------------------- artifacts


def _title(type_schema: dict[str, Any]) -> str:
    import yaml

    if type_schema.get("schemaTitle"):
        return type_schema["schemaTitle"]
    schema = yaml.safe_load(type_schema.get("instanceSchema") or "") or {}
    return schema.get("title", "tfx.Artifact") if isinstance(schema, dict) else "tfx.Artifact"


def _runtime_artifact(record: dict[str, Any]) -> dict[str, Any]:
    """A RuntimeArtifact as the launcher passes it."""
    return {"name": record["name"], "type": {"schemaTitle": record["schemaTitle"]}, "uri": record["uri"],
            "metadata": record.get("metadata", {})}


class ArtifactIndex:
    """Every output artifact replays produced under a root, oldest first: what resolvers query."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, INDEX_FILE)
        self.records: list[dict[str, Any]] = []
        self._load()

    def _load(self) -> None:
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as handle:
                self.records = json.load(handle).get("artifacts", [])

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        self._load()  # another replay under the same root may have added some meanwhile
        record = {**record, "state": "LIVE", "order": len(self.records) + 1,
                  "created": datetime.datetime.now().isoformat(timespec="seconds")}
        self.records.append(record)
        write_json(self.path, {"artifacts": self.records}, indent=1, sort_keys=True)
        return record

    def find(self, **where: Any) -> dict[str, Any] | None:
        for record in reversed(self.records):
            if all(record.get(key) == value for key, value in where.items()):
                return record
        return None

    def query(self, pipeline: str, text: str, placeholders: Callable[[str], str | None]) -> list[dict[str, Any]]:
        """The artifacts of ``pipeline`` that a resolver filter selects, newest first."""
        tests = [_clause(clause, text, placeholders) for clause in _split_and(text)]
        return [record for record in reversed(self.records)
                if record.get("pipeline") == pipeline and all(test(record) for test in tests)]


def _split_and(text: str) -> list[str]:
    parts, current = [], ""
    tokens = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for token in tokens:
        if token.startswith('"') and token.endswith('"') and len(token) > 1:
            current += token
            continue
        pieces = re.split(r"\s+AND\s+", token)
        current += pieces[0]
        for piece in pieces[1:]:
            parts.append(current)
            current = piece
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def _string(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


_NUMBER = r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"


def _clause(clause: str, text: str, placeholders: Callable[[str], str | None]) -> Callable[[dict], bool]:
    """One `A AND B` clause of a Vertex artifact filter, in the forms TFX's compiler emits."""
    if match := re.fullmatch(r'schema_title\s*=\s*("(?:[^"\\]|\\.)*")', clause):
        title = _string(match.group(1))
        return lambda record: record.get("schemaTitle") == title
    if match := re.fullmatch(r"state\s*=\s*([A-Z_]+)", clause):
        state = match.group(1)
        return lambda record: record.get("state") == state
    if match := re.fullmatch(r'name\s*=\s*("(?:[^"\\]|\\.)*")', clause):
        name = _substitute(_string(match.group(1)), placeholders, f"resolver filter {text!r}")
        return lambda record: name is not None and record.get("name") == name
    if match := re.fullmatch(rf"metadata\.([\w-]+)\.number_value\s*=\s*({_NUMBER})", clause):
        key, number = match.group(1), float(match.group(2))
        return lambda record: (isinstance(record.get("metadata", {}).get(key), (int, float))
                               and not isinstance(record["metadata"][key], bool)
                               and float(record["metadata"][key]) == number)
    if match := re.fullmatch(r'metadata\.([\w-]+)\.string_value\s*=\s*("(?:[^"\\]|\\.)*")', clause):
        key, wanted = match.group(1), _string(match.group(2))
        return lambda record: record.get("metadata", {}).get(key) == wanted
    if match := re.fullmatch(r"metadata\.([\w-]+)\.bool_value\s*=\s*(true|false)", clause):
        key, flag = match.group(1), match.group(2) == "true"
        return lambda record: record.get("metadata", {}).get(key) is flag
    raise ReplayError(f"resolver filter {text!r}: replay does not support the clause {clause!r} (it knows "
                      'schema_title="...", state=..., name="...", metadata.KEY.number_value=N, '
                      'metadata.KEY.string_value="...", metadata.KEY.bool_value=true|false, joined by AND)')


_PLACEHOLDER = re.compile(r"\{\{\$(.*?)\}\}")


def _substitute(text: str, lookup: Callable[[str], str | None], where: str) -> str | None:
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


# ---------------------------------------------------------------------------------------------- one run


@dataclass
class _TaskResult:
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # output key -> records
    parameters: dict[str, Any] = field(default_factory=dict)  # output key -> value


class _Replay:
    def __init__(self, compiled: Compiled, project_dir: str, root: str, run_id: str, log_dir: str,
                 parameters: dict[str, Any], beam_in_memory: bool, on_task: TaskCallback | None) -> None:
        self.compiled = compiled
        self.spec = compiled.spec
        self.project_dir = project_dir
        self.root = root
        self.run_id = run_id
        self.run_dir = os.path.join(root, run_id)
        self.log_dir = log_dir
        self.parameters = parameters
        self.beam_in_memory = beam_in_memory
        self.on_task = on_task or (lambda name, event: None)
        self.localize = Localizer(project_dir, root)
        self.index = ArtifactIndex(root)
        self.results: dict[str, _TaskResult] = {}
        self.rows: list[dict[str, Any]] = []
        self.notes: list[str] = []

    # --- helpers over the spec

    def component(self, task: dict[str, Any]) -> dict[str, Any]:
        name = task.get("componentRef", {}).get("name")
        component = self.spec.get("components", {}).get(name)
        if component is None:
            raise ReplayError(f"task {task.get('taskInfo', {}).get('name')}: no component {name!r}")
        return component

    def executor(self, task_name: str, component: dict[str, Any]) -> dict[str, Any]:
        if "dag" in component:
            raise ReplayError(f"task {task_name}: sub-DAGs (exit handlers, conditions, loops) are not replayed")
        label = component.get("executorLabel")
        executor = self.spec.get("deploymentSpec", {}).get("executors", {}).get(label)
        if executor is None:
            raise ReplayError(f"task {task_name}: no executor {label!r} in deploymentSpec")
        return executor

    def artifact_name(self, task: str, key: str) -> str:
        return f"{NAME_PREFIX}/{self.compiled.name}/{self.run_id}/{task}/{key}"

    # --- inputs

    def input_parameters(self, name: str, task: dict[str, Any], component: dict[str, Any]) -> dict[str, Any]:
        """Python values of the task's input parameters, localized, with their declared kinds."""
        definitions = component.get("inputDefinitions", {}).get("parameters", {})
        values: dict[str, Any] = {}
        for key, spec in task.get("inputs", {}).get("parameters", {}).items():
            kind = _declared_type(definitions.get(key))
            if "runtimeValue" in spec:
                runtime = spec["runtimeValue"]
                if "constantValue" in runtime:
                    value = _from_old_value(runtime["constantValue"])
                elif "constant" in runtime:
                    value = runtime["constant"]
                else:
                    raise ReplayError(f"task {name}: parameter {key}: unsupported runtime value {runtime}")
            elif "componentInputParameter" in spec:
                pipeline_key = spec["componentInputParameter"]
                if pipeline_key not in self.parameters:
                    raise ReplayError(f"task {name}: parameter {key} takes pipeline parameter {pipeline_key!r}, "
                                      "which has no value (pass it in parameters)")
                value = self.parameters[pipeline_key]
            elif "taskOutputParameter" in spec:
                source = spec["taskOutputParameter"]
                produced = self.results[source["producerTask"]].parameters
                if source["outputParameterKey"] not in produced:
                    raise ReplayError(f"task {name}: parameter {key}: task {source['producerTask']} produced "
                                      f"no output parameter {source['outputParameterKey']!r}")
                value = produced[source["outputParameterKey"]]
            else:
                raise ReplayError(f"task {name}: parameter {key}: unsupported input {sorted(spec)}")
            values[key] = (self.localize(_coerce(value, kind, f"task {name}: parameter {key}")), kind)
        return values

    def input_artifacts(self, name: str, task: dict[str, Any], component: dict[str, Any]) -> dict[str, list]:
        found = {}
        for key, spec in task.get("inputs", {}).get("artifacts", {}).items():
            if "taskOutputArtifact" not in spec:
                raise ReplayError(f"task {name}: artifact {key}: unsupported input {sorted(spec)}")
            source = spec["taskOutputArtifact"]
            found[key] = self.results[source["producerTask"]].artifacts.get(source["outputArtifactKey"], [])
        return found

    # --- tasks

    def run(self) -> dict[str, Any]:
        tasks = self.spec.get("root", {}).get("dag", {}).get("tasks", {})
        if not tasks:
            raise ReplayError(f"{self.compiled.path}: the pipeline has no tasks")
        order = task_order(tasks)
        for name in order:  # refuse what replay cannot do before anything runs
            task = tasks[name]
            for unsupported in ("triggerPolicy", "parameterIterator", "artifactIterator", "iteratorPolicy"):
                if task.get(unsupported) and (unsupported != "triggerPolicy" or task[unsupported].get("condition")):
                    raise ReplayError(f"task {name}: {unsupported} is not supported by replay")
            executor = self.executor(name, self.component(task))
            if not {"container", "resolver", "importer"} & set(executor):
                raise ReplayError(f"task {name}: executor kind {sorted(executor)} is not supported by replay")
            for query in executor.get("resolver", {}).get("outputArtifactQueries", {}).values():
                for clause in _split_and(query.get("filter", "")):
                    _clause(clause, query.get("filter", ""), lambda _: "")
        self.rows = [{"name": name, "kind": None, "status": "not run", "seconds": None, "log": None}
                     for name in order]
        os.makedirs(self.log_dir, exist_ok=True)
        for row in self.rows:
            name = row["name"]
            task = tasks[name]
            component = self.component(task)
            executor = self.executor(name, component)
            kind = next(k for k in ("container", "resolver", "importer") if k in executor)
            row["kind"] = kind
            self.on_task(name, {"event": "start", "kind": kind})
            started = time.monotonic()
            try:
                if kind == "container":
                    row["log"] = os.path.join(self.log_dir, f"{name}.log")
                    result = self.run_container(name, task, component, executor["container"], row["log"])
                    row["status"] = "ran"
                elif kind == "resolver":
                    result = self.run_resolver(name, task, component, executor["resolver"])
                    row["status"] = "resolved"
                else:
                    result = self.run_importer(name, task, component, executor["importer"])
                    row["status"] = "imported"
            except (TaskFailed, ReplayError) as exc:
                row["status"], row["seconds"] = "failed", round(time.monotonic() - started, 1)
                self.on_task(name, {"event": "end", **row, "error": str(exc)})
                summary = self.summary()
                self._write_summary(summary)
                if isinstance(exc, TaskFailed):
                    exc.summary = summary
                raise
            row["seconds"] = round(time.monotonic() - started, 1)
            row["outputs"] = {key: [record["uri"] for record in records] for key, records in result.artifacts.items()}
            self.results[name] = result
            self.on_task(name, {"event": "end", **row})
        summary = self.summary()
        self._write_summary(summary)
        return summary

    def run_container(self, name: str, task: dict[str, Any], component: dict[str, Any],
                      container: dict[str, Any], log: str) -> _TaskResult:
        task_dir = os.path.join(self.run_dir, name)
        os.makedirs(task_dir, exist_ok=True)
        parameters = self.input_parameters(name, task, component)
        inputs = self.input_artifacts(name, task, component)
        outputs = {}
        for key, definition in component.get("outputDefinitions", {}).get("artifacts", {}).items():
            outputs[key] = [{"name": self.artifact_name(name, key),
                             "schemaTitle": _title(definition.get("artifactType", {})),
                             "uri": os.path.join(task_dir, key), "metadata": {}}]
        output_parameters = {key: os.path.join(task_dir, "parameters", key)
                             for key in component.get("outputDefinitions", {}).get("parameters", {})}
        for path in output_parameters.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(log, "w", encoding="utf-8") as handle:
            handle.write(f"# tfxd replay {self.run_id}: task {name}\n")

        pre = container.get("lifecycle", {}).get("preCacheCheck")
        if pre:
            output_file = os.path.join(task_dir, "pre_cache_check_output.json")
            self._execute(name, pre, container, parameters, inputs, outputs, output_parameters, output_file,
                          task_dir, log, "preCacheCheck")
            driver = self._read_output(name, output_file, log, "preCacheCheck")
            for key, value in {**{k: _from_old_value(v) for k, v in driver.get("parameters", {}).items()},
                               **driver.get("parameterValues", {})}.items():
                kind = _kind_of(value)
                parameters[key] = (self.localize(value) if kind == "STRING" else value, kind)
            for key, listed in driver.get("artifacts", {}).items():
                given = listed.get("artifacts", [])
                if key in outputs and given:
                    outputs[key][0]["metadata"] = given[0].get("metadata", {})

        output_file = os.path.join(task_dir, "executor_output.json")
        self._execute(name, container, container, parameters, inputs, outputs, output_parameters, output_file,
                      task_dir, log, "main")
        written = self._read_output(name, output_file, log, "main")
        result = _TaskResult()
        for key, records in outputs.items():
            given = written.get("artifacts", {}).get(key, {}).get("artifacts")
            if given is None:
                given = [{k: v for k, v in record.items() if k != "schemaTitle"} for record in records]
            result.artifacts[key] = [
                self.index.add({"name": artifact.get("name") or self.artifact_name(name, f"{key}-{i}"),
                                "schemaTitle": records[0]["schemaTitle"], "uri": artifact.get("uri", ""),
                                "metadata": artifact.get("metadata", {}), "pipeline": self.compiled.name,
                                "run_id": self.run_id, "task": name, "key": key})
                for i, artifact in enumerate(given)]
        for key, path in output_parameters.items():
            values = {**{k: _from_old_value(v) for k, v in written.get("parameters", {}).items()},
                      **written.get("parameterValues", {})}
            if key in values:
                result.parameters[key] = values[key]
            elif os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    result.parameters[key] = handle.read()
        return result

    def _execute(self, name: str, spec: dict[str, Any], container: dict[str, Any], parameters: dict[str, Any],
                 inputs: dict[str, list], outputs: dict[str, list], output_parameters: dict[str, str],
                 output_file: str, task_dir: str, log: str, phase: str) -> None:
        executor_input = {
            "inputs": {
                "parameters": {key: _old_value(value, kind) for key, (value, kind) in parameters.items()},
                "parameterValues": {key: value for key, (value, _) in parameters.items()},
                "artifacts": {key: {"artifacts": [_runtime_artifact(r) for r in records]}
                              for key, records in inputs.items()},
            },
            "outputs": {
                "artifacts": {key: {"artifacts": [_runtime_artifact(r) for r in records]}
                              for key, records in outputs.items()},
                "parameters": {key: {"outputFile": path} for key, path in output_parameters.items()},
                "outputFile": output_file,
            },
        }
        input_path = os.path.join(task_dir, f"executor_input{'' if phase == 'main' else '_' + phase}.json")
        with open(input_path, "w", encoding="utf-8") as handle:
            json.dump(executor_input, handle, indent=1, sort_keys=True)
        if os.path.exists(output_file):
            os.remove(output_file)

        def lookup(expression: str) -> str | None:
            return self._placeholder(name, expression, executor_input, parameters, inputs, outputs,
                                     output_parameters, task_dir)

        command = [self.localize(part) for part in spec.get("command", [])]
        args = [self.localize(part) for part in spec.get("args", [])]
        if not command and not args:
            raise ReplayError(f"task {name}: the {phase} container has no command")
        tfx = any(entry in part for part in command for entry in _TFX_ENTRYPOINTS)
        if tfx and self.beam_in_memory:
            args = [arg for arg in args if not _is_runner_flag(arg)] + _IN_MEMORY_BEAM
        if tfx and "--executor_class_path" in args:
            at = args.index("--executor_class_path") + 1
            if at < len(args) and args[at] in _LOCAL_EXECUTORS:
                self.notes.append(f"{name}: {args[at]} replaced by {_LOCAL_EXECUTORS[args[at]]} (one local "
                                  "process instead of a Vertex custom job)")
                args[at] = _LOCAL_EXECUTORS[args[at]]
        argv = []
        for part in [*command, *args]:
            value = _substitute(part, lookup, f"task {name}")
            if value is None:
                raise ReplayError(f"task {name}: placeholder in {part!r} has no value")
            argv.append(value)
        if argv and os.path.basename(argv[0]) in ("python", "python3"):
            argv[0] = sys.executable
        env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([self.project_dir, *filter(None, [os.environ.get("PYTHONPATH")])])}
        for item in container.get("env", []):
            env[item["name"]] = self.localize(item.get("value", ""))
        shown = [arg if len(arg) < 300 else f"<{len(arg)} characters: {input_path}>" for arg in argv]
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"# {phase}: {' '.join(shown)}\n")
            handle.flush()
            try:
                process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=self.project_dir,
                                           env=env)
            except OSError as exc:
                raise TaskFailed(name, f"cannot start {argv[0]}: {exc.strerror}", log) from exc
            try:
                code = process.wait()
            except BaseException:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                raise
        if code != 0:
            what = "" if phase == "main" else f" (its {phase} container)"
            raise TaskFailed(name, f"exit code {code}{what}: {_reason(log)}", log, exit_code=code)

    def _read_output(self, name: str, path: str, log: str, phase: str) -> dict[str, Any]:
        if not os.path.exists(path):
            if phase == "main":
                return {}
            raise TaskFailed(name, f"its {phase} container wrote no output metadata ({path})", log, exit_code=0)
        with open(path, encoding="utf-8") as handle:
            try:
                return json.load(handle)
            except json.JSONDecodeError as exc:
                raise TaskFailed(name, f"its output metadata {path} is not JSON: {exc}", log, exit_code=0) from exc

    def _placeholder(self, name: str, expression: str, executor_input: dict[str, Any], parameters: dict[str, Any],
                     inputs: dict[str, list], outputs: dict[str, list], output_parameters: dict[str, str],
                     task_dir: str) -> str:
        """The launcher's `{{$...}}` placeholders."""
        if expression == "":
            return json.dumps(executor_input, sort_keys=True)
        simple = {".pipeline_job_name": self.compiled.name, ".pipeline_job_uuid": self.run_id,
                  ".pipeline_job_resource_name": f"{self.compiled.name}/{self.run_id}",
                  ".pipeline_task_name": name, ".pipeline_task_uuid": f"{self.run_id}-{name}",
                  ".pipeline_root": self.root, ".outputs.output_file": executor_input["outputs"]["outputFile"]}
        if expression in simple:
            return simple[expression]
        key = r"\[['\"]([^'\"]+)['\"]\]"
        if match := re.fullmatch(rf"\.inputs\.parameters{key}", expression):
            if match.group(1) in parameters:
                value = parameters[match.group(1)][0]
                return value if isinstance(value, str) else json.dumps(value)
        elif match := re.fullmatch(rf"\.(inputs|outputs)\.artifacts{key}\.(uri|value|metadata{key})", expression):
            records = (inputs if match.group(1) == "inputs" else outputs).get(match.group(2)) or []
            if records:
                record = records[0]
                if match.group(3) == "uri":
                    return record["uri"]
                if match.group(3) == "value":
                    path = os.path.join(record["uri"], "value") if os.path.isdir(record["uri"]) else record["uri"]
                    with open(path, encoding="utf-8") as handle:
                        return handle.read()
                value = record.get("metadata", {}).get(match.group(4))
                return None if value is None else value if isinstance(value, str) else json.dumps(value)
        elif (match := re.fullmatch(rf"\.outputs\.parameters{key}\.output_file", expression)) and (
                match.group(1) in output_parameters):
            return output_parameters[match.group(1)]
        raise ReplayError(f"task {name}: unsupported placeholder {{{{${expression}}}}}")

    def run_resolver(self, name: str, task: dict[str, Any], component: dict[str, Any],
                     resolver: dict[str, Any]) -> _TaskResult:
        inputs = self.input_artifacts(name, task, component)

        def lookup(expression: str) -> str | None:
            match = re.fullmatch(r"\.inputs\.artifacts\[['\"]([^'\"]+)['\"]\]\.(uri|metadata\[['\"]([^'\"]+)['\"]\])",
                                 expression)
            if not match:
                raise ReplayError(f"task {name}: unsupported placeholder {{{{${expression}}}}} in a resolver filter")
            records = inputs.get(match.group(1)) or []
            if not records:
                return None
            value = records[0]["uri"] if match.group(2) == "uri" else records[0].get("metadata", {}).get(match.group(3))
            return None if value is None else str(value)

        result = _TaskResult()
        for key, query in resolver.get("outputArtifactQueries", {}).items():
            found = self.index.query(self.compiled.name, query.get("filter", ""), lookup)
            result.artifacts[key] = found[:1]  # the latest, as Vertex resolves TFX's queries
        return result

    def run_importer(self, name: str, task: dict[str, Any], component: dict[str, Any],
                     importer: dict[str, Any]) -> _TaskResult:
        parameters = self.input_parameters(name, task, component)
        source = importer.get("artifactUri", {})
        if "runtimeParameter" in source:
            uri = parameters.get(source["runtimeParameter"], (None,))[0]
        else:
            uri = _from_old_value(source["constantValue"]) if "constantValue" in source else source.get("constant")
        if not isinstance(uri, str) or not uri:
            raise ReplayError(f"task {name}: the importer has no artifact URI")
        uri = self.localize(uri)
        title = _title(importer.get("typeSchema", {}))
        keys = list(component.get("outputDefinitions", {}).get("artifacts", {})) or ["artifact"]
        existing = None if importer.get("reimport") else self.index.find(
            uri=uri, schemaTitle=title, pipeline=self.compiled.name)
        record = existing or self.index.add({
            "name": self.artifact_name(name, keys[0]), "schemaTitle": title, "uri": uri,
            "metadata": self.localize(importer.get("metadata", {})), "pipeline": self.compiled.name,
            "run_id": self.run_id, "task": name, "key": keys[0]})
        return _TaskResult(artifacts={keys[0]: [record]})

    # --- the summary

    def produced(self, title: str) -> dict[str, Any] | None:
        """The artifact of this type that this run's container tasks produced last."""
        found = None
        for row in self.rows:
            if row["kind"] != "container" or row["status"] != "ran":
                continue
            for records in self.results[row["name"]].artifacts.values():
                for record in records:
                    if record["schemaTitle"] == title:
                        found = record
        return found

    def summary(self) -> dict[str, Any]:
        blessing = self.produced("tfx.ModelBlessing")
        evaluation = self.produced("tfx.ModelEvaluation")
        pushed = self.produced("tfx.PushedModel")
        model = blessing and blessing.get("metadata", {})
        push = pushed and pushed.get("metadata", {})
        destination = push.get("pushed_destination") if push else None
        return {
            "pipeline": self.compiled.name,
            "run_id": self.run_id,
            "file": os.path.abspath(self.compiled.path),
            "format": self.compiled.kind,
            "root": self.root,
            "run_dir": self.run_dir,
            "logs": self.log_dir,
            "parameters": self.parameters,
            "beam": _IN_MEMORY_BEAM if self.beam_in_memory else "as compiled",
            "tasks": self.rows,
            "status": "failed" if any(row["status"] == "failed" for row in self.rows) else (
                "ok" if all(row["status"] != "not run" for row in self.rows) else "not run"),
            "artifacts": {f"{row['name']}.{key}": uris[0] for row in self.rows if row["kind"] != "resolver"
                          for key, uris in (row.get("outputs") or {}).items() if uris},
            "evaluation": evaluation["uri"] if evaluation else None,
            "blessed": None if not model else bool(model.get("blessed")),
            "model": model.get("current_model") if model else None,
            "baseline": model.get("baseline_model") if model else None,
            "pushed": None if not push else bool(push.get("pushed")),
            "pushed_destination": destination,
            "pushed_destination_on_cluster": self.localize.on_cluster(destination),
            "pipeline_root_on_cluster": self.compiled.pipeline_root,
            "buckets": dict(sorted(self.localize.seen.items())),
            "notes": self.notes,
        }

    def _write_summary(self, summary: dict[str, Any]) -> None:
        write_json(os.path.join(self.run_dir, "summary.json"), summary, sort_keys=True, default=str)


def _is_runner_flag(arg: str) -> bool:
    match = re.fullmatch(r"--([\w-]+)(=.*)?", arg)
    return bool(match) and match.group(1) in _RUNNER_FLAGS


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Found|Failed|Exit)): (.+)")


def _reason(log: str) -> str:
    """The last `SomeError: message` line of a log (the root cause under Beam's and TF's wrapping)."""
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return "see its log"
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()):
            text = line.strip()
            return text if len(text) < 1000 else text[:1000] + " ..."
    tail = [line for line in lines[-3:] if line.strip()]
    return tail[-1].strip()[:1000] if tail else "see its log"


def pipeline_parameters(compiled: Compiled, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pipeline's parameter values: the runtime config's (Vertex) or the defaults (KFP), then
    ``overrides``; each coerced to its declared type."""
    definitions = compiled.spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    values: dict[str, Any] = {}
    for key, definition in definitions.items():
        if "defaultValue" in definition:
            values[key] = definition["defaultValue"]
    for key, value in (compiled.runtime_config.get("parameters") or {}).items():
        values[key] = _from_old_value(value) if isinstance(value, dict) else value
    values.update(compiled.runtime_config.get("parameterValues") or {})
    unknown = sorted(set(overrides or {}) - set(definitions))
    if unknown:
        known = ", ".join(sorted(definitions)) or "none"
        raise ReplayError(f"unknown pipeline parameter {', '.join(map(repr, unknown))} (the pipeline's: {known})")
    values.update(overrides or {})
    return {key: _coerce(value, _declared_type(definitions.get(key)), f"pipeline parameter {key}")
            for key, value in values.items()}


def new_run_id() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")


def replay(compiled_path: str, *, project_dir: str, root: str, parameters: dict[str, Any] | None = None,
           on_task: TaskCallback | None = None, log_dir: str | None = None, run_id: str | None = None,
           beam_in_memory: bool = True) -> dict[str, Any]:
    """Execute the compiled pipeline at ``compiled_path`` here, task by task.

    ``project_dir`` stands for the image's project (/tfxd/project): the folder of the spec it was compiled
    from. Artifacts go to `<root>/<run id>/<task>/<output key>`, task logs to ``log_dir`` (default
    `<root>/<run id>/logs`), bucket paths to `<root>/bucket/<bucket>/...`; `<root>/artifacts.json` indexes
    the artifacts of every replay under ``root`` for the resolvers. ``parameters`` override the pipeline's
    runtime parameters (e.g. ``{"train_args": '{"numSteps": 100}'}``). ``on_task(name, event)`` is called
    with ``{"event": "start", "kind": ...}`` and ``{"event": "end", "status": ..., "seconds": ..., "log":
    ..., "outputs": ...}`` (plus ``"error"`` when it failed).

    Returns the summary (also written to `<root>/<run id>/summary.json`); a failed task raises TaskFailed
    (task, exit code, log; ``.summary`` has the replay up to there), a file replay cannot run ReplayError.
    """
    compiled = load_compiled(compiled_path)
    values = pipeline_parameters(compiled, parameters)
    project_dir = os.path.abspath(project_dir)
    if not os.path.isdir(project_dir):
        raise ReplayError(f"project folder {project_dir} does not exist")
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    run_id = run_id or new_run_id()
    if os.path.exists(os.path.join(root, run_id)):
        raise ReplayError(f"run {run_id} already exists under {root}")
    log_dir = os.path.abspath(log_dir) if log_dir else os.path.join(root, run_id, "logs")
    return _Replay(compiled, project_dir, root, run_id, log_dir, values, beam_in_memory, on_task).run()
