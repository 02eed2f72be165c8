"""`tfxd replay FILE`: a compiled spec (Vertex PipelineJob JSON or KFP v2 PipelineSpec YAML) executed here,
task by task, the way the KFP v2 launcher / Vertex Pipelines executes it, with the local install in place
of the pipeline image. What a user (and the test suite) runs to know a compiled file works before it
reaches a cluster.

- Tasks run in dependency order (`dependentTasks` and the producers their inputs name). A container
  task runs as the KFP v2 launcher runs it (launcher.py), its output going to
  `<root>/<run id>/logs/<task>.log`.
- The image's project (tfxd.keys.IMAGE_PROJECT_DIR) is ``project_dir``; a bucket path
  (`gs://B/P`, `s3://B/P`) in a parameter or an argument is `<root>/bucket/B/P`: nothing is written to
  a bucket (the Pusher's destination included).
- Every output artifact of a finished task is recorded in `<root>/artifacts.json` (artifacts.py):
  resolver tasks (TFX's latest-blessed-model queries) are answered from it, newest first, as Vertex
  answers them from ML Metadata; importer tasks add to it.
- Beam: by default the compiled Beam flags are replaced by the direct runner in memory with one worker
  (``beam_in_memory``): the data is local and small, one process needs no worker start-up per task,
  and it is what `tfxd run --set beam.workers=1` does. ``beam_in_memory=False`` keeps the compiled
  flags (a direct runner with a process per CPU, as in the container); where they submit to a Flink or
  Spark job server in the cluster, an embedded one started here (pipeline/run/beam_engine.py) stands
  for it, with its own SDK worker pool for the pools beside the cluster's TaskManagers.
- A task's `triggerPolicy.condition` is evaluated as the open-source backend's driver evaluates it
  (conditions.py): false skips the task, and the tasks that consume its outputs are omitted, as Argo
  omits them; the replay still succeeds. With spans and nothing new, that is every task after ExampleGen.
- No caching: every task runs on every replay.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

from tfxd import keys, stops, training_report
from tfxd.beam_engines import ENGINES, Engine
from tfxd.beam_engines import problems as engine_problems
from tfxd.direct_runner import direct_args
from tfxd.files import write_json
from tfxd.kubeflow.replay.artifacts import (
    ArtifactIndex,
    Localizer,
    clause,
    split_and,
    writes_to_buckets,
)
from tfxd.kubeflow.replay.conditions import Condition, ConditionError
from tfxd.kubeflow.replay.ir import (
    Compiled,
    ReplayError,
    from_old_value,
    load_compiled,
    pipeline_parameters,
    producers,
    read_dag,
    title,
)
from tfxd.kubeflow.replay.launcher import Launcher, Replay, TaskFailed, TaskResult
from tfxd.kubeflow.replay.task_inputs import TaskInputs
from tfxd.pipeline.assembly import beam_args
from tfxd.pipeline.run import beam_engine
from tfxd.pipeline.run.outcome import GateStop, gate_stop, new_run_id, with_gate_stop
from tfxd.run_summary import ReplayRun, run_status
from tfxd.training_report import TrainingReport

TaskCallback = Callable[[str, dict[str, Any]], None]


class _Tasks:
    """The tasks of one replay, in order: containers through the launcher, resolvers and importers here."""

    def __init__(self, replay: Replay, on_task: TaskCallback | None) -> None:
        self.replay = replay
        self.spec = replay.compiled.spec
        self.on_task = on_task or (lambda name, event: None)
        self.localize = Localizer(replay.project_dir, replay.root, keep_buckets=replay.on_buckets)
        self.index = ArtifactIndex(replay.root)
        self.launcher = Launcher(replay, self.localize, self.index)
        self.results: dict[str, TaskResult] = {}
        self.rows: list[dict[str, Any]] = []
        self.conditions: dict[str, Condition] = {}  # task -> its trigger policy's condition
        self.interrupted: str | None = None  # the signal that stopped the replay (tfxd.stops)
        self.stopped: GateStop | None = None  # the verdict of the validation gate that stopped it
        self.dag = read_dag(self.spec)  # a file replay cannot run is refused here, before anything runs
        self.inputs = TaskInputs(replay, self.localize, self.dag, self.results)

    # --- helpers over the spec

    def component(self, task: dict[str, Any]) -> dict[str, Any]:
        name = task.get("componentRef", {}).get("name")
        component = self.spec.get("components", {}).get(name)
        if component is None:
            raise ReplayError(f"task {task.get('taskInfo', {}).get('name')}: no component {name!r}")
        return component

    def executor(self, task_name: str, component: dict[str, Any]) -> dict[str, Any]:
        if "dag" in component:
            raise ReplayError(f"task {task_name}: a sub-DAG within a sub-DAG is not replayed")
        label = component.get("executorLabel")
        executor = self.spec.get("deploymentSpec", {}).get("executors", {}).get(label)
        if executor is None:
            raise ReplayError(f"task {task_name}: no executor {label!r} in deploymentSpec")
        return executor

    # --- tasks

    def run(self) -> dict[str, Any]:
        """Every task in dependency order, once every task was checked: a file replay cannot run is
        refused before anything runs, not halfway through. The summary, also written."""
        tasks, order = self.dag.tasks, self.dag.order
        if not tasks:
            raise ReplayError(f"{self.replay.compiled.path}: the pipeline has no tasks")
        self.refuse_unsupported(tasks, order)
        self.rows = [{"name": name, "kind": None, "status": "not run", "seconds": None, "log": None} for name in order]
        os.makedirs(self.replay.log_dir, exist_ok=True)
        self.run_tasks(tasks)
        return self._write_summary(self.summary())

    def refuse_unsupported(self, tasks: dict[str, Any], order: list[str]) -> None:
        """A ReplayError for what replay cannot run as the backend would: iterators, an executor of
        another kind, a resolver where the target's backend runs none. Trigger conditions and resolver
        queries are parsed here, so that a malformed one is refused too."""
        for name in order:
            task = tasks[name]
            for unsupported in ("parameterIterator", "artifactIterator", "iteratorPolicy"):
                if task.get(unsupported):
                    raise ReplayError(f"task {name}: {unsupported} is not supported by replay")
            policy = task.get("triggerPolicy") or {}
            if policy.get("condition"):
                try:
                    self.conditions[name] = Condition(policy["condition"])
                except ConditionError as exc:
                    raise ReplayError(f"task {name}: {exc}") from None
            for key, parameter in task.get("inputs", {}).get("parameters", {}).items():
                if "componentInputParameter" in parameter:  # a nested task's must be handed on
                    self.inputs.pipeline_key(name, key, parameter["componentInputParameter"])
            executor = self.executor(name, self.component(task))
            if not {"container", "resolver", "importer"} & set(executor):
                raise ReplayError(f"task {name}: executor kind {sorted(executor)} is not supported by replay")
            if not self.replay.compiled.target.RUNS_RESOLVERS and "resolver" in executor:
                raise ReplayError(f"task {name} is a resolver, and the open-source Kubeflow Pipelines backend "
                                  "runs container and importer executors only (its compiler, kubeflow/pipelines "
                                  "backend/src/v2/compiler, refuses the run); a resolver runs on Vertex AI. "
                                  "Compile the spec again with this tfxd: it finds the baseline with a task")
            for query in executor.get("resolver", {}).get("outputArtifactQueries", {}).values():
                for part in split_and(query.get("filter", "")):
                    clause(part, query.get("filter", ""), lambda _: "")

    def run_tasks(self, tasks: dict[str, Any]) -> None:
        """The pipeline's tasks, then its exit tasks, which run whatever the others' end but a stop (a
        cancelled run ends without them)."""
        exits = [row for row in self.rows if row["name"] in self.dag.exit_tasks]
        try:
            self.run_rows([row for row in self.rows if row["name"] not in self.dag.exit_tasks], tasks)
        except (TaskFailed, ReplayError) as exc:
            with contextlib.suppress(TaskFailed, ReplayError):  # the first failure is the run's
                self.run_rows(exits, tasks)
            if isinstance(exc, TaskFailed) and exits:
                exc.summary = self._write_summary(self.summary())
            raise
        self.run_rows(exits, tasks)

    def run_rows(self, rows: list[dict[str, Any]], tasks: dict[str, Any]) -> None:
        """The rows' tasks in order, each row filled in as its task goes: skipped when it is not triggered,
        else executed. A stop or a failure writes the summary so far (a stopped task's partial outputs
        removed; a validation gate's verdict) before it is raised, so that what ran is on record."""
        for row in rows:
            name = row["name"]
            task = tasks[name]
            component = self.component(task)
            executor = self.executor(name, component)
            kind = next(k for k in ("container", "resolver", "importer") if k in executor)
            row["kind"] = kind
            self.on_task(name, {"event": "start", "kind": kind})
            started = time.monotonic()
            try:
                why = self.not_triggered(name, task, component)
                if why:
                    row["status"], row["seconds"], row["why"] = "skipped", 0.0, why
                    self.on_task(name, {"event": "end", **row})
                    continue
                result = self.execute(row, task, component, executor)
            except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (tfxd.stops): the task was stopped
                row["status"], row["seconds"] = "interrupted", round(time.monotonic() - started, 1)
                self.replay.remove_outputs(name)
                self.interrupted = stops.name(getattr(exc, "signum", None))
                self._write_summary(self.summary())
                raise
            except (TaskFailed, ReplayError) as exc:
                row["status"], row["seconds"] = "failed", round(time.monotonic() - started, 1)
                self.stopped = self.stopped or gate_stop(row.get("log"))
                self.on_task(name, {"event": "end", **row, "error": str(exc)})
                summary = self._write_summary(self.summary())
                if isinstance(exc, TaskFailed):
                    exc.summary = summary
                raise
            row["seconds"] = round(time.monotonic() - started, 1)
            row["outputs"] = {key: [record["uri"] for record in records] for key, records in result.artifacts.items()}
            self.results[name] = result
            self.on_task(name, {"event": "end", **row})

    def execute(self, row: dict[str, Any], task: dict[str, Any], component: dict[str, Any],
                executor: dict[str, Any]) -> TaskResult:
        """A triggered task, run by its executor's kind as the launcher, Vertex's resolver or the importer
        runs it; its row says what was done (and where a container's log is)."""
        name = row["name"]
        if row["kind"] == "container":
            row["log"] = os.path.join(self.replay.log_dir, f"{name}.log")
            result = self.launcher.run(name, component, executor["container"],
                                       self.inputs.parameters(name, task, component),
                                       self.inputs.artifacts(name, task, component), row["log"])
            row["status"] = "ran"
        elif row["kind"] == "resolver":
            result = self.run_resolver(name, task, component, executor["resolver"])
            row["status"] = "resolved"
        else:
            result = self.run_importer(name, task, component, executor["importer"])
            row["status"] = "imported"
        return result

    def not_triggered(self, name: str, task: dict[str, Any], component: dict[str, Any]) -> str | None:
        """Why the task does not run, or None: a task it depends on was skipped (Argo omits it), or its
        condition is false (the driver skips its executor); a condition that fails to evaluate fails the
        task, as it fails the driver (conditions.py)."""
        skipped = sorted(row["name"] for row in self.rows if row["status"] == "skipped"
                         and row["name"] in producers(task))
        if skipped:
            return f"omitted: it depends on {', '.join(skipped)}, which did not run"
        condition = self.conditions.get(name)
        if condition is None:
            return None
        try:
            triggered = condition.evaluate(self.inputs.artifacts(name, task, component))
        except ConditionError as exc:
            raise TaskFailed(name, f"its driver failed: {exc}", self.replay.log_dir) from None
        return None if triggered else f"its condition is false: {condition.text}"

    def run_resolver(self, name: str, task: dict[str, Any], component: dict[str, Any],
                     resolver: dict[str, Any]) -> TaskResult:
        inputs = self.inputs.artifacts(name, task, component)

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

        result = TaskResult()
        for key, query in resolver.get("outputArtifactQueries", {}).items():
            found = self.index.query(self.replay.compiled.name, query.get("filter", ""), lookup)
            result.artifacts[key] = found[:1]  # the latest, as Vertex resolves TFX's queries
        return result

    def run_importer(self, name: str, task: dict[str, Any], component: dict[str, Any],
                     importer: dict[str, Any]) -> TaskResult:
        parameters = self.inputs.parameters(name, task, component)
        source = importer.get("artifactUri", {})
        if "runtimeParameter" in source:
            uri = parameters.get(source["runtimeParameter"], (None,))[0]
        else:
            uri = from_old_value(source["constantValue"]) if "constantValue" in source else source.get("constant")
        if not isinstance(uri, str) or not uri:
            raise ReplayError(f"task {name}: the importer has no artifact URI")
        uri = self.localize(uri)
        schema_title = title(importer.get("typeSchema", {}))
        keys = list(component.get("outputDefinitions", {}).get("artifacts", {})) or ["artifact"]
        existing = None if importer.get("reimport") else self.index.find(
            uri=uri, schemaTitle=schema_title, pipeline=self.replay.compiled.name)
        record = existing or self.index.add({
            "name": self.launcher.artifact_name(name, keys[0]), "schemaTitle": schema_title, "uri": uri,
            "metadata": self.localize(importer.get("metadata", {})), "pipeline": self.replay.compiled.name,
            "run_id": self.replay.run_id, "task": name, "key": keys[0]})
        return TaskResult(artifacts={keys[0]: [record]})

    # --- the summary

    def produced(self, schema_title: str) -> dict[str, Any] | None:
        """The artifact of this type that this run's container tasks produced last."""
        found = None
        for row in self.rows:
            if row["kind"] != "container" or row["status"] != "ran":
                continue
            for records in self.results[row["name"]].artifacts.values():
                for record in records:
                    if record["schemaTitle"] == schema_title:
                        found = record
        return found

    def summary(self) -> ReplayRun:
        blessing = self.produced("tfx.ModelBlessing")
        evaluation = self.produced("tfx.ModelEvaluation")
        pushed = self.produced("tfx.PushedModel")
        model = blessing and blessing.get("metadata", {})
        push = pushed and pushed.get("metadata", {})
        destination = push.get("pushed_destination") if push else None
        trained = self._training_report()
        statuses = {row["status"] for row in self.rows}
        nothing_new, stopped = self._no_new_data(), self.stopped
        gates = with_gate_stop(self._gates(), stopped)
        return ReplayRun(
            pipeline=self.replay.compiled.name, run_id=self.replay.run_id,
            status=run_status(interrupted=bool(self.interrupted), failed="failed" in statuses,
                              not_run="not run" in statuses, skipped=nothing_new is not None,
                              stopped=stopped is not None),
            reason=stopped.message if stopped else nothing_new, signal=self.interrupted or None,
            stopped_by=stopped.gate if stopped else None,
            file=os.path.abspath(self.replay.compiled.path), format=self.replay.compiled.kind, root=self.replay.root,
            run_dir=self.replay.run_dir, logs=self.replay.log_dir, parameters=self.replay.parameters,
            beam=direct_args("in_memory", 1) if self.replay.beam_in_memory else
            f"as compiled, on {self.replay.engine.engine.title} here" if self.replay.engine else "as compiled",
            tasks=self.rows, examples=self._examples(),
            artifacts={f"{row['name']}.{key}": uris[0] for row in self.rows if row["kind"] != "resolver"
                       for key, uris in (row.get("outputs") or {}).items() if uris},
            evaluation=evaluation["uri"] if evaluation else None,
            blessed=None if not model else bool(model.get("blessed")),
            model=model.get("current_model") if model else None, baseline=model.get("baseline_model") if model else None,
            pushed=None if not push else bool(push.get("pushed")), pushed_destination=destination,
            pushed_destination_on_cluster=destination if self.replay.on_buckets else self.localize.on_cluster(destination),
            pipeline_root_on_cluster=self.replay.compiled.pipeline_root,
            buckets=dict(sorted(self.localize.seen.items())), strategy=trained.plan.to_json() if trained else None,
            warm_start=trained.warm_start if trained else None, drift=gates.get("drift"), skew=gates.get("skew"),
            notes=self.launcher.notes)

    def _example_metadata(self) -> dict[str, Any]:
        made = self.results.get("ExampleGen")
        records = made.artifacts.get("examples") if made else None
        return records[0].get("metadata", {}) if records else {}

    def _examples(self) -> dict[str, Any]:
        """The spans ExampleGen read (with spans in data.path) and the day, as in a local run's summary."""
        metadata = self._example_metadata()
        return {name: json.loads(metadata[key]) for name, key in (("spans", keys.SPANS_PROPERTY),
                                                                   ("span_day", keys.SPAN_DAY_PROPERTY))
                if metadata.get(key)}

    def _no_new_data(self) -> str | None:
        """ExampleGen's reason for reading nothing (data.on_no_new_data: skip), when the tasks after it
        were skipped by their condition."""
        if not any(row["status"] == "skipped" for row in self.rows):
            return None
        return self._example_metadata().get(keys.NO_NEW_DATA_PROPERTY) or None

    def _training_report(self) -> TrainingReport | None:
        """What the Trainer's chief wrote next to the model (keys.TRAINING_REPORT_FILE): plan, warm start."""
        trained = self.results.get("Trainer")  # the baseline task produces a Model too
        models = trained.artifacts.get("model") if trained else None
        return training_report.read(models[0]["uri"]) if models else None

    def _gates(self) -> dict[str, Any]:
        """ExampleValidator's drift and skew records (validation.drift, validation.skew), as locally."""
        validated = self.results.get("ExampleValidator")
        records = validated.artifacts.get("anomalies") if validated else None
        metadata = records[0].get("metadata", {}) if records else {}
        return {name: json.loads(metadata[key]) for name, key in (("drift", keys.DRIFT_PROPERTY),
                                                                   ("skew", keys.SKEW_PROPERTY)) if key in metadata}

    def _write_summary(self, summary: ReplayRun) -> dict[str, Any]:
        """summary.json in the run's folder; what it holds (replay() returns it)."""
        data = summary.to_json()
        write_json(os.path.join(self.replay.run_dir, "summary.json"), data, sort_keys=True, default=str)
        return data


def replay(compiled_path: str, *, project_dir: str, root: str, parameters: dict[str, Any] | None = None,
           on_task: TaskCallback | None = None, run_id: str | None = None,
           beam_in_memory: bool = True, schedule_time: str | None = None) -> dict[str, Any]:
    """Execute the compiled pipeline at ``compiled_path`` here, task by task.

    ``project_dir`` stands for the image's project (/tfxd/project): the folder of the spec it was compiled
    from. Artifacts go to `<root>/<run id>/<task>/<output key>`, task logs to `<root>/<run id>/logs`,
    bucket paths to `<root>/bucket/<bucket>/...`; `<root>/artifacts.json` indexes
    the artifacts of every replay under ``root`` for the resolvers. ``schedule_time`` (RFC 3339) replays a run
    a schedule started at that time; without it, a run started by hand. ``parameters`` override the pipeline's
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
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    engine = None if beam_in_memory else _compiled_engine(compiled)
    with contextlib.ExitStack() as stack:
        running = stack.enter_context(beam_engine.running(engine[0], None, engine[1],
                                                          os.path.join(root, run_id, "logs"))) if engine else None
        tasks = _Tasks(Replay(compiled, project_dir, root, run_id, values, beam_in_memory, created, schedule_time,
                              running, on_buckets=writes_to_buckets(compiled)), on_task)
        try:
            return tasks.run()
        finally:
            tasks.launcher.close()


def _compiled_engine(compiled: Compiled) -> tuple[Engine, int] | None:
    """Flink or Spark, where the file's Beam steps submit to one: an embedded one here stands for the
    cluster's, with the compiled parallelism (else one per CPU), or the reason it cannot start."""
    for executor in compiled.spec.get("deploymentSpec", {}).get("executors", {}).values():
        found = beam_args.compiled_engine(executor.get("container", {}).get("args", []))
        if found:
            engine = ENGINES[found[0]]
            problems = engine_problems(engine)
            if problems:
                raise ReplayError(f"the file's Beam steps run on {engine.title}, and it cannot start here: "
                                  + "; ".join(f"{what} ({fix})" for what, fix in problems))
            return engine, found[1] or os.cpu_count() or 1
    return None
