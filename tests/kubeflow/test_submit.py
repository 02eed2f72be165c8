"""`tfxd submit` against local fakes of Vertex AI and Kubeflow Pipelines: what goes over the wire."""

from __future__ import annotations

import json
import logging
import re
import sys

import pytest
import yaml

from tests.kubeflow.kfp_rules import same_pipeline_spec
from tfxd.kubeflow.clients import RunFailed, compiled_hash, quiet, spec_hash
from tfxd.kubeflow.cluster_target import pipeline_tasks
from tfxd.kubeflow.kubeflow_pipelines import submit_kubeflow
from tfxd.kubeflow.vertex import submit_vertex

FAST = {"poll_interval": 0.01, "timeout": 10}


def _job_request(fake):
    [request] = fake.calls("POST", "/pipelineJobs")
    return request


# ---------------------------------------------------------------------------- hashes


def test_spec_hash_follows_the_resolved_spec(make_spec):
    first = spec_hash(make_spec())
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert spec_hash(make_spec()) == first
    assert spec_hash(make_spec("training.steps=20")) != first


def test_compiled_hash_follows_the_file(make_compiled):
    a, b = make_compiled("kubeflow", "a"), make_compiled("kubeflow", "b")
    assert re.fullmatch(r"[0-9a-f]{16}", compiled_hash(str(a)))
    assert compiled_hash(str(a)) != compiled_hash(str(b))


# ---------------------------------------------------------------------------- Vertex AI


def test_vertex_submit_sends_the_compiled_job_with_labels(fake_vertex, make_spec, make_compiled, credentials):
    spec = make_spec()
    path = make_compiled("vertex")
    result = submit_vertex(spec, str(path), credentials=credentials, api_endpoint=fake_vertex.url)

    request = _job_request(fake_vertex)
    assert request.path == "/v1/projects/demo-project/locations/europe-west4/pipelineJobs"
    body = request.body
    assert body["displayName"] == "demo"
    file_labels = json.loads(path.read_text())["labels"]  # TFX's own (tfx_version, tfx_runner...)
    assert file_labels["tfx_runner"] == "kubeflow_v2"
    assert body["labels"] == {"tfxd-spec": spec_hash(spec), "tfxd-compiled": compiled_hash(str(path)),
                              "tfxd-pipeline": "demo", **file_labels}
    assert body["serviceAccount"] == "runner@demo-project.iam.gserviceaccount.com"
    assert body["runtimeConfig"]["gcsOutputDirectory"] == "gs://demo-bucket/pipelines/demo/pipeline"
    compiled = json.loads(path.read_text())
    tasks = pipeline_tasks(body["pipelineSpec"])
    # as compiled (no spans): every task cached but the one finding the baseline, which reads the bucket
    assert {name: task["cachingOptions"] for name, task in tasks.items()} == {
        name: {"enableCache": name != "latest_blessed_model_resolver"} for name in tasks}
    assert body["pipelineSpec"] == compiled["pipelineSpec"]  # caching options included: the SDK left them
    job_id = request.query["pipelineJobId"]
    assert job_id.startswith("demo-")

    assert result["name"] == f"projects/demo-project/locations/europe-west4/pipelineJobs/{job_id}"
    assert result["state"] == "PENDING"
    assert result["console_url"] == (f"https://console.cloud.google.com/vertex-ai/locations/europe-west4/"
                                     f"pipelines/runs/{job_id}?project=demo-project")
    assert not fake_vertex.calls("GET", "/pipelineJobs/")  # no wait: no polling


def test_vertex_root_without_one_in_the_file_follows_the_compiler(fake_vertex, make_spec, make_compiled,
                                                                   credentials):
    """A bare PipelineSpec has no runtimeConfig: the root is <targets.vertex.root>/<name>/pipeline."""
    submit_vertex(make_spec(), str(make_compiled("kubeflow")), credentials=credentials,
                  api_endpoint=fake_vertex.url)
    body = _job_request(fake_vertex).body
    assert body["runtimeConfig"]["gcsOutputDirectory"] == "gs://demo-bucket/pipelines/demo/pipeline"
    assert body["labels"]["tfxd-pipeline"] == "demo"


