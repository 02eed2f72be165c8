"""What `tfxd compile --target kubeflow` writes, held to the rules of the open-source Kubeflow Pipelines 2.x
backend as its source states them, and loaded by kfp's own SDK; what `--target vertex` writes, built into
a request by aiplatform's own PipelineJob. For the three examples.

The backend's rules, from kubeflow/pipelines (tests/kubeflow/kfp_rules.py encodes them):
- backend/src/apiserver/template/v2_template.go (NewV2SpecTemplate): the document parses as a
  PipelineSpec (protojson: unknown fields refused); `schemaVersion` is "2.1.0" ("KFP only supports
  schema version 2.1.0"); `pipelineInfo.name` is set and matches
  `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`; `root` is set.
- the same file (validatePipelineJobInputs): a root parameter that a run does not set is optional or has
  a default, and its `parameterType` is specified.
- backend/src/v2/compiler/visitor.go: an executor is a container or an importer ("non-container and
  non-importer executor not implemented"); no resolver.
- backend/src/v2/driver and launcher read no `lifecycle` hook (no file under backend/src/v2 mentions
  preCacheCheck): a hook there would silently not run.
- backend/src/v2/driver/root_dag.go takes the pipeline root from the run, else the cluster's kfp-launcher
  config; the UI's new-run page (frontend/src/pages/NewRunV2.tsx) offers the spec's `defaultPipelineRoot`,
  which tfxd sets to the target's bucket.
"""

from __future__ import annotations

import importlib
import importlib.util
import json

import pytest
import yaml

from tests.conftest import REPO
from tests.kubeflow.conftest import EXAMPLES
from tests.kubeflow.kfp_rules import backend_problems
from tfxd import keys
from tfxd.kubeflow.cluster_target import pipeline_tasks
from tfxd.pipeline.spec.load import load_spec

ROOTS = {"taxi": "gs://my-bucket/tfxd/taxi-tips/pipeline", "penguin": "gs://my-bucket/tfxd/penguin-species/pipeline",
         "digits": "gs://my-bucket/tfxd/digits-cnn/pipeline"}


def _steps(example: str) -> dict[str, dict]:
    """The training length the example's spec asks for, as the compiled parameters carry it (TrainArgs
    and EvalArgs as JSON; `epochs` leaves numSteps out)."""
    from tfxd.pipeline.assembly.dag import runtime_parameters

    spec = load_spec(str(REPO / "examples" / f"{example}.yaml"), check_files=False).spec
    return {name: json.loads(value) for name, value in runtime_parameters(spec).items()}


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_kubeflow_file_meets_the_open_source_backends_rules(compiled, example):
    pipeline_spec = yaml.safe_load(compiled[(example, "kubeflow")].read_text())
    assert backend_problems(pipeline_spec) == []
    assert pipeline_spec["defaultPipelineRoot"] == ROOTS[example]
    image = load_spec(str(REPO / "examples" / f"{example}.yaml"), check_files=False).spec.targets.kubeflow.image
    executors = pipeline_spec["deploymentSpec"]["executors"].values()
    assert {executor["container"]["image"] for executor in executors} == {image}
    exit_task = pipeline_spec["deploymentSpec"]["executors"].pop(f"{keys.HISTORY_TASK}_executor")
    for executor in executors:  # each names a class the image's tfxd has
        args = executor["container"]["args"]
        module, _, name = args[args.index("--executor_class_path") + 1].rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type)
    # the exit task runs after every task whatever its end, a module the image's tfxd has (TFX's exit handler)
    assert exit_task["container"]["command"][:3] == ["python", "-m", keys.HISTORY_ENTRY_POINT]
    assert importlib.util.find_spec(keys.HISTORY_ENTRY_POINT) is not None
    assert pipeline_spec["root"]["dag"]["tasks"][keys.HISTORY_TASK]["triggerPolicy"] == {
        "strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    tasks = pipeline_tasks(pipeline_spec)
    # the backend caches on parameters, not on the data: ExampleGen always reads it, and the task finding the
    # latest pushed model always reads the bucket
    uncached = {"ExampleGen", "latest_blessed_model_resolver", "warm_start_model_resolver"}
    assert {name: task["cachingOptions"] for name, task in tasks.items()} == {
        name: {"enableCache": name not in uncached} for name in tasks}


def _tfx_default_file() -> dict:
    """What TFX's own KubeflowV2DagRunner writes by default for an ExampleGen and TFX's latest-blessed-model
    resolver (schema 2.0.0, a driver hook, resolver executors): what tfxd's files avoid."""
    from tfx.components import CsvExampleGen
    from tfx.dsl.components.common.resolver import Resolver
    from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
        LatestBlessedModelStrategy,
    )
    from tfx.orchestration import pipeline
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2
    from tfx.types import Channel, standard_artifacts

    nodes = [CsvExampleGen(input_base="gs://my-bucket/data"),
             Resolver(strategy_class=LatestBlessedModelStrategy, model=Channel(type=standard_artifacts.Model),
                      model_blessing=Channel(type=standard_artifacts.ModelBlessing)).with_id("latest")]
    runner = v2.KubeflowV2DagRunner(config=v2.KubeflowV2DagRunnerConfig(default_image="registry.example.com/x:1"),
                                    output_dir=".", output_filename="unused.json")
    job = runner.run(pipeline.Pipeline(pipeline_name="tfx-default", pipeline_root="gs://my-bucket/root",
                                       components=nodes), write_out=False)
    return job["pipelineSpec"]


