"""Beam runner profiles from the `beam` section."""

from __future__ import annotations

import os
from unittest import mock

from tests.conftest import BASE_SPEC, write_spec
from tfxd.beam_engines import JOB_ENDPOINT_ENV, WORKER_POOL_ENV
from tfxd.pipeline.assembly.beam_args import (
    IN_MEMORY_BELOW_BYTES,
    THREADS,
    beam_args,
    compiled_engine,
    pipeline_beam_args,
)
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
                    "--temp_location=gs://bucket/runs/beam-tmp", "--staging_location=gs://bucket/runs/beam-staging",
                    "--sdk_container_image=us-docker.pkg.dev/p/ml/img:1",
                    "--experiments=use_runner_v2", "--max_num_workers=5"]


def test_an_engine_started_here_is_found_through_the_environment(project):
    """The job server's and worker pool's ports change from run to run; the arguments (part of TFX's cache
    key) name the environment variables the run sets, which TFX resolves when the step executes."""
    from tfx.dsl.compiler import placeholder_utils
    from tfx.orchestration.portable import data_types

    args = args_for(project, "beam: {runner: flink, workers: 2}\n")
    assert args[0] == "--runner=tfxd.beam_runners.FlinkRunner" and args[2] == "--environment_type=EXTERNAL"
    assert args[4:] == ["--environment_cache_millis=60000", "--experiments=disable_logging_submission_environment", "--parallelism=2", "--sdk_worker_parallelism=2",
                        "--sdk_container_image=none-needed-by-the-direct-runner"]
    context = placeholder_utils.ResolutionContext(exec_info=data_types.ExecutionInfo())
    env = {JOB_ENDPOINT_ENV: "127.0.0.1:1234", WORKER_POOL_ENV: "127.0.0.1:5678"}
    with mock.patch.dict(os.environ, env):
        resolved = [placeholder_utils.resolve_placeholder_expression(arg.encode(), context) for arg in args[1:4:2]]
    assert resolved == ["--job_endpoint=127.0.0.1:1234", "--environment_config=127.0.0.1:5678"]
    spark = args_for(project, "beam: {runner: spark, master: 'spark://h:7077'}\n")
    assert spark[0] == "--runner=tfxd.beam_runners.SparkRunner" and spark[3] == "--environment_config=localhost:50000"
    assert not any(isinstance(arg, str) and arg.startswith("--parallelism") for arg in spark)


def test_on_a_cluster_the_engine_is_the_job_server_the_spec_names(project):
    spec = load_spec(str(write_spec(project, BASE_SPEC + "beam: {runner: flink, workers: 4, job_endpoint: "
                                    "'beam-flink-job-server:8099', args: [--max_parallelism=8]}\n"))).spec
    assert beam_args(spec, image="img:1") == [
        "--runner=tfxd.beam_runners.FlinkRunner", "--job_endpoint=beam-flink-job-server:8099", "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000", "--environment_cache_millis=60000", "--experiments=disable_logging_submission_environment", "--parallelism=4", "--sdk_container_image=img:1",
        "--max_parallelism=8"]


def test_direct_runner_is_pinned_past_the_prism_detour(project):
    """Beam's DirectRunner skips its Prism attempt (a download from GitHub) for a pipeline pinned to an
    update compatibility version; Beam's own version changes no transform."""
    from importlib.metadata import version

    for beam in ("", "beam: {workers: 2}\n", "beam: {workers: 1}\n"):
        assert f"--update_compatibility_version={version('apache-beam')}" in args_for(project, beam)
    flink = args_for(project, "beam: {runner: flink, job_endpoint: 'localhost:8099'}\n")
    assert not any(a.startswith("--update_compatibility_version") for a in flink)


def test_a_compiled_file_names_its_engine_by_tfxds_runner_or_beams():
    """Files compiled before tfxd's runners (tfxd/beam_runners.py) carry Beam's own runner names."""
    assert compiled_engine(["--runner=tfxd.beam_runners.SparkRunner", "--job_endpoint=x:1"]) == ("spark", 0)
    assert compiled_engine(["--runner=FlinkRunner", "--parallelism=4"]) == ("flink", 4)
    assert compiled_engine(["--runner=DirectRunner"]) is None
    assert compiled_engine(["--parallelism=4"]) is None


def _example_gen_mode(project, text: str) -> tuple[list, str]:
    """(ExampleGen's Beam arguments, the running mode its executor gets) in the whole pipeline of spec ``text``."""
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

    from tfxd.pipeline.assembly.dag import tfx_pipeline

    loaded = load_spec(str(write_spec(project, text)))
    example_gen = tfx_pipeline(loaded, to="ExampleGen").components[0]
    args = example_gen.executor_spec.beam_pipeline_args  # the pipeline's, then the component's (TFX's merge)
    return args, PipelineOptions(args).view_as(DirectOptions).direct_running_mode


TWO = "beam: {workers: 2}\n"


def test_the_column_wise_example_gen_runs_worker_processes_as_threads(project):
    """Its work is in Arrow and zlib, which let go of Python's lock: no ~1.5 s of Beam imports per worker."""
    args, mode = _example_gen_mode(project, BASE_SPEC + TWO)
    assert mode == "multi_threading" and args[-1] == THREADS and "--direct_num_workers=2" in args
    (project / "data.jsonl").write_text('{"x": 1.0, "city": "a", "target": 1}\n', encoding="utf-8")
    jsonl = BASE_SPEC.replace("format: csv", "format: jsonl").replace("data.csv", "data.jsonl")
    args, mode = _example_gen_mode(project, jsonl + TWO)
    assert mode == "multi_threading" and args[-1] == THREADS


def test_example_gen_keeps_processes_where_the_user_chose_or_it_reads_row_by_row(project):
    assert _example_gen_mode(project, BASE_SPEC + "beam: {workers: 1}\n")[1] == "in_memory"  # one worker
    chosen = BASE_SPEC + "beam: {workers: 2, args: [--direct_running_mode=multi_processing]}\n"
    assert _example_gen_mode(project, chosen)[1] == "multi_processing"
    split_key = BASE_SPEC.replace("  path: data.csv\n", "  path: data.csv\n  split_key: city\n")
    args, mode = _example_gen_mode(project, split_key + TWO)
    assert THREADS not in args and mode == "multi_processing"  # partitioned by a column: row-wise


def test_a_local_runs_pool_reads_the_arguments_its_pipeline_gets(project):
    """pipeline_beam_args is the pipeline's reading (the pool local_run starts before it builds the
    pipeline asks it): sized by the local input here, by the image's container on a cluster."""
    from tfxd.pipeline.assembly.dag import tfx_pipeline

    loaded = load_spec(str(write_spec(project, BASE_SPEC + VERTEX)))
    assert pipeline_beam_args(loaded) == tfx_pipeline(loaded).beam_pipeline_args
    assert pipeline_beam_args(loaded)[1] == "--direct_running_mode=in_memory"  # the spec's few rows
    image = loaded.spec.targets.vertex.image
    assert pipeline_beam_args(loaded, image) == tfx_pipeline(loaded, target="vertex").beam_pipeline_args
    assert pipeline_beam_args(loaded, image)[1:3] == ["--direct_running_mode=multi_processing",
                                                      "--direct_num_workers=0"]
