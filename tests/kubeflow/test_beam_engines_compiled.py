"""The Beam arguments compiled files carry for engines outside the pipeline's pods: Dataflow from a Vertex
file, judged by Beam's own PipelineOptionsValidator for the DataflowRunner (not by us); a Flink job server
in the cluster from a Kubeflow file."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
import yaml

from tests.conftest import REPO

SERVICE_ACCOUNT = "trainer@my-project.iam.gserviceaccount.com"


def _beam_args(executor: dict) -> list[str]:
    """A TFX container's Beam arguments: the last ones, from the runner on (TFX's own flags come first)."""
    args = executor["container"]["args"]
    return args[next(i for i, arg in enumerate(args) if arg.startswith("--runner=")):]


def _compile(tmp_path: Path, target: str, sets: list[str]) -> dict:
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    out = tmp_path / ("p.json" if target == "vertex" else "p.yaml")
    compile_to(load_spec(str(REPO / "examples" / "taxi.yaml"), sets, target=target), target, str(out))
    text = out.read_text()
    return json.loads(text)["pipelineSpec"] if target == "vertex" else yaml.safe_load(text)


def _validate_for_dataflow(args: list[str]) -> list[str]:
    """Beam's DataflowRunner validation of ``args``. `--dry_run` is Beam's own switch past the one check that
    reads the buckets over the network (GoogleCloudOptions._warn_if_soft_delete_policy_enabled); without
    a temp or staging location Beam would look up the project's default bucket, which offline there is none
    (gcsio.get_or_create_default_gcs_bucket answers None)."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    with mock.patch("apache_beam.io.gcp.gcsio.get_or_create_default_gcs_bucket", return_value=None):
        return PipelineOptionsValidator(PipelineOptions([*args, "--dry_run=True"]), DataflowRunner()).validate()


@pytest.fixture(scope="module")
def vertex_dataflow(tmp_path_factory) -> dict:
    return _compile(tmp_path_factory.mktemp("dataflow"), "vertex",
                    ["beam.runner=dataflow", f"targets.vertex.service_account={SERVICE_ACCOUNT}"])


def test_the_vertex_files_dataflow_flags_pass_beams_own_validation(vertex_dataflow):
    executors = vertex_dataflow["deploymentSpec"]["executors"]
    for name in ("ExampleGen_executor", "StatisticsGen_executor", "Transform_executor", "Evaluator_executor"):
        args = _beam_args(executors[name])
        assert _validate_for_dataflow(args) == [], name
        assert "--temp_location=gs://my-bucket/pipelines/beam-tmp" in args
        assert "--staging_location=gs://my-bucket/pipelines/beam-staging" in args
        assert f"--service_account_email={SERVICE_ACCOUNT}" in args
        assert "--sdk_container_image=us-docker.pkg.dev/my-project/ml/tfxd-taxi:0.1.0" in args


def test_beams_validation_bites_without_a_temp_location(vertex_dataflow):
    args = _beam_args(vertex_dataflow["deploymentSpec"]["executors"]["ExampleGen_executor"])
    without = [arg for arg in args if not arg.startswith(("--temp_location", "--staging_location"))]
    errors = _validate_for_dataflow(without)
    assert any("temp_location" in error for error in errors), errors
    no_project = [arg for arg in args if not arg.startswith("--project")]
    assert any("project" in error for error in _validate_for_dataflow(no_project))


def test_the_kubeflow_file_reaches_the_flink_job_server_in_the_cluster(tmp_path):
    """Each Beam step submits to the job server the spec names; SDK workers are the pools beside the
    TaskManagers (localhost:50000 in Beam's Flink-on-Kubernetes setup), running the pipeline image."""
    spec = _compile(tmp_path, "kubeflow", ["beam.runner=flink", "beam.workers=4",
                                           "beam.job_endpoint=beam-flink-job-server.flink:8099"])
    for name in ("ExampleGen_executor", "StatisticsGen_executor", "Transform_executor", "Evaluator_executor"):
        assert _beam_args(spec["deploymentSpec"]["executors"][name]) == [
            "--runner=tfxd.beam_runners.FlinkRunner", "--job_endpoint=beam-flink-job-server.flink:8099",
            "--environment_type=EXTERNAL", "--environment_config=localhost:50000", "--environment_cache_millis=60000", "--experiments=disable_logging_submission_environment", "--parallelism=4",
            "--sdk_container_image=registry.example.com/tfxd-taxi:0.1.0"], name


def test_the_compiled_kubeflow_file_replays_on_an_embedded_flink_as_compiled(tmp_path_factory):
    """`tfxd replay --beam-as-compiled`: the file's Beam steps submit to a Flink job server; here an
    embedded Flink stands for the cluster's, with its own SDK worker pool for the TaskManagers' pools. The
    data, pipeline root and push destination are on a bucket (tests/buckets/), so the SDK workers read and
    write it through Beam's GCSIO and TensorFlow's GCS filesystem, as the pools beside a cluster's
    TaskManagers do."""
    from tests.buckets.server import bucket_server
    from tests.kubeflow.on_bucket import compiled_on_bucket, objects, replay_on_bucket
    from tests.pipeline.run.test_beam_engines import _ours

    files = compiled_on_bucket(tmp_path_factory, "taxi", "tfxd-flink", "beam.runner=flink", "beam.workers=2",
                               "beam.job_endpoint=beam-flink-job-server.flink:8099")
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket("tfxd-flink")
        server.upload_folder(REPO / "examples" / "data" / "taxi", "tfxd-flink", "data/taxi")
        result, summary = replay_on_bucket(server, files["kubeflow"], files, "--beam-as-compiled", "--param",
                                           'train_args={"numSteps": 100}')
        assert "Flink 1.19 through Beam's job server (embedded, 2 SDK worker processes)" in result.stdout
        assert summary["status"] == "ok" and summary["blessed"] is True and summary["pushed"] is True
        assert summary["beam"] == "as compiled, on Flink here" and summary["buckets"] == {}
        pushed = summary["pushed_destination"]
        assert pushed.startswith("gs://tfxd-flink/serving/"), pushed
        assert any(name.endswith("/saved_model.pb") for name in objects(server, pushed))
        # Beam's GCSIO (google-cloud-storage) in the SDK workers reached the bucket, not only TensorFlow
        assert any("gccl/" in agent for _, _, agent, _ in server.front.seen.requests)
    [log] = files["root"].glob("*/logs/flink-job-server.log")
    assert log.read_text(errors="replace").count("switched from state RUNNING to FINISHED.") >= 4
    assert _ours() == []
