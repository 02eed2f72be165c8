"""The `beam` section -> Beam pipeline arguments for the runner it names (raw `args` appended last)."""

from __future__ import annotations

import os
import posixpath
import re

from tfxd.beam_engines import (
    CLUSTER_WORKER_POOL_PORT,
    ENGINES,
    JOB_ENDPOINT_ENV,
    RUNNERS,
    WORKER_POOL_ENV,
    Engine,
    runner_named,
)
from tfxd.direct_runner import NO_STAGING, direct_args, running_mode
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec

# Below this much input, worker processes cost more than they bring: each one starts Python, imports
# TensorFlow and is handed every bundle over gRPC (bench/RESULTS.md, end to end).
IN_MEMORY_BELOW_BYTES = 64 * 2**20


def beam_args(spec: Spec, image: str | None = None, input_bytes: int | None = None) -> list:
    """Arguments for the spec's runner; ``image`` is the pipeline image (for remote workers),
    ``input_bytes`` the local input's size (for `workers: 0`, auto). Strings, but for an engine tfxd starts
    for a local run: there the job server's and the SDK worker pool's addresses are TFX placeholders of
    the environment the run sets (tfxd.beam_engines), so that the cache key, which holds the arguments,
    stays the same from run to run while the ports change."""
    beam = spec.beam
    runner = RUNNERS[beam.runner]
    if runner.in_process:
        if image and not beam.workers:  # in the pipeline's container: Beam counts its CPUs there (0)
            workers, mode = 0, "multi_processing"
        else:
            small = input_bytes is not None and input_bytes < IN_MEMORY_BELOW_BYTES
            workers = beam.workers or (1 if small else os.cpu_count() or 1)
            mode = "in_memory" if workers == 1 else "multi_processing"
        args = direct_args(mode, workers)
    elif runner.target is not None:
        vertex = spec.targets.vertex
        assert vertex is not None  # the spec refuses dataflow without targets.vertex
        args = dataflow_args(spec, image or vertex.image)
    else:
        args = engine_args(spec, image)
    return [*args, *beam.args]


def pipeline_beam_args(loaded: LoadedSpec, image: str | None = None) -> list:
    """The Beam arguments of ``loaded``'s pipeline: run from ``image`` on a cluster, or (None) here, where the
    local input's size sizes the DirectRunner. One reading for the pipeline (assembly.dag) and for the worker
    pool a local run starts before it builds the pipeline (pipeline/run/local_run.py)."""
    return beam_args(loaded.spec, image, None if image else loaded.data_files.size)


THREADS = running_mode("multi_threading")


def example_gen_args(spec: Spec, args: list, column_wise: bool) -> list[str]:
    """ExampleGen's own Beam arguments, after the pipeline's ``args``: where those start DirectRunner worker
    processes, a ``column_wise`` ExampleGen runs its workers (as many) as threads of its own process instead.
    Its work is in Arrow's compute kernels and zlib, which let go of Python's lock, while a worker process
    first spends seconds importing Beam. TFRecords too: TensorFlow reads and parses them (example_columns),
    20 s as processes against 14 s as threads for 500,000 rows in 2 files. Not where the spec's beam.args name a running
    mode (the user's choice), nor for the row-wise reader (a split key), whose Python work would share one
    lock."""
    processes = any(isinstance(arg, str) and arg == running_mode("multi_processing") for arg in args)
    chosen = any(str(arg).startswith("--direct_running_mode") for arg in spec.beam.args)  # =mode, or mode next
    return [THREADS] if processes and column_wise and not chosen else []


# How long the job server keeps an SDK environment (worker processes) after a stage let go of it. Beam's
# default, 0, stops them at once: Spark then starts a Python worker, TensorFlow imported, for every task
# of every stage; kept a minute, a stage's workers serve the stages after it (bench/RESULTS.md).
ENVIRONMENT_CACHE_MS = 60_000
# Beam stages a `pip freeze` of the submitting Python with every job for a non-local runner
# (apache_beam/runners/portability/stager.py, _create_stage_submission_env_dependencies): a pip subprocess,
# ~0.6 s a job, whose file only Dataflow reads (to warn of mismatched packages); the engines' workers run
# tfxd's own pool or the pipeline image. Beam's own experiment turns it off.
NO_SUBMISSION_ENV = "--experiments=disable_logging_submission_environment"


