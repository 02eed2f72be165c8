"""The Trainer as a Vertex AI custom job, when `targets.vertex.trainer` asks for more than one process or
for accelerators.

The pipeline's Trainer task launches a CustomJob whose worker pools come from the spec (pool 0: one
chief; pool 1: the other workers; pool 2: parameter servers), each replica running tfxd's own Trainer
executor in the pipeline image. Vertex sets CLUSTER_SPEC in every replica; the planner reads it there
and picks the strategy (MultiWorkerMirrored, or ParameterServer when there are ps).

TFX's Google Cloud extension launches and follows the job (it imports the aiplatform SDK, so this
module is imported only where a Vertex Trainer is compiled or run). `tfxd replay` runs the same task,
sending the job to a local stand-in of Vertex's JobService (kubeflow/replay/vertex_jobs.py).
"""

from __future__ import annotations

from typing import Any

from tfx.components.trainer.component import Trainer as TfxTrainer
from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform.trainer import executor as cloud_executor

from tfxd import files
from tfxd.components.trainer import executor as tfxd_executor


def worker_pools(trainer, image: str) -> list[dict[str, Any]]:
    """Vertex worker pool specs. Accelerators go where the replicas compute: the chief and the workers
    under MultiWorkerMirrored; the workers only under ParameterServer (the chief coordinates)."""
    parameter_servers = trainer.parameter_servers

    def machine(accelerated: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"machine_type": trainer.machine_type}
        if accelerated and trainer.accelerator is not None:
            spec["accelerator_type"] = trainer.accelerator.type
            spec["accelerator_count"] = trainer.accelerator.count
        return spec

    def pool(replicas: int, accelerated: bool) -> dict[str, Any]:
        return {"replica_count": replicas, "machine_spec": machine(accelerated),
                "container_spec": {"image_uri": image}}

    # with ps, `workers` counts the workers beside the chief; without, the chief is worker 0
    other_workers = trainer.workers if parameter_servers else trainer.workers - 1
    pools = [pool(1, accelerated=not parameter_servers)]
    if other_workers or parameter_servers:
        pools.append(pool(other_workers, accelerated=True))
    if parameter_servers:
        pools.append(pool(parameter_servers, accelerated=False))
    return pools


def custom_config(vertex) -> dict[str, Any]:
    """What TFX's cloud training executor reads from the Trainer's custom_config."""
    job_spec: dict[str, Any] = {"worker_pool_specs": worker_pools(vertex.trainer, vertex.image)}
    if vertex.service_account:
        job_spec["service_account"] = vertex.service_account
    return {cloud_executor.TRAINING_ARGS_KEY: {"project": vertex.project, "job_spec": job_spec},
            constants.ENABLE_VERTEX_KEY: True, constants.VERTEX_REGION_KEY: vertex.region}


class Executor(cloud_executor.GenericExecutor):
    """Launches the custom job and waits for it; its replicas run tfxd's Trainer executor."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retried task meets the first attempt's half-saved model
        super().Do(input_dict, output_dict, exec_properties)

    def _GetExecutorClass(self):  # noqa: N802 - TFX's name
        return tfxd_executor.Executor


class VertexTrainer(TfxTrainer):
    """tfxd's Trainer, trained by a Vertex AI custom job."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
