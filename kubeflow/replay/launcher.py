"""One container task, run here the way the KFP v2 launcher runs it in its pod: the ExecutorInput JSON
(input parameters, input artifacts as their producers' output metadata gave them, output artifacts
with local URIs, `outputFile`) in place of `{{$}}`, then the main container; what the task wrote into
its output metadata becomes its outputs, recorded in the artifact index. A Vertex file's
`lifecycle.preCacheCheck` (TFX's file-based driver) runs first, as Vertex runs it; a Kubeflow file's is
not run, as the open-source backend does not run it.

The command runs with this interpreter, PYTHONPATH starting with the project (as in the image), the
environment of this process (tfxd's own: TF_USE_LEGACY_KERAS=1) and the container's `env`, its
output going to the task's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfxd import keys
from tfxd.files import join, remove
from tfxd.kubeflow.replay import forked_tasks
from tfxd.kubeflow.replay.artifacts import ArtifactIndex, Localizer, runtime_artifact
from tfxd.kubeflow.replay.forked_tasks import container_temp
from tfxd.kubeflow.replay.ir import (
    Compiled,
    ReplayError,
    from_old_value,
    kind_of,
    old_value,
    substitute,
    title,
)
from tfxd.pipeline.assembly import beam_args
from tfxd.pipeline.run.outcome import RunFailed, root_cause, shortened

if TYPE_CHECKING:  # start-up: the operators' and Vertex's stand-ins, and the engines, load only for a task that needs them
    from tfxd.kubeflow.replay.local_operators import LocalOperators
    from tfxd.kubeflow.replay.vertex_jobs import VertexJobs
    from tfxd.pipeline.run.beam_engine import RunningEngine

NAME_PREFIX = "tfxd-replay"
_TFX_ENTRYPOINTS = (*forked_tasks.MODULES, "kubeflow_v2_run_executor")  # tfxd's entry point, TFX's ExampleGen driver
# The Vertex custom-job Trainer runs as it is, against a local stand-in of Vertex's JobService (vertex_jobs.py).
_VERTEX_EXECUTOR = keys.VERTEX_JOB_EXECUTOR
# The operator job's Trainer runs as it is, against local operators (local_operators.py).
_OPERATOR_EXECUTOR = keys.OPERATOR_JOB_EXECUTOR
REPLAY_NAMESPACE = "tfxd-replay"
JOB_CREATE_TIME = "{{$.pipeline_job_create_time_utc}}"  # kfp.dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER
JOB_SCHEDULE_TIME = "{{$.pipeline_job_schedule_time_utc}}"  # kfp.dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER


class TaskFailed(RunFailed):
    """A task failed: names it, its exit code and its log; ``summary`` is the replay up to there."""

    def __init__(self, task: str, reason: str, log: str, exit_code: int | None = None,
                 summary: dict[str, Any] | None = None) -> None:
        super().__init__(task, reason, log)
        self.task = task
        self.exit_code = exit_code
        self.summary = summary or {}


@dataclass
class TaskResult:
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # output key -> records
    parameters: dict[str, Any] = field(default_factory=dict)  # output key -> value


@dataclass(frozen=True)
class Replay:
    """One replay: the compiled file, the folder standing for the image's project, the root its files go
    under, its id, the pipeline's parameter values, whether Beam runs in memory, when it was created and
    the time a schedule would have started it (None: started by hand)."""

    compiled: Compiled
    project_dir: str
    root: str
    run_id: str
    parameters: dict[str, Any]
    beam_in_memory: bool
    created: str = ""  # RFC 3339, UTC
    schedule_time: str | None = None
    engine: RunningEngine | None = None  # Flink or Spark started here for Beam as compiled
    on_buckets: bool = False  # artifacts on the compiled pipeline root's bucket, as on the cluster (runner.py)
    task_folders: dict[str, str] = field(default_factory=dict)  # task -> its outputs' folder, as its service names it

    def job_placeholder(self, constant: Any) -> Any:
        """A task input's constant as the engine hands it on: the job's creation time and, in a scheduled
        run, its schedule time, where the constant is exactly that placeholder (as Vertex and KFP 2.17+
        fill them); a run started by hand leaves the schedule time unfilled, as KFP before 2.17 always does."""
        if constant == JOB_CREATE_TIME:
            return self.created
        if constant == JOB_SCHEDULE_TIME and self.schedule_time is not None:
            return self.schedule_time
        return constant

    @property
    def run_dir(self) -> str:
        return os.path.join(self.root, self.run_id)

    @property
    def log_dir(self) -> str:
        return os.path.join(self.run_dir, "logs")

    @property
    def artifact_root(self) -> str:
        """Where the tasks' output artifacts go: `<pipeline root>/<pipeline>/<run id>` on the bucket the file
        names, or the run's local folder."""
        root = self.compiled.pipeline_root
        return join(root, self.compiled.name, self.run_id) if self.on_buckets and root else self.run_dir

    def task_folder(self, task: str) -> str:
        """Where ``task``'s output artifacts go: a folder of the run's artifact root named as the compiled
        file's service names one execution's (cluster_target.task_folder)."""
        if task not in self.task_folders:
            self.task_folders[task] = self.compiled.target.task_folder(task)
        return join(self.artifact_root, self.task_folders[task])

    def remove_outputs(self, task: str) -> None:
        """A stopped task's partial outputs: its local folder, and its artifacts (on the bucket)."""
        shutil.rmtree(os.path.join(self.run_dir, task), ignore_errors=True)
        if task in self.task_folders:
            with contextlib.suppress(Exception):  # a stop goes on; what is left is never recorded
                remove(self.task_folder(task))