def engine_args(spec: Spec, image: str | None) -> list:
    """Flink or Spark through Beam's portable job server, SDK workers in separate processes (EXTERNAL):
    tfxd's own worker pool for an engine it starts here; else the pool beside each TaskManager or Spark
    worker, which Beam's Kubernetes recipes run on localhost:50000 (docs/data.md, "Beam on Flink and Spark")."""
    from tfx.dsl.placeholder import (
        placeholder as ph,  # start-up: TFX loads only when a pipeline is built
    )

    beam = spec.beam
    engine = ENGINES[beam.runner]
    embedded = image is None and beam.master is None and beam.job_endpoint is None
    if beam.job_endpoint is not None:
        endpoint = f"--job_endpoint={beam.job_endpoint}"
    else:
        endpoint = "--job_endpoint=" + ph.environment_variable(JOB_ENDPOINT_ENV)
    pool = "--environment_config=" + ph.environment_variable(WORKER_POOL_ENV) if embedded else \
        f"--environment_config=localhost:{CLUSTER_WORKER_POOL_PORT}"
    args = [f"--runner={engine.beam_runner}", endpoint, "--environment_type=EXTERNAL", pool,
            f"--environment_cache_millis={ENVIRONMENT_CACHE_MS}", NO_SUBMISSION_ENV]
    workers = engine_workers(spec) if embedded else beam.workers
    if engine.parallelism_flag and workers:
        args.append(f"{engine.parallelism_flag}={workers}")
    if embedded:  # Beam starts one SDK worker per node by default, and an embedded engine is one node
        args.append(f"--sdk_worker_parallelism={workers}")
    # TFX stages an sdist of itself unless told where the workers' code is: in the image, or here
    args.append(f"--sdk_container_image={image}" if image else NO_STAGING)
    return args


def engine_workers(spec: Spec) -> int:
    """An engine tfxd starts here: its parallelism and SDK worker processes (`workers: 0`, one per CPU)."""
    return spec.beam.workers or os.cpu_count() or 1


def dataflow_args(spec: Spec, image: str) -> list[str]:
    """Dataflow from a Vertex run: the project and region of the Vertex target, its bucket for Beam's
    temporary and staged files, the pipeline image as the SDK container, the Vertex service account as the
    workers' (Beam's DataflowRunner validates these: tests/kubeflow/test_beam_engines_compiled.py)."""
    vertex = spec.targets.vertex
    assert vertex is not None
    args = [f"--runner={RUNNERS[spec.beam.runner].beam_runner}", f"--project={vertex.project}",
            f"--region={vertex.region}",
            f"--temp_location={posixpath.join(vertex.root, 'beam-tmp')}",
            f"--staging_location={posixpath.join(vertex.root, 'beam-staging')}",
            f"--sdk_container_image={image}", "--experiments=use_runner_v2"]
    if vertex.service_account:
        args.append(f"--service_account_email={vertex.service_account}")
    return args


# The flags above that pick the runner and size its workers (every runner's), as opposed to what the
# pipeline does: `tfxd replay` swaps them for the in-memory direct runner.
RUNNER_FLAGS = frozenset({"runner", "direct_running_mode", "direct_num_workers", "environment_type",
                          "environment_config", "job_endpoint", "parallelism", "sdk_worker_parallelism",
                          "environment_cache_millis", "sdk_container_image",
                          "update_compatibility_version"})


def in_memory(args: list[str]) -> list[str]:
    """``args`` with the runner swapped for the direct runner in one process, everything else kept."""
    kept = [arg for arg in args if not ((match := re.fullmatch(r"--([\w-]+)(=.*)?", arg))
                                        and match.group(1) in RUNNER_FLAGS)]
    return kept + direct_args("in_memory", 1)


def compiled_engine(args: list[str]) -> tuple[str, int] | None:
    """The engine compiled Beam ``args`` submit to (flink or spark, from the runner: tfxd's, or Beam's own
    of the same name, which files compiled before tfxd's runners carry) and their parallelism (0: not
    given), None for another runner."""
    runner = next((arg.split("=", 1)[1] for arg in args if arg.startswith("--runner=")), None)
    engine = runner_named(runner) if runner else None
    if not isinstance(engine, Engine):
        return None
    flag = engine.parallelism_flag
    parallelism = next((arg.split("=", 1)[1] for arg in args if flag and arg.startswith(f"{flag}=")), "0")
    return engine.name, int(parallelism) if parallelism.isdigit() else 0


def on_engine_here(args: list[str], job_endpoint: str, worker_pool: str | None) -> list[str]:
    """Compiled ``args`` pointed at an engine running here: its job server in place of the cluster's, its
    SDK worker pool in place of the pools beside the cluster's TaskManagers; the rest as compiled."""
    swapped = {"job_endpoint": job_endpoint, "environment_config": worker_pool}
    out = []
    for arg in args:
        match = re.fullmatch(r"--(job_endpoint|environment_config)=.*", arg)
        value = swapped[match.group(1)] if match else None
        out.append(f"--{match.group(1)}={value}" if match and value else arg)
    return out

