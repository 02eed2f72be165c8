"""`tfxd compile`: the spec's pipeline through TFX's KubeflowV2DagRunner, as a KFP v2 PipelineSpec (YAML,
for Kubeflow Pipelines) or a Vertex PipelineJob (JSON), with the target's image as the default image.

Offline and side-effect free: every executor, preprocessing_fn and run_fn is referenced by dotted path
(importable inside the image), so TFX packages no module file and writes nothing under the pipeline
root; the only file written is the output, atomically.

What one service needs beyond TFX's compiler is its target's (kubeflow_pipelines.py for the open-source
backend: schema 2.1.0, parameter defaults, resources, no lifecycle hooks). On both targets the tasks that
find the latest pushed model (the baseline, the warm start) are never cached: they read the bucket; and
with spans in data.path ExampleGen reads by the run's schedule time. Every container task runs tfxd's entry
point around TFX's (components/cluster_task.py), which leaves the task's record in its run's folder for
`tfxd history`, and the run ends with an exit task (TFX's exit handler: it runs whatever the tasks' end) that
rewrites the pipeline's history.html from those records (kubeflow/history_task.py).
"""

from __future__ import annotations

import json
from typing import Any

from kfp import dsl
from tfx.dsl.component.experimental import container_component, placeholders
from tfx.dsl.components.base.base_node import BaseNode
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2
from tfx.types.experimental import simple_artifacts

from tfxd import keys
from tfxd.files import write_atomic
from tfxd.kubeflow.cluster_target import TFX_DAG, pipeline_tasks
from tfxd.kubeflow.targets import cluster_target
from tfxd.pipeline.assembly.dag import runtime_parameters, tfx_pipeline
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement

TFX_ENTRY_POINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def pipeline_job(loaded: LoadedSpec, target: str) -> dict[str, Any]:
    """The compiled PipelineJob as a dict (its `pipelineSpec` is the KFP PipelineSpec)."""
    spec, service = loaded.spec, cluster_target(target)
    config = v2.KubeflowV2DagRunnerConfig(default_image=getattr(spec.targets, target).image,
                                          display_name=spec.name, use_pipeline_spec_2_1=service.PIPELINE_SPEC_2_1)
    runner = v2.KubeflowV2DagRunner(config=config, output_dir=".", output_filename="unused.json")
    runner.set_exit_handler(_history_task(loaded, target))
    parameters = runtime_parameters(spec)
    job = runner.run(tfx_pipeline(loaded, target), parameter_values=parameters, write_out=False)
    _parameters_into_the_sub_dag(job["pipelineSpec"])
    root = Placement(loaded, target).pipeline_root()
    service.adapt(job["pipelineSpec"], loaded, root, parameters)
    _never_cached(job["pipelineSpec"], (keys.RESOLVER, keys.WARM_START_RESOLVER))
    _recorded(job["pipelineSpec"], spec.name)
    if spec.data.span_pattern is not None:
        _schedule_time(job["pipelineSpec"])
    job["runtimeConfig"]["gcsOutputDirectory"] = root
    return job


def _history_task(loaded: LoadedSpec, target: str) -> BaseNode:
    """The exit task: `python -m tfxd.kubeflow.history_task` in the pipeline's image, told the pipeline, where
    its page goes (beside the pipeline root, as a local run's beside runs/), where its models are pushed and
    the evaluation's thresholds (the page draws them). Its one output, a copy of the page as this run left it,
    puts it in the run's folder, where the tasks' records are."""
    spec, placement = loaded.spec, Placement(loaded, target)
    thresholds = {name: value.model_dump() for name, value in spec.evaluation.thresholds.items()}
    command: list[Any] = ["python", "-m", keys.HISTORY_ENTRY_POINT, "--pipeline", spec.name,
                          "--page", placement.history_page(), "--push-to", placement.push_to(),
                          "--thresholds", json.dumps(thresholds, sort_keys=True),
                          "--run-page", placeholders.OutputUriPlaceholder("page")]
    component = container_component.create_container_component(
        name=keys.HISTORY_TASK, image=getattr(spec.targets, target).image, command=command,
        outputs={"page": simple_artifacts.File})
    return component()


def _parameters_into_the_sub_dag(pipeline_spec: dict[str, Any]) -> None:
    """TFX's compiler nests the tasks in its sub-DAG for the exit handler but declares the runtime parameters
    (train_args, eval_args, the span) on the root alone, where the nested tasks' `componentInputParameter`
    cannot reach them: the sub-DAG declares them too and the root's task hands each on, as kfp's compiler
    writes an ExitHandler group (its sub-DAG's inputDefinitions, its task's componentInputParameter)."""
    declared = pipeline_spec["root"].get("inputDefinitions", {}).get("parameters", {})
    if not declared:
        return
    sub_dag = pipeline_spec["components"][TFX_DAG]
    sub_dag["inputDefinitions"] = {"parameters": {
        name: {key: value[key] for key in ("parameterType", "type") if key in value}  # schema 2.1.0, or older
        for name, value in declared.items()}}
    pipeline_spec["root"]["dag"]["tasks"][TFX_DAG]["inputs"] = {
        "parameters": {name: {"componentInputParameter": name} for name in declared}}


def _never_cached(pipeline_spec: dict[str, Any], names: tuple[str, ...]) -> None:
    """The tasks that find the latest pushed model read the bucket, which no cache key holds."""
    for name, task in pipeline_tasks(pipeline_spec).items():
        if name in names:
            task["cachingOptions"] = {"enableCache": False}


def _recorded(pipeline_spec: dict[str, Any], pipeline: str) -> None:
    """Each container task runs TFX's entry point through tfxd's, told the pipeline and the task it records."""
    components = pipeline_spec["components"]
    executors = pipeline_spec["deploymentSpec"]["executors"]
    for name, task in pipeline_tasks(pipeline_spec).items():
        label = components[task["componentRef"]["name"]].get("executorLabel")
        container = executors.get(label, {}).get("container") if label else None
        if container and container.get("command", [])[-1:] == [TFX_ENTRY_POINT]:
            container["command"] = [*container["command"][:-1], keys.TASK_ENTRY_POINT]
            container["args"] = [keys.TASK_PIPELINE_ARG, pipeline, keys.TASK_NAME_ARG, name, *container["args"]]


def _schedule_time(pipeline_spec: dict[str, Any]) -> None:
    """With spans in data.path, ExampleGen reads by the run's scheduled time (`{span: scheduled}`), or by
    its creation time where the spec allows it (`unscheduled: creation_time`): Vertex and KFP substitute
    the placeholders only in a task input whose constant is exactly one (KFP fills the schedule time from
    2.17 on). It is never cached, on Vertex either, as its input is the data: the cache key would hold the
    parameters, not the new span (tfxd submit and schedule keep the file's caching options as they are)."""
    task = pipeline_tasks(pipeline_spec)["ExampleGen"]
    for key, placeholder in ((keys.SCHEDULE_TIME_KEY, dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER),
                             (keys.CREATE_TIME_KEY, dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER)):
        task["inputs"]["parameters"][key] = {"runtimeValue": {"constant": placeholder}}
    task["cachingOptions"] = {"enableCache": False}


def render(loaded: LoadedSpec, target: str) -> str:
    """The file's text: the PipelineSpec as YAML for kubeflow, the PipelineJob as JSON for vertex."""
    return cluster_target(target).render(pipeline_job(loaded, target))


def compile_to(loaded: LoadedSpec, target: str, output: str) -> str:
    write_atomic(output, render(loaded, target))
    return output