@dataclass
class TaskIO:
    """What the launcher hands one task: its parameters ({key: (value, kind)}), input and output
    artifacts ({key: [records]}), the files its output parameters go to, its folder and its log."""

    name: str
    parameters: dict[str, tuple[Any, str]]
    inputs: dict[str, list[dict[str, Any]]]
    outputs: dict[str, list[dict[str, Any]]]
    output_parameters: dict[str, str]
    task_dir: str
    log: str


class Launcher:
    """Runs the container tasks of one replay; records their outputs in ``index``."""

    def __init__(self, replay: Replay, localize: Localizer, index: ArtifactIndex) -> None:
        self.replay = replay
        self.pipeline = replay.compiled.name
        self.localize = localize
        self.index = index
        self.notes: list[str] = []
        self.operator: LocalOperators | None = None
        self.vertex: VertexJobs | None = None
        self.preloaded: forked_tasks.Preloaded | None = None

    def close(self) -> None:
        """Stop what the replay started beside the tasks (the local operators, Vertex's JobService, the
        preloader)."""
        if self.operator is not None:
            self.operator.__exit__()
            self.operator = None
        if self.vertex is not None:
            self.vertex.__exit__()
            self.vertex = None
        if self.preloaded is not None:
            self.preloaded.close()
            self.preloaded = None

    def _training_operator(self, io: TaskIO, env: dict[str, str]) -> dict[str, str]:
        """The environment of a task whose Trainer launches an operator's job: the local operators' API as
        its cluster. The replicas run the replica container's command as this replay runs a task's."""
        if self.operator is None:
            from tfxd.kubeflow.replay.local_operators import (
                LocalOperators,  # start-up: TensorFlow, Kubernetes' names
            )

            self.operator = LocalOperators(os.path.join(self.replay.log_dir, "operators"), self._replica_argv,
                                           cwd=self.replay.project_dir,
                                           env={"PYTHONPATH": env["PYTHONPATH"]}).__enter__()
            self.notes.append(f"{io.name}: its job ran on local stand-ins for Kubeflow Trainer v2 (a TrainJob: "
                              "each node a process with the environment JobSet gives it) and the Training Operator "
                              "(a TFJob: each replica a process with the TF_CONFIG the operator writes); logs in "
                              f"{self.operator.log_dir}")
        return {**self.operator.environment(REPLAY_NAMESPACE), "KUBERNETES_SERVICE_HOST": ""}

    def _vertex_jobs(self, io: TaskIO, env: dict[str, str]) -> dict[str, str]:
        """The environment of a task whose Trainer launches a Vertex custom job: gRPC's way to the local
        JobService at Vertex's name, and credentials for aiplatform where the replay has none."""
        if self.vertex is None:
            from tfxd.kubeflow.replay.vertex_jobs import (
                VertexJobs,  # start-up: aiplatform's gRPC services
            )

            self.vertex = VertexJobs(os.path.join(self.replay.log_dir, "vertex-jobs"), self._replica_argv,
                                     env={"PYTHONPATH": env["PYTHONPATH"]}, cwd=self.replay.project_dir).__enter__()
            self.notes.append(f"{io.name}: its Vertex custom job ran on a local stand-in of Vertex's JobService "
                              "(each worker pool's replicas a process with the CLUSTER_SPEC and TF_CONFIG Vertex "
                              f"gives it); logs in {self.vertex.log_dir}")
        return self.vertex.environment(env)

    def _replica_argv(self, container: dict[str, Any]) -> list[str]:
        """A replica's command (an operator's pod, a Vertex pool's replica), as this replay runs a task's."""
        return this_python([self.localize(part) for part in [*container.get("command", []), *container.get("args", [])]])

    def artifact_name(self, task: str, key: str) -> str:
        return f"{NAME_PREFIX}/{self.pipeline}/{self.replay.run_id}/{task}/{key}"

    def run(self, name: str, component: dict[str, Any], container: dict[str, Any],
            parameters: dict[str, tuple[Any, str]], inputs: dict[str, list], log: str) -> TaskResult:
        io = self._prepare(name, component, parameters, inputs, log)
        pre = container.get("lifecycle", {}).get("preCacheCheck")
        if pre and not self.replay.compiled.target.RUNS_LIFECYCLE_HOOKS:  # KFP's open-source launcher
            self.notes.append(f"{name}: its preCacheCheck hook was not run, as the open-source Kubeflow "
                              "Pipelines backend does not run it")
        elif pre:
            output_file = os.path.join(io.task_dir, "pre_cache_check_output.json")
            self._execute(io, pre, container, output_file, "preCacheCheck")
            self._take_driver_output(io, self._read_output(io, output_file, "preCacheCheck"))
        output_file = os.path.join(io.task_dir, "executor_output.json")
        self._execute(io, container, container, output_file, "main")
        return self._results(io, self._read_output(io, output_file, "main"))

    def _prepare(self, name: str, component: dict[str, Any], parameters: dict[str, tuple[Any, str]],
                 inputs: dict[str, list], log: str) -> TaskIO:
        task_dir = os.path.join(self.replay.run_dir, name)
        os.makedirs(task_dir, exist_ok=True)
        definitions = component.get("outputDefinitions", {})
        outputs = {key: [{"name": self.artifact_name(name, key), "schemaTitle": title(definition.get("artifactType", {})),
                          "uri": join(self.replay.task_folder(name), key), "metadata": {}}]
                   for key, definition in definitions.get("artifacts", {}).items()}
        output_parameters = {key: os.path.join(task_dir, "parameters", key) for key in definitions.get("parameters", {})}
        for path in output_parameters.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(log, "w", encoding="utf-8") as handle:
            handle.write(f"# tfxd replay {self.replay.run_id}: task {name}\n")
        return TaskIO(name, dict(parameters), inputs, outputs, output_parameters, task_dir, log)

    def _take_driver_output(self, io: TaskIO, driver: dict[str, Any]) -> None:
        """The span, version, fingerprint and resolved input_config TFX's driver wrote become the task's
        parameters and its output artifact's metadata, as on Vertex."""
        for key, value in {**{k: from_old_value(v) for k, v in driver.get("parameters", {}).items()},
                           **driver.get("parameterValues", {})}.items():
            kind = kind_of(value)
            io.parameters[key] = (self.localize(value) if kind == "STRING" else value, kind)
        for key, listed in driver.get("artifacts", {}).items():
            given = listed.get("artifacts", [])
            if key in io.outputs and given:
                io.outputs[key][0]["metadata"] = given[0].get("metadata", {})

    def _results(self, io: TaskIO, written: dict[str, Any]) -> TaskResult:
        result = TaskResult()
        for key, records in io.outputs.items():
            given = written.get("artifacts", {}).get(key, {}).get("artifacts")
            if given is None:
                given = [{k: v for k, v in record.items() if k != "schemaTitle"} for record in records]
            result.artifacts[key] = [
                self.index.add({"name": artifact.get("name") or self.artifact_name(io.name, f"{key}-{i}"),
                                "schemaTitle": records[0]["schemaTitle"], "uri": artifact.get("uri", ""),
                                "metadata": artifact.get("metadata", {}), "pipeline": self.pipeline,
                                "run_id": self.replay.run_id, "task": io.name, "key": key})
                for i, artifact in enumerate(given)]
        values = {**{k: from_old_value(v) for k, v in written.get("parameters", {}).items()},
                  **written.get("parameterValues", {})}
        for key, path in io.output_parameters.items():
            if key in values:
                result.parameters[key] = values[key]
            elif os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    result.parameters[key] = handle.read()
        return result

    def _executor_input(self, io: TaskIO, output_file: str) -> dict[str, Any]:
        return {
            "inputs": {
                "parameters": {key: old_value(value, kind) for key, (value, kind) in io.parameters.items()},
                "parameterValues": {key: value for key, (value, _) in io.parameters.items()},
                "artifacts": {key: {"artifacts": [runtime_artifact(r) for r in records]}
                              for key, records in io.inputs.items()},
            },
            "outputs": {
                "artifacts": {key: {"artifacts": [runtime_artifact(r) for r in records]}
                              for key, records in io.outputs.items()},
                "parameters": {key: {"outputFile": path} for key, path in io.output_parameters.items()},
                "outputFile": output_file,
            },
        }

    def _execute(self, io: TaskIO, spec: dict[str, Any], container: dict[str, Any], output_file: str,
                 phase: str) -> None:
        executor_input = self._executor_input(io, output_file)
        input_path = os.path.join(io.task_dir, f"executor_input{'' if phase == 'main' else '_' + phase}.json")
        with open(input_path, "w", encoding="utf-8") as handle:
            json.dump(executor_input, handle, indent=1, sort_keys=True)
        if os.path.exists(output_file):
            os.remove(output_file)
        argv = self._argv(io, spec, executor_input, phase)
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([self.replay.project_dir, *filter(None, [os.environ.get("PYTHONPATH")])])}
        for item in container.get("env", []):
            env[item["name"]] = self.localize(item.get("value", ""))
        if _OPERATOR_EXECUTOR in argv:
            env.update(self._training_operator(io, env))
        if _VERTEX_EXECUTOR in argv:
            env.update(self._vertex_jobs(io, env))
        shown = [arg if len(arg) < 300 else f"<{len(arg)} characters: {input_path}>" for arg in argv]
        temp = container_temp(self.replay.log_dir, f"{io.name}-{phase}")
        try:
            with open(io.log, "a", encoding="utf-8") as handle:
                handle.write(f"# {phase}: {' '.join(shown)}\n")
                handle.flush()
                process = self._start(io, argv, env, handle, temp)
                code = _wait(process)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
        if code != 0:
            what = "" if phase == "main" else f" (its {phase} container)"
            # the engine's account first, where one of tfxd's ran the task's Beam job and something ended there
            fault = self.replay.engine.fault() if self.replay.engine is not None else None
            raise TaskFailed(io.name, f"exit code {code}{what}: {fault or _log_reason(io.log)}", io.log,
                             exit_code=code)

    def _start(self, io: TaskIO, argv: list[str], env: dict[str, str],
               log, temp: str) -> subprocess.Popen | forked_tasks.Task:
        """The task's process, with ``temp`` as its temporary folder: forked from the preloader where it runs
        the task as a fresh process would (forked_tasks.py), else started fresh."""
        cwd = self.replay.project_dir
        if self.preloaded is None and forked_tasks.runs_one_of(argv, forked_tasks.MODULES):
            self.preloaded = forked_tasks.Preloaded(env, cwd, os.path.join(self.replay.log_dir, "preloader.log"))
        if self.preloaded is not None and self.preloaded.takes(argv, env, cwd):
            task = self.preloaded.start(argv, io.log, temp)
            if task is not None:
                return task
        try:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env={**env, "TMPDIR": temp})
        except OSError as exc:
            raise TaskFailed(io.name, f"cannot start {argv[0]}: {exc.strerror}", io.log) from exc

    def _argv(self, io: TaskIO, spec: dict[str, Any], executor_input: dict[str, Any], phase: str) -> list[str]:
        """The container's command and args, localized, placeholders filled, Beam swapped for its local
        stand-in."""
        command = [self.localize(part) for part in spec.get("command", [])]
        args = [self.localize(part) for part in spec.get("args", [])]
        if not command and not args:
            raise ReplayError(f"task {io.name}: the {phase} container has no command")
        tfx = any(entry in part for part in command for entry in _TFX_ENTRYPOINTS)
        if tfx and self.replay.beam_in_memory:
            args = beam_args.in_memory(args)
        elif tfx and self.replay.engine is not None:
            args = beam_args.on_engine_here(args, self.replay.engine.job_endpoint, self.replay.engine.worker_pool)
        argv = []
        for part in [*command, *args]:
            value = substitute(part, lambda expression: self._placeholder(io, expression, executor_input))
            if value is None:
                raise ReplayError(f"task {io.name}: placeholder in {part!r} has no value")
            argv.append(value)
        return this_python(argv)

    def _read_output(self, io: TaskIO, path: str, phase: str) -> dict[str, Any]:
        if not os.path.exists(path):
            if phase == "main":
                return {}
            raise TaskFailed(io.name, f"its {phase} container wrote no output metadata ({path})", io.log,
                             exit_code=0)
        with open(path, encoding="utf-8") as handle:
            try:
                return json.load(handle)
            except json.JSONDecodeError as exc:
                raise TaskFailed(io.name, f"its output metadata {path} is not JSON: {exc}", io.log,
                                 exit_code=0) from exc

    def _placeholder(self, io: TaskIO, expression: str, executor_input: dict[str, Any]) -> str | None:
        """The launcher's `{{$...}}` placeholders."""
        if expression == "":
            return json.dumps(executor_input, sort_keys=True)
        simple = {".pipeline_job_name": self.pipeline, ".pipeline_job_uuid": self.replay.run_id,
                  ".pipeline_job_resource_name": f"{self.pipeline}/{self.replay.run_id}",
                  ".pipeline_task_name": io.name, ".pipeline_task_uuid": f"{self.replay.run_id}-{io.name}",
                  ".pipeline_root": self.replay.root, ".outputs.output_file": executor_input["outputs"]["outputFile"]}
        if expression in simple:
            return simple[expression]
        key = r"\[['\"]([^'\"]+)['\"]\]"
        if match := re.fullmatch(rf"\.inputs\.parameters{key}", expression):
            if match.group(1) in io.parameters:
                value = io.parameters[match.group(1)][0]
                return value if isinstance(value, str) else json.dumps(value)
        elif match := re.fullmatch(rf"\.(inputs|outputs)\.artifacts{key}\.(uri|value|metadata{key})", expression):
            records = (io.inputs if match.group(1) == "inputs" else io.outputs).get(match.group(2)) or []
            if records:
                return _artifact_value(records[0], match.group(3), match.group(4))
        elif (match := re.fullmatch(rf"\.outputs\.parameters{key}\.output_file", expression)) and (
                match.group(1) in io.output_parameters):
            return io.output_parameters[match.group(1)]
        raise ReplayError(f"task {io.name}: unsupported placeholder {{{{${expression}}}}}")


def this_python(argv: list[str]) -> list[str]:
    """A container's command with this interpreter (and this install) for the image's `python`."""
    if argv and os.path.basename(argv[0]) in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    return argv


def _artifact_value(record: dict[str, Any], what: str, metadata_key: str | None) -> str | None:
    """An artifact's `uri`, `value` (its file's content) or `metadata['KEY']`, as a placeholder shows it."""
    if what == "uri":
        return record["uri"]
    if what == "value":
        from tfx.dsl.io import fileio

        path = join(record["uri"], "value") if fileio.isdir(record["uri"]) else record["uri"]
        with fileio.open(path, "r") as handle:
            return handle.read()
    value = record.get("metadata", {}).get(metadata_key)
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def _wait(process: subprocess.Popen | forked_tasks.Task) -> int:
    """The task's exit code; interrupted, the task is stopped (then killed) before this goes on up."""
    try:
        return process.wait()
    except BaseException:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise


def _log_reason(log: str) -> str:
    """Why the task failed, from its log: the root cause, else its last line that says anything."""
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return "see its log"
    tail = [line.strip() for line in text.splitlines()[-3:] if line.strip()]
    return root_cause(text) or (shortened(tail[-1]) if tail else "see its log")