def test_vertex_wait_reports_each_state_change_once(fake_vertex, make_spec, make_compiled, credentials):
    fake_vertex.job_states = ["PIPELINE_STATE_PENDING", "PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING",
                              "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED"]
    seen: list[str] = []
    result = submit_vertex(make_spec(), str(make_compiled("vertex")), wait=True, credentials=credentials,
                           api_endpoint=fake_vertex.url, on_state=seen.append, **FAST)

    assert seen == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert len(fake_vertex.calls("GET", "/pipelineJobs/")) == 5  # polled until it ended, then stopped
    assert result["state"] == "SUCCEEDED"
    assert result["console_url"].startswith("https://console.cloud.google.com/vertex-ai/locations/europe-west4/"
                                            "pipelines/runs/demo-")


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED"])
def test_vertex_failed_job_raises_with_its_message(fake_vertex, make_spec, make_compiled, credentials, state):
    fake_vertex.job_states = ["PIPELINE_STATE_RUNNING", f"PIPELINE_STATE_{state}"]
    fake_vertex.job_error = {"code": 9, "message": "The DAG failed because some tasks failed: Trainer"}
    seen: list[str] = []
    with pytest.raises(RunFailed, match=f"ended {state}: The DAG failed because some tasks failed: Trainer") as info:
        submit_vertex(make_spec(), str(make_compiled("vertex")), wait=True, credentials=credentials,
                      api_endpoint=fake_vertex.url, on_state=seen.append, **FAST)
    assert info.value.state == state
    assert info.value.url and info.value.url.startswith("https://console.cloud.google.com/")
    assert seen == ["RUNNING", state]


def test_vertex_wait_gives_up_after_its_timeout(fake_vertex, make_spec, make_compiled, credentials):
    fake_vertex.job_states = ["PIPELINE_STATE_RUNNING"]
    with pytest.raises(TimeoutError, match="still RUNNING"):
        submit_vertex(make_spec(), str(make_compiled("vertex")), wait=True, credentials=credentials,
                      api_endpoint=fake_vertex.url, poll_interval=0.01, timeout=0.1)


def test_vertex_submit_keeps_stdout_clean(fake_vertex, make_spec, make_compiled, credentials, capsys):
    submit_vertex(make_spec(), str(make_compiled("vertex")), credentials=credentials, api_endpoint=fake_vertex.url)
    assert capsys.readouterr().out == ""


def test_quiet_drops_sdk_info_and_moves_its_errors_to_stderr(capsys):
    """aiplatform installs StreamHandler(sys.stdout) on its loggers (unless a StreamHandler is already
    in the hierarchy, as under pytest); inside quiet() its INFO is dropped and the rest goes to stderr."""
    logger = logging.getLogger("google.cloud.aiplatform.tfxd_test")
    handler = logging.StreamHandler(sys.stdout)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # as aiplatform's VertexLogger does
    logger.propagate = False
    try:
        with quiet():
            logger.warning("the bucket check failed")
            logger.info("Creating PipelineJob")
            print("Run details: http://...")
        logger.info("after")
    finally:
        logger.removeHandler(handler)
    captured = capsys.readouterr()
    assert captured.out == "after\n"
    assert captured.err == "the bucket check failed\n"
    assert handler.stream is sys.stdout


def test_vertex_submit_needs_the_target(make_spec, make_compiled):
    with pytest.raises(ValueError, match="no targets.vertex"):
        submit_vertex(make_spec("targets.vertex=null"), str(make_compiled("vertex")))


# ---------------------------------------------------------------------------- Kubeflow Pipelines


def test_kubeflow_submit_creates_a_run_of_the_package(fake_kfp, make_spec, make_compiled, capsys):
    path = make_compiled("kubeflow")
    result = submit_kubeflow(make_spec(), str(path), host=fake_kfp.url)

    [experiment] = fake_kfp.calls("POST", "/experiments")
    assert experiment.body["display_name"] == "demo"
    [request] = fake_kfp.calls("POST", "/runs")
    assert same_pipeline_spec(request.body["pipeline_spec"], yaml.safe_load(path.read_text()))
    caching = pipeline_tasks(request.body["pipeline_spec"])["ExampleGen"]["cachingOptions"]
    assert not caching.get("enableCache")  # ExampleGen still never cached: kfp.Client left it as compiled
    assert request.body["experiment_id"] == next(iter(fake_kfp.experiments))
    assert request.body["display_name"].startswith("demo ")
    [run_id] = fake_kfp.runs
    assert result["run_id"] == run_id
    assert result["state"] == "PENDING"
    assert result["url"] == f"{fake_kfp.url}/#/runs/details/{run_id}"
    assert capsys.readouterr().out == ""  # kfp's "Run details: ..." prints are swallowed
    assert "pipeline_root" not in request.body["runtime_config"]  # no bucket in the spec: KFP's default


