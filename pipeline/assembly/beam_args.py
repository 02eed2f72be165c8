"""The `beam` section -> Beam pipeline arguments for the runner it names (raw `args` appended last)."""

from __future__ import annotations

import os
import posixpath
import re

from tfxd.pipeline.spec.document import Spec

# TFX builds and stages an sdist of itself for Beam unless one of its dependency flags is set
# (tfx.utils.dependency_utils). The direct runner stages nothing, so the flag only stops that work.
_NO_STAGING = "--sdk_container_image=none-needed-by-the-direct-runner"


# Beam 2.74's DirectRunner first hands every pipeline to the Prism runner, a Go binary it downloads
# from GitHub: offline a failed download, up to seconds a pipeline and temp folders left in /tmp; online
# another engine than the one tfxd sizes. It skips Prism for a pipeline pinned to an update
# compatibility version: pinning Beam's own version changes no transform (none is "prior to" it).
def _no_prism() -> str:
    from importlib.metadata import version

    return f"--update_compatibility_version={version('apache-beam')}"


# Below this much input, worker processes cost more than they bring: each one starts Python, imports
# TensorFlow and is handed every bundle over gRPC (bench/RESULTS.md, end to end).
IN_MEMORY_BELOW_BYTES = 64 * 2**20


def beam_args(spec: Spec, image: str | None = None, input_bytes: int | None = None) -> list[str]:
    """Arguments for the spec's runner; ``image`` is the pipeline image (for remote workers),
    ``input_bytes`` the local input's size (for `workers: 0`, auto)."""
    beam = spec.beam
    if beam.runner == "direct":
        if image and not beam.workers:  # in the pipeline's container: Beam counts its CPUs there (0)
            workers, mode = 0, "multi_processing"
        else:
            small = input_bytes is not None and input_bytes < IN_MEMORY_BELOW_BYTES
            workers = beam.workers or (1 if small else os.cpu_count() or 1)
            mode = "in_memory" if workers == 1 else "multi_processing"
        args = direct_args(mode, workers)
    elif beam.runner == "dataflow":
        vertex = spec.targets.vertex
        assert vertex is not None  # the spec refuses dataflow without targets.vertex
        args = ["--runner=DataflowRunner", f"--project={vertex.project}", f"--region={vertex.region}",
                f"--temp_location={posixpath.join(vertex.root, 'beam-tmp')}",
                f"--sdk_container_image={image or vertex.image}", "--experiments=use_runner_v2"]
    else:
        environment = (["--environment_type=DOCKER", f"--environment_config={image}"] if image
                       else ["--environment_type=LOOPBACK"])
        if beam.runner == "flink":
            args = ["--runner=FlinkRunner", f"--flink_master={beam.master}", "--flink_submit_uber_jar",
                    *environment]
        else:
            args = ["--runner=SparkRunner", f"--spark_master_url={beam.master}", "--spark_submit_uber_jar",
                    *environment]
        if not image:
            args.append(_NO_STAGING)
    return [*args, *beam.args]


def direct_args(mode: str, workers: int) -> list[str]:
    """The DirectRunner in ``mode`` (in_memory, multi_processing) with ``workers`` (0: one per CPU)."""
    return ["--runner=DirectRunner", f"--direct_running_mode={mode}", f"--direct_num_workers={workers}",
            _NO_STAGING, _no_prism()]


# The flags above that pick the runner and size its workers (every runner's), as opposed to what the
# pipeline does: `tfxd replay` swaps them for the in-memory direct runner.
RUNNER_FLAGS = frozenset({"runner", "direct_running_mode", "direct_num_workers", "environment_type",
                          "environment_config", "flink_master", "flink_submit_uber_jar", "spark_master_url",
                          "spark_submit_uber_jar", "sdk_container_image", "update_compatibility_version"})


def in_memory(args: list[str]) -> list[str]:
    """``args`` with the runner swapped for the direct runner in one process, everything else kept."""
    kept = [arg for arg in args if not ((match := re.fullmatch(r"--([\w-]+)(=.*)?", arg))
                                        and match.group(1) in RUNNER_FLAGS)]
    return kept + direct_args("in_memory", 1)


def lighten_in_memory_runner(args: list[str]) -> None:
    """Beam's in-process runner weighs every value it caches (side inputs, iterables) by walking its
    object graph (objsize): about a tenth of Transform's time on the taxi example (py-spy). In one
    process the state is in memory already, so the cache saves nothing and is turned off (Beam 2.74's
    module setting, read when the runner starts its worker; Beam's own tests run without it). Worker
    processes (multi_processing) keep theirs."""
    if "--direct_running_mode=in_memory" in args:
        from apache_beam.runners.portability.fn_api_runner import worker_handlers

        worker_handlers.STATE_CACHE_SIZE_MB = 0
