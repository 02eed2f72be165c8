"""Spans on the cluster targets: the compiled files carry the span as the `span` parameter and hand
ExampleGen the scheduled time as the placeholder Vertex and KFP substitute; a schedule sends it; a
replay with `--param span=DAY` reads that day, and the same day again trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kfp import dsl

from tests.kubeflow.conftest import SPEC_TEXT
from tests.kubeflow.kfp_rules import backend_problems
from tests.pipeline.run.test_retraining import add_day
from tests.pipeline.run.test_run_taxi import tfxd
from tfxd.kubeflow import schedules
from tfxd.kubeflow.compile import compile_to
from tfxd.pipeline.spec.load import load_spec

SCHEDULED = (SPEC_TEXT.replace("path: data.csv", "path: data/{YYYY}-{MM}-{DD}/*.csv\n  spans: {span: scheduled, "
                               "offset_days: -1}").replace("  steps: 10\n", "  steps: 10\n  warm_start: true\n")
             + "validation:\n  drift: {threshold: 0.9}\n  skew: {threshold: 0.9, action: warn}\n")


@pytest.fixture
def compiled_spans(tmp_path):
    (tmp_path / "demo.yaml").write_text(SCHEDULED)
    files = {}
    for target, ext in (("kubeflow", "yaml"), ("vertex", "json")):
        loaded = load_spec(str(tmp_path / "demo.yaml"), ["targets.kubeflow.root=gs://demo-bucket/kfp"],
                           target=target, check_files=False)
        files[target] = compile_to(loaded, target, str(tmp_path / f"compiled.{ext}"))
    return tmp_path, files


def _example_gen(pipeline_spec: dict) -> dict:
    return pipeline_spec["root"]["dag"]["tasks"]["ExampleGen"]


def test_both_files_carry_the_span_parameter_and_the_scheduled_time(compiled_spans):
    _, files = compiled_spans
    kubeflow = yaml.safe_load(Path(files["kubeflow"]).read_text())
    vertex = json.loads(Path(files["vertex"]).read_text())
    for pipeline_spec in (kubeflow, vertex["pipelineSpec"]):
        task = _example_gen(pipeline_spec)
        assert task["inputs"]["parameters"]["tfxd_span"] == {"componentInputParameter": "span"}
        assert task["inputs"]["parameters"]["tfxd_schedule_time"] == {
            "runtimeValue": {"constant": dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER}}
        assert task["cachingOptions"] == {"enableCache": False}  # its input is the data, not the parameters
        span = pipeline_spec["root"]["inputDefinitions"]["parameters"]["span"]
        assert span.get("parameterType", span.get("type")) == "STRING"  # schema 2.1.0 / 2.0.0
    assert kubeflow["root"]["inputDefinitions"]["parameters"]["span"]["defaultValue"] == ""
    assert backend_problems(kubeflow) == []
    reader = json.loads(_example_gen(kubeflow)["inputs"]["parameters"]["reader_config"]["runtimeValue"]["constant"])
    assert reader["spans"]["path"] == "/tfxd/project/data/{YYYY}-{MM}-{DD}/*.csv"  # inside the image
    assert reader["spans"]["choice"] == {"scheduled": -1}
    assert reader["spans"]["pushed_to"] == "gs://demo-bucket/kfp/demo/serving"
    validator = kubeflow["root"]["dag"]["tasks"]["ExampleValidator"]["inputs"]  # the drift gate reads the spans
    assert validator["artifacts"]["examples"]["taskOutputArtifact"] == {"outputArtifactKey": "examples",
                                                                        "producerTask": "ExampleGen"}
    trainer = kubeflow["root"]["dag"]["tasks"]["Trainer"]  # warm start: the newest pushed model, found by a task
    assert trainer["inputs"]["artifacts"]["base_model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "model", "producerTask": "warm_start_model_resolver"}
    finder = kubeflow["root"]["dag"]["tasks"]["warm_start_model_resolver"]
    assert "artifacts" not in finder.get("inputs", {})  # no candidate: it runs before the Trainer
    assert finder["inputs"]["parameters"]["push_destination"]["runtimeValue"]["constant"] == (
        "gs://demo-bucket/kfp/demo/serving")
    vertex_dag = vertex["pipelineSpec"]["root"]["dag"]["tasks"]  # TFX's compiler: the resolver as two queries
    producer = vertex_dag["Trainer"]["inputs"]["artifacts"]["base_model"]["taskOutputArtifact"]["producerTask"]
    assert producer == "warm_start_model_resolver-model-resolver"
    executor = vertex["pipelineSpec"]["components"][vertex_dag[producer]["componentRef"]["name"]]["executorLabel"]
    query = vertex["pipelineSpec"]["deploymentSpec"]["executors"][executor]["resolver"]["outputArtifactQueries"]
    assert query["model"]["filter"].startswith('schema_title="tfx.Model"')
    drift = json.loads(validator["parameters"]["drift"]["runtimeValue"]["constant"])
    assert drift == {"action": "fail", "features": {}, "threshold": 0.9,
                     "store": "gs://demo-bucket/kfp/demo/pipeline/tfxd_span_statistics"}


def test_kfp_and_aiplatform_take_the_span_as_a_run_parameter(compiled_spans, tmp_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from kfp import compiler, components

    _, files = compiled_spans
    component = components.load_component_from_file(files["kubeflow"])
    assert component.component_spec.inputs["span"].default == ""

    def wrapped(span="2026-11-21"):
        component(span=span, train_args=defaults["train_args"], eval_args=defaults["eval_args"])

    defaults = {name: spec.default for name, spec in component.component_spec.inputs.items()}
    wrapped.__annotations__ = {"span": str}  # kfp reads real types, not this module's postponed ones
    again = tmp_path / "wrapped.yaml"
    compiler.Compiler().compile(dsl.pipeline(name="demo-wrapped")(wrapped), str(again))
    assert backend_problems(yaml.safe_load(again.read_text())) == []
    job = aiplatform.PipelineJob(display_name="demo", template_path=files["vertex"], project="demo-project",
                                 location="europe-west4", credentials=AnonymousCredentials(),
                                 parameter_values={"span": "2026-11-21"})
    assert job._gca_resource.runtime_config.parameters["span"].string_value == "2026-11-21"


def test_a_vertex_schedule_sends_the_scheduled_time_placeholder(compiled_spans, fake_vertex, credentials):
    folder, files = compiled_spans
    spec = load_spec(str(folder / "demo.yaml"), check_files=False).spec
    schedules.apply(spec, "vertex", files["vertex"], credentials=credentials, api_endpoint=fake_vertex.url)
    [create] = fake_vertex.writes()
    task = _example_gen(create.body["createPipelineJobRequest"]["pipelineJob"]["pipelineSpec"])
    assert task["inputs"]["parameters"]["tfxd_schedule_time"]["runtimeValue"]["constant"] == (
        "{{$.pipeline_job_schedule_time_utc}}")


def test_replay_reads_the_day_given_and_the_same_day_again_trains_nothing(tmp_path):
    for index, day in enumerate(("2026-11-20", "2026-11-21", "2026-11-22")):
        add_day(tmp_path, day, index)
    text = (SCHEDULED.replace("features:\n  - name: x\n    transform: zscore\n  - name: city\n    transform: vocabulary\n"
                     "    top_k: 10\n", "features:\n  - {name: fare, transform: zscore}\n"
                     "  - {name: company, transform: hash, buckets: 16}\n")
            .replace("label:\n  name: y\n  column: target\n  task: binary\n",
                     "label: {name: big_tipper, expr: \"tips > fare * 0.2\", task: binary}\n"
                     "evaluation:\n  thresholds: {binary_accuracy: {min: 0.3}}\nbeam: {workers: 1}\n"))
    (tmp_path / "demo.yaml").write_text(text)
    compiled = tmp_path / "demo.yaml.kfp"
    result = tfxd("compile", "demo.yaml", "--target", "kubeflow", "-o", str(compiled), "--set",
                  "targets.kubeflow.root=gs://demo-bucket/kfp", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    first = tfxd("replay", str(compiled), "--param", "span=2026-11-21", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    [summary_file] = (tmp_path / "tfxd-runs" / "demo" / "replay").glob("2*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["examples"] == {"spans": ["2026-11-21"]} and summary["pushed"]
    assert summary["warm_start"]["reason"] == "no blessed model yet"  # training.warm_start, nothing pushed yet
    assert summary["drift"]["span"] == "2026-11-21" and summary["skew"]["columns"]["fare"]["threshold"] == 0.9
    again = tfxd("replay", str(compiled), "--param", "span=2026-11-21", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    latest = sorted((tmp_path / "tfxd-runs" / "demo" / "replay").glob("2*/summary.json"))[-1]
    summary = json.loads(latest.read_text())
    assert summary["status"] == "skipped" and summary["reason"].startswith(
        "no new data: the spans to read (2026-11-21) are the ones the latest blessed model")
    assert [task["status"] for task in summary["tasks"]][:2] == ["skipped", "not run"]

    later = tfxd("replay", str(compiled), "--param", "span=2026-11-22", cwd=tmp_path)
    assert later.returncode == 0, later.stdout + later.stderr
    summary = json.loads(sorted((tmp_path / "tfxd-runs" / "demo" / "replay").glob("2*/summary.json"))[-1].read_text())
    warm = summary["warm_start"]  # from the model the first replay pushed, which the finder task copied
    assert warm["started"] is True, warm
    assert warm["from"] == summary["artifacts"]["warm_start_model_resolver.model"] + "/Format-Serving"
    assert summary["drift"]["previous_span"] == "2026-11-21" and "fare" in summary["drift"]["columns"]