def test_kubeflow_run_gets_the_compilers_pipeline_root(fake_kfp, make_spec, make_compiled):
    submit_kubeflow(make_spec("targets.kubeflow.root=gs://kfp-bucket/runs"), str(make_compiled("kubeflow")),
                    host=fake_kfp.url)
    [request] = fake_kfp.calls("POST", "/runs")
    assert request.body["runtime_config"]["pipeline_root"] == "gs://kfp-bucket/runs/demo/pipeline"


def test_kubeflow_submit_takes_the_spec_host_and_reuses_the_experiment(fake_kfp, make_spec, make_compiled):
    spec = make_spec(f"targets.kubeflow.host={fake_kfp.url}/")
    submit_kubeflow(spec, str(make_compiled("kubeflow")))
    submit_kubeflow(spec, str(make_compiled("kubeflow")))
    assert len(fake_kfp.calls("POST", "/experiments")) == 1
    assert len(fake_kfp.calls("POST", "/runs")) == 2


def test_kubeflow_wait_follows_the_run(fake_kfp, make_spec, make_compiled):
    fake_kfp.run_states = ["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    seen: list[str] = []
    result = submit_kubeflow(make_spec(), str(make_compiled("kubeflow")), host=fake_kfp.url, wait=True,
                             on_state=seen.append, **FAST)
    assert seen == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert result["state"] == "SUCCEEDED"
    assert len(fake_kfp.calls("GET", "/runs/")) == 3


def test_kubeflow_failed_run_raises_with_its_message(fake_kfp, make_spec, make_compiled):
    fake_kfp.run_states = ["RUNNING", "FAILED"]
    fake_kfp.run_error = {"code": 2, "message": "Trainer: OOMKilled"}
    with pytest.raises(RunFailed, match="ended FAILED: Trainer: OOMKilled") as info:
        submit_kubeflow(make_spec(), str(make_compiled("kubeflow")), host=fake_kfp.url, wait=True, **FAST)
    assert info.value.state == "FAILED"
    assert info.value.url == f"{fake_kfp.url}/#/runs/details/{info.value.name}"


# ---------------------------------------------------------------------------- the fakes refuse what the services refuse


def test_kfp_refuses_a_pipeline_spec_the_backend_would_not_run(fake_kfp, make_spec, make_compiled, tmp_path):
    """tfxd's Vertex file (schema 2.0.0, a driver hook) sent as a KFP package."""
    vertex = json.loads(make_compiled("vertex").read_text())["pipelineSpec"]
    package = tmp_path / "not-for-kfp.yaml"
    package.write_text(yaml.safe_dump(vertex))
    with pytest.raises(Exception, match="invalid v2 pipeline spec: schemaVersion '2.0.0' is not 2.1.0") as caught:
        submit_kubeflow(make_spec(), str(package), host=fake_kfp.url)
    assert "executor ExampleGen_executor has lifecycle hooks the backend does not run" in str(caught.value)
    assert fake_kfp.runs == {}


def test_kfp_refuses_an_unknown_field(fake_kfp):
    status, answer = fake_kfp.dispatch("POST", "/apis/v2beta1/runs", json.dumps(
        {"display_name": "x", "runtime_config": {"pipeline_root": "gs://b", "root": "gs://b"}}).encode())
    assert status == 400 and 'V2beta1Run.runtime_config: unknown field "root"' in answer["message"]


def test_vertex_refuses_an_unknown_field_and_a_bad_transition(fake_vertex):
    parent = "/v1/projects/p/locations/us-central1"
    status, answer = fake_vertex.dispatch("POST", parent + "/pipelineJobs", json.dumps(
        {"displayName": "x", "pipelineRoot": "gs://b"}).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    assert "pipelineRoot" in answer["error"]["message"]
    schedule = fake_vertex.add_schedule(parent[4:], {"displayName": "x", "cron": "TZ=UTC 0 3 * * *"})
    status, answer = fake_vertex.dispatch("POST", f"/v1/{schedule['name']}:resume", b"")
    assert status == 400 and answer["error"]["status"] == "FAILED_PRECONDITION"
    status, answer = fake_vertex.dispatch("POST", parent + "/schedules", json.dumps(
        {"displayName": "y", "cron": "TZ=Mars/Olympus 0 3 * * *"}).encode())
    assert status == 400 and "time zone" in answer["error"]["message"]
