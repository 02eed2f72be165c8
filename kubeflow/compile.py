"""`tfxd compile`: the spec's pipeline through TFX's KubeflowV2DagRunner, as a KFP v2 PipelineSpec (YAML,
for Kubeflow Pipelines) or a Vertex PipelineJob (JSON), with the target's image as the default image.

Offline and side-effect free: every executor, preprocessing_fn and run_fn is referenced by dotted path
(importable inside the image), so TFX packages no module file and writes nothing under the pipeline
root; the only file written is the output, atomically.

For Kubeflow the file is what the open-source KFP 2.x backend accepts and runs (kubeflow/pipelines:
backend/src/apiserver/template/v2_template.go takes schema 2.1.0 only; backend/src/v2/compiler runs
container and importer executors only, and no lifecycle hooks): schema 2.1.0 with typed parameters and
their defaults, `defaultPipelineRoot` from the target's bucket, the Evaluator's baseline found by a
task (assembly gives Kubeflow one instead of TFX's resolver), and ExampleGen without TFX's pre-cache-
check driver (its executor works out the span and fingerprint itself) and never cached: the backend's
cache key holds the task's parameters, not the data, so a cached ExampleGen would hand on old data. On both
targets the tasks that find the latest pushed model (the baseline, the warm start) are never cached: they
read the bucket.
Per-component `resources` become the tasks' resource requests and limits.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from kfp import dsl
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

from tfxd import keys
from tfxd.files import write_atomic
from tfxd.pipeline.assembly.dag import runtime_parameters, tfx_pipeline
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement

EXTENSIONS = {"kubeflow": ".yaml", "vertex": ".json"}
_GI = 2**30 / 10**9  # KFP takes memory in GB (10^9 bytes)
_MEMORY_UNITS = {"": 1e-9, "k": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3, "P": 1e6,
                 "Ki": 2**10 / 1e9, "Mi": 2**20 / 1e9, "Gi": _GI, "Ti": 2**40 / 1e9, "Pi": 2**50 / 1e9}
GPU_RESOURCE = "nvidia.com/gpu"


def pipeline_job(loaded: LoadedSpec, target: str) -> dict[str, Any]:
    """The compiled PipelineJob as a dict (its `pipelineSpec` is the KFP PipelineSpec)."""
    spec = loaded.spec
    config = v2.KubeflowV2DagRunnerConfig(default_image=getattr(spec.targets, target).image,
                                          display_name=spec.name, use_pipeline_spec_2_1=target == "kubeflow")
    runner = v2.KubeflowV2DagRunner(config=config, output_dir=".", output_filename="unused.json")
    job = runner.run(tfx_pipeline(loaded, target), parameter_values=runtime_parameters(spec),
                     write_out=False)
    root = Placement(loaded, target).pipeline_root()
    if target == "kubeflow":
        _for_kubeflow(job["pipelineSpec"], loaded, root)
    _never_cached(job["pipelineSpec"], (keys.RESOLVER, keys.WARM_START_RESOLVER))
    if spec.data.span_pattern is not None:
        _schedule_time(job["pipelineSpec"])
    job["runtimeConfig"]["gcsOutputDirectory"] = root
    return job


def _for_kubeflow(pipeline_spec: dict[str, Any], loaded: LoadedSpec, root: str) -> None:
    """What the open-source backend needs beyond TFX's compiler (see the module's docstring)."""
    pipeline_spec["defaultPipelineRoot"] = root
    _set_defaults(pipeline_spec, runtime_parameters(loaded.spec))
    _set_resources(pipeline_spec, loaded.spec.targets.kubeflow.resources)  # type: ignore[union-attr]
    executors = pipeline_spec["deploymentSpec"]["executors"]
    for task in pipeline_spec["root"]["dag"]["tasks"].values():
        executor = executors[pipeline_spec["components"][task["componentRef"]["name"]]["executorLabel"]]
        if executor.get("container", {}).pop("lifecycle", None) is not None:  # ExampleGen's driver
            task["cachingOptions"] = {"enableCache": False}


def _never_cached(pipeline_spec: dict[str, Any], names: tuple[str, ...]) -> None:
    """The tasks that find the latest pushed model read the bucket, which no cache key holds."""
    for name, task in pipeline_spec["root"]["dag"]["tasks"].items():
        if name in names:
            task["cachingOptions"] = {"enableCache": False}


def _schedule_time(pipeline_spec: dict[str, Any]) -> None:
    """With spans in data.path, ExampleGen reads by the run's scheduled time (`{span: scheduled}`), or by
    its creation time where the spec allows it (`unscheduled: creation_time`): Vertex and KFP substitute
    the placeholders only in a task input whose constant is exactly one (KFP fills the schedule time from
    2.17 on). It is never cached, on Vertex either, as its input is the data: the cache key would hold the
    parameters, not the new span (tfxd submit and schedule keep the file's caching options as they are)."""
    task = pipeline_spec["root"]["dag"]["tasks"]["ExampleGen"]
    for key, placeholder in ((keys.SCHEDULE_TIME_KEY, dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER),
                             (keys.CREATE_TIME_KEY, dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER)):
        task["inputs"]["parameters"][key] = {"runtimeValue": {"constant": placeholder}}
    task["cachingOptions"] = {"enableCache": False}


def _set_defaults(pipeline_spec: dict[str, Any], values: dict[str, Any]) -> None:
    """A KFP package carries no runtime config: the parameters' defaults go into the root's inputs, so
    a run or a recurring run that sets none still works."""
    parameters = pipeline_spec["root"].get("inputDefinitions", {}).get("parameters", {})
    for name, value in values.items():
        parameters[name]["defaultValue"] = value
        parameters[name]["isOptional"] = True


def _set_resources(pipeline_spec: dict[str, Any], resources: dict[str, Any]) -> None:
    executors = pipeline_spec["deploymentSpec"]["executors"]
    for component, wanted in resources.items():
        container = executors[f"{component}_executor"]["container"]
        spec: dict[str, Any] = {}
        if wanted.cpu is not None:
            cores = float(str(wanted.cpu).rstrip("m")) / (1000 if str(wanted.cpu).endswith("m") else 1)
            spec["cpuLimit"] = spec["cpuRequest"] = cores
        if wanted.memory is not None:
            spec["memoryLimit"] = spec["memoryRequest"] = round(memory_gb(wanted.memory), 6)
        if wanted.gpu:
            spec["accelerator"] = {"type": GPU_RESOURCE, "count": str(wanted.gpu)}
        container["resources"] = spec


def memory_gb(quantity: str) -> float:
    """A Kubernetes quantity ('16Gi', '512M', '1e9' is not one) in GB, as KFP takes it."""
    digits = quantity.rstrip("kMGTPi")
    return float(digits) * _MEMORY_UNITS[quantity[len(digits):]]


def render(loaded: LoadedSpec, target: str) -> str:
    """The file's text: the PipelineSpec as YAML for kubeflow, the PipelineJob as JSON for vertex."""
    job = pipeline_job(loaded, target)
    if target == "vertex":
        return json.dumps(job, indent=2, sort_keys=True) + "\n"
    return yaml.safe_dump(job["pipelineSpec"], sort_keys=True)


def compile_to(loaded: LoadedSpec, target: str, output: str) -> str:
    write_atomic(output, render(loaded, target))
    return output