def test_the_rules_catch_what_tfx_writes_by_default(compiled):
    """A pipeline as TFX's compiler writes it by default (schema 2.0.0, resolvers, a driver hook) breaks the
    rules: they are not empty words."""
    problems = backend_problems(_tfx_default_file())
    assert "schemaVersion '2.0.0' is not 2.1.0" in problems
    assert any("neither a container nor an importer" in p and "resolver" in p for p in problems)
    assert "executor CsvExampleGen_executor has lifecycle hooks the backend does not run" in problems
    vertex = json.loads(compiled[("taxi", "vertex")].read_text())["pipelineSpec"]  # tfxd's, written for Vertex
    assert not any("neither a container nor an importer" in p for p in backend_problems(vertex))  # no resolver
    assert backend_problems({**yaml.safe_load(compiled[("taxi", "kubeflow")].read_text()),
                             "pipelineInfo": {"name": "-taxi"}}) == ["pipeline name '-taxi' is not a Kubernetes-style name"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_kfp_loads_the_kubeflow_file_wraps_it_and_compiles_it_again(compiled, example, tmp_path):
    from kfp import compiler, components, dsl

    component = components.load_component_from_file(str(compiled[(example, "kubeflow")]))
    defaults = {name: spec.default for name, spec in component.component_spec.inputs.items()}
    assert {name: json.loads(value) for name, value in defaults.items()} == _steps(example)

    def wrapped(train_args=defaults["train_args"], eval_args=defaults["eval_args"]):
        component(train_args=train_args, eval_args=eval_args)

    wrapped.__annotations__ = {"train_args": str, "eval_args": str}  # kfp reads them as types, not text
    again = tmp_path / "wrapped.yaml"
    compiler.Compiler().compile(dsl.pipeline(name=f"{example}-wrapped")(wrapped), str(again))
    recompiled = yaml.safe_load(again.read_text())
    parameters = recompiled["root"]["inputDefinitions"]["parameters"]
    assert {name: p["defaultValue"] for name, p in parameters.items()} == defaults
    assert backend_problems(recompiled) == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_aiplatform_builds_the_vertex_file_with_parameter_overrides(compiled, example):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    job = aiplatform.PipelineJob(display_name=example, template_path=str(compiled[(example, "vertex")]),
                                 project="my-project", location="us-central1", credentials=AnonymousCredentials(),
                                 parameter_values={"train_args": '{"numSteps": 50}'})
    runtime = job._gca_resource.runtime_config
    assert runtime.gcs_output_directory.startswith("gs://my-bucket/pipelines/")
    values = {key: json.loads(value.string_value) for key, value in runtime.parameters.items()}
    assert values == {**_steps(example), "train_args": {"numSteps": 50}}


def test_the_compiled_taxi_files_go_through_the_strict_fakes(compiled, fake_kfp, fake_vertex, credentials):
    """The fakes refuse what the services refuse (unknown fields, the backend's rules, schedule rules):
    tfxd's own taxi files are taken, as runs and as schedules."""
    from tfxd.kubeflow import schedules
    from tfxd.kubeflow.kubeflow_pipelines import submit_kubeflow
    from tfxd.kubeflow.vertex import submit_vertex

    sets = ("targets.kubeflow.schedule={cron: '0 3 * * 7'}",
            "targets.vertex.schedule={cron: '0 3 * * *', timezone: Europe/Berlin}")
    spec = load_spec(str(REPO / "examples" / "taxi.yaml"), sets, check_files=False).spec
    submit_kubeflow(spec, str(compiled[("taxi", "kubeflow")]), host=fake_kfp.url)
    assert schedules.apply(spec, "kubeflow", str(compiled[("taxi", "kubeflow")]), endpoint=fake_kfp.url).startswith(
        "created")
    submit_vertex(spec, str(compiled[("taxi", "vertex")]), credentials=credentials, api_endpoint=fake_vertex.url)
    assert schedules.apply(spec, "vertex", str(compiled[("taxi", "vertex")]), credentials=credentials,
                           endpoint=fake_vertex.url).startswith("created")
    assert len(fake_kfp.runs) == len(fake_kfp.recurring_runs) == len(fake_vertex.jobs) == 1
    assert len(fake_vertex.schedules) == 1
