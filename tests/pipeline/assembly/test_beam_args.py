"""Beam runner profiles from the `beam` section."""

from __future__ import annotations

import os

from tests.conftest import BASE_SPEC, write_spec
from tfxd.pipeline.assembly.beam_args import IN_MEMORY_BELOW_BYTES, beam_args
from tfxd.pipeline.spec.load import load_spec

VERTEX = """targets:
  vertex: {project: my-project, region: us-central1, image: us-docker.pkg.dev/p/ml/img:1, root: gs://bucket/runs}
"""


def args_for(project, beam: str, extra: str = "") -> list[str]:
    return beam_args(load_spec(str(write_spec(project, BASE_SPEC + beam + extra))).spec)


def test_direct_defaults_to_one_process_per_cpu_for_large_or_remote_input(project):
    spec = load_spec(str(write_spec(project, BASE_SPEC))).spec
    for size in (None, IN_MEMORY_BELOW_BYTES):
        args = beam_args(spec, input_bytes=size)
        assert args[:3] == ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
                            f"--direct_num_workers={os.cpu_count()}"]
        assert any(a.startswith("--sdk_container_image=") for a in args)  # stops TFX staging an sdist of itself


def test_direct_runs_small_input_in_memory(project):
    spec = load_spec(str(write_spec(project, BASE_SPEC))).spec
    assert beam_args(spec, input_bytes=IN_MEMORY_BELOW_BYTES - 1)[1:3] == ["--direct_running_mode=in_memory",
                                                                          "--direct_num_workers=1"]
    two = load_spec(str(write_spec(project, BASE_SPEC + "beam: {workers: 2}\n"))).spec
    assert beam_args(two, input_bytes=10)[1:3] == ["--direct_running_mode=multi_processing",
                                                   "--direct_num_workers=2"]


def test_direct_with_one_worker_runs_in_memory(project):
    assert "--direct_running_mode=in_memory" in args_for(project, "beam: {workers: 1, args: [--foo=1]}\n")
    assert args_for(project, "beam: {workers: 1, args: [--foo=1]}\n")[-1] == "--foo=1"


def test_dataflow_takes_the_vertex_target(project):
    args = args_for(project, "beam: {runner: dataflow, args: [--max_num_workers=5]}\n", VERTEX)
    assert args == ["--runner=DataflowRunner", "--project=my-project", "--region=us-central1",
                    "--temp_location=gs://bucket/runs/beam-tmp", "--sdk_container_image=us-docker.pkg.dev/p/ml/img:1",
                    "--experiments=use_runner_v2", "--max_num_workers=5"]


def test_flink_and_spark(project):
    flink = args_for(project, "beam: {runner: flink, master: 'localhost:8081'}\n")
    assert flink[:3] == ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--flink_submit_uber_jar"]
    spark = beam_args(load_spec(str(write_spec(project, BASE_SPEC + "beam: {runner: spark, master: "
                                               "'spark://h:7077'}\n"))).spec, image="img:1")
    assert spark == ["--runner=SparkRunner", "--spark_master_url=spark://h:7077", "--spark_submit_uber_jar",
                     "--environment_type=DOCKER", "--environment_config=img:1"]


def test_direct_runner_is_pinned_past_the_prism_detour(project):
    """Beam's DirectRunner skips its Prism attempt (a download from GitHub) for a pipeline pinned to an
    update compatibility version; Beam's own version changes no transform."""
    from importlib.metadata import version

    for beam in ("", "beam: {workers: 2}\n", "beam: {workers: 1}\n"):
        assert f"--update_compatibility_version={version('apache-beam')}" in args_for(project, beam)
    flink = args_for(project, "beam: {runner: flink, master: 'localhost:8081'}\n")
    assert not any(a.startswith("--update_compatibility_version") for a in flink)
