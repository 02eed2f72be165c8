"""What a replayed task is handed, as the engine's driver resolves its inputs: its parameters (constants, the
job's placeholders, the pipeline's parameters, through the sub-DAG's task for a nested task, and the output
parameters of the tasks before it) and its input artifacts (the outputs of the tasks before it)."""

from __future__ import annotations

from typing import Any

from tfxd.kubeflow.replay.artifacts import Localizer
from tfxd.kubeflow.replay.ir import Dag, ReplayError, coerce, declared_type, from_old_value
from tfxd.kubeflow.replay.launcher import Replay, TaskResult


class TaskInputs:
    """The inputs of one replay's tasks; ``results``: the tasks that ran so far, filled in as they run."""

    def __init__(self, replay: Replay, localize: Localizer, dag: Dag, results: dict[str, TaskResult]) -> None:
        self.replay = replay
        self.localize = localize
        self.dag = dag
        self.results = results

    def parameters(self, name: str, task: dict[str, Any], component: dict[str, Any]) -> dict[str, Any]:
        """Python values of the task's input parameters, localized, with their declared kinds."""
        definitions = component.get("inputDefinitions", {}).get("parameters", {})
        values: dict[str, Any] = {}
        for key, spec in task.get("inputs", {}).get("parameters", {}).items():
            kind = declared_type(definitions.get(key))
            if "runtimeValue" in spec:
                runtime = spec["runtimeValue"]
                if "constantValue" in runtime:
                    value = from_old_value(runtime["constantValue"])
                elif "constant" in runtime:
                    value = self.replay.job_placeholder(runtime["constant"])
                else:
                    raise ReplayError(f"task {name}: parameter {key}: unsupported runtime value {runtime}")
            elif "componentInputParameter" in spec:
                pipeline_key = self.pipeline_key(name, key, spec["componentInputParameter"])
                if pipeline_key not in self.replay.parameters:
                    raise ReplayError(f"task {name}: parameter {key} takes pipeline parameter {pipeline_key!r}, "
                                      "which has no value (pass it in parameters)")
                value = self.replay.parameters[pipeline_key]
            elif "taskOutputParameter" in spec:
                source = spec["taskOutputParameter"]
                produced = self.results[source["producerTask"]].parameters
                if source["outputParameterKey"] not in produced:
                    raise ReplayError(f"task {name}: parameter {key}: task {source['producerTask']} produced "
                                      f"no output parameter {source['outputParameterKey']!r}")
                value = produced[source["outputParameterKey"]]
            else:
                raise ReplayError(f"task {name}: parameter {key}: unsupported input {sorted(spec)}")
            values[key] = (self.localize(coerce(value, kind, f"task {name}: parameter {key}")), kind)
        return values

    def pipeline_key(self, name: str, key: str, input_key: str) -> str:
        """The pipeline parameter a task's `componentInputParameter` names: a nested task's is the sub-DAG's
        input, which the sub-DAG's task hands on from the root's (the engine refuses one it does not)."""
        if name not in self.dag.nested:
            return input_key
        if input_key not in self.dag.handed:
            raise ReplayError(f"task {name}: parameter {key} takes its sub-DAG's input {input_key!r}, which the "
                              "sub-DAG does not declare or its task does not hand on: the engine's driver could "
                              "not resolve it")
        return self.dag.handed[input_key]

    def artifacts(self, name: str, task: dict[str, Any], component: dict[str, Any]) -> dict[str, list]:
        found = {}
        for key, spec in task.get("inputs", {}).get("artifacts", {}).items():
            if "taskOutputArtifact" not in spec:
                raise ReplayError(f"task {name}: artifact {key}: unsupported input {sorted(spec)}")
            source = spec["taskOutputArtifact"]
            found[key] = self.results[source["producerTask"]].artifacts.get(source["outputArtifactKey"], [])
        return found

