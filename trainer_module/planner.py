"""The strategy planner: one pure function from (environment, devices, training spec) to a plan.

This is the one place that decides how to train: which tf.distribute strategy,
how many replicas, who is chief, the global batch, how input is sharded, the
precision and the collective implementation. It follows the decision table in
this folder's README.md; an explicit ``training.strategy`` wins, and is refused with a
reason when the hardware or cluster cannot serve it. TensorFlow is not
imported here (see ``strategy.py`` for the thin adapter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfxd.trainer_module.cluster import Cluster, from_environment


class PlanError(ValueError):
    """The strategy asked for cannot run here; says why and what would work."""


@dataclass(frozen=True)
class Devices:
    """What the adapter found, without starting the TensorFlow runtime."""

    gpus: int = 0
    gpu_compute_capability: tuple[int, int] | None = None  # the lowest among the GPUs
    cpu_devices: int = 1  # logical CPU devices configured (for Mirrored on CPUs)
    tpu: str | None = None  # the TPU's name or address when one resolves
    tpu_cores: int = 0


@dataclass(frozen=True)
class Plan:
    strategy: str  # default | one_device | mirrored | multi_worker_mirrored | parameter_server | tpu | central_storage
    replicas: int
    is_chief: bool
    task: dict[str, Any]
    global_batch_size: int
    shard_policy: str  # off | file | data
    precision: str  # float32 | mixed_float16 | mixed_bfloat16
    devices: dict[str, Any]
    reason: str
    role: str = "train"  # train | serve (ps and non-chief workers under ParameterServer) | evaluate
    communication: str = "auto"  # nccl | ring | hierarchical_copy | reduce_to_one_device | auto
    device: str | None = None  # for one_device
    cluster: dict[str, Any] | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        """The shape `tfxd plan --json` prints (README.md, "The CLI"), plus the role and the collective."""
        data = asdict(self)
        data.pop("cluster")
        return data


def plan(env: Mapping[str, str], devices: Devices, strategy: str = "auto", batch_size: int = 64,
         mixed_precision: str = "auto", all_reduce: str = "auto", train_files: int | None = None) -> Plan:
    """Decide; raise PlanError when an explicit strategy cannot work here."""
    cluster = from_environment(env)
    if strategy != "auto":
        chosen, reason = _explicit(strategy, devices, cluster)
    else:
        chosen, reason = _automatic(devices, cluster)
    replicas = _replicas(chosen, devices, cluster)
    per_host = devices.gpus or 1
    workers = max(1, cluster.training_tasks)
    role = _role(chosen, cluster)
    return Plan(
        strategy=chosen,
        replicas=replicas,
        is_chief=cluster.is_chief,
        task={"type": cluster.task_type, "index": cluster.task_index},
        global_batch_size=batch_size * replicas,
        shard_policy=_shard_policy(chosen, workers, train_files),
        precision=_precision(mixed_precision, devices),
        devices={"gpus": devices.gpus, "gpu_compute_capability": devices.gpu_compute_capability,
                 "cpu_devices": devices.cpu_devices, "tpu": devices.tpu, "per_host_replicas": per_host},
        reason=reason,
        role=role,
        communication=_communication(chosen, all_reduce, devices),
        device=("/gpu:0" if devices.gpus else "/cpu:0") if chosen == "one_device" else None,
        cluster=cluster.tf_config(),
    )


def _automatic(devices: Devices, cluster: Cluster) -> tuple[str, str]:
    if devices.tpu:
        return "tpu", f"a TPU resolved ({devices.tpu})"
    if cluster.task_type == "evaluator":
        return "default", "this task is the side-car evaluator"
    if cluster.parameter_servers:
        return ("parameter_server",
                f"the cluster has {cluster.parameter_servers} parameter server(s) and {cluster.training_tasks} "
                "chief/worker task(s)")
    if cluster.training_tasks >= 2:
        return "multi_worker_mirrored", f"the cluster has {cluster.training_tasks} chief/worker tasks and no ps"
    if devices.gpus >= 2:
        return "mirrored", f"one task with {devices.gpus} GPUs"
    if devices.gpus == 1:
        return "one_device", "one task with one GPU"
    return "default", "one task, no GPU: the default strategy is fastest for one CPU device"


def _explicit(strategy: str, devices: Devices, cluster: Cluster) -> tuple[str, str]:
    reason = f"training.strategy is {strategy}"
    if strategy == "tpu" and not devices.tpu:
        raise PlanError("training.strategy is tpu but no TPU resolves here (TPUClusterResolver found none; "
                        "set TPU_NAME or run on a TPU VM), or use strategy auto")
    if strategy == "mirrored":
        local = devices.gpus or devices.cpu_devices
        if local < 2:
            raise PlanError(f"training.strategy is mirrored but this machine has {devices.gpus} GPU(s) and "
                            f"{devices.cpu_devices} CPU device(s); mirrored needs two or more devices. "
                            "Use strategy auto (or one_device)")
        if cluster.training_tasks > 1:
            raise PlanError("training.strategy is mirrored but this task is one of "
                            f"{cluster.training_tasks} workers; use multi_worker_mirrored or auto")
    if strategy == "parameter_server" and not cluster.parameter_servers:
        raise PlanError("training.strategy is parameter_server but the cluster has no ps tasks "
                        "(TF_CONFIG / CLUSTER_SPEC); add parameter servers to the target's trainer, or use auto")
    if strategy in ("one_device", "central_storage") and cluster.training_tasks > 1:
        raise PlanError(f"training.strategy is {strategy}, a single-machine strategy, but this task is one of "
                        f"{cluster.training_tasks} workers; use multi_worker_mirrored or auto")
    if strategy == "multi_worker_mirrored" and cluster.parameter_servers:
        raise PlanError("training.strategy is multi_worker_mirrored but the cluster has ps tasks; "
                        "use parameter_server or auto")
    return strategy, reason


def _replicas(strategy: str, devices: Devices, cluster: Cluster) -> int:
    per_host = devices.gpus or 1
    if strategy == "tpu":
        return max(1, devices.tpu_cores)
    if strategy == "mirrored":
        return devices.gpus or devices.cpu_devices
    if strategy == "central_storage":
        return max(1, devices.gpus)
    if strategy == "multi_worker_mirrored":
        return max(1, cluster.training_tasks) * per_host
    if strategy == "parameter_server":
        return max(1, len(cluster.spec.get("worker", []))) * per_host
    return 1


def _role(strategy: str, cluster: Cluster) -> str:
    if cluster.task_type == "evaluator":
        return "evaluate"
    if strategy == "parameter_server" and cluster.task_type in ("worker", "ps"):
        return "serve"
    return "train"


def _shard_policy(strategy: str, workers: int, train_files: int | None) -> str:
    if strategy not in ("multi_worker_mirrored", "parameter_server") or workers < 2:
        return "off"
    return "file" if train_files is not None and train_files >= workers else "data"


def _precision(setting: str, devices: Devices) -> str:
    if setting == "off":
        return "float32"
    if setting != "auto":
        return setting
    if devices.tpu:
        return "mixed_bfloat16"
    capability = devices.gpu_compute_capability
    if devices.gpus and capability is not None and capability >= (7, 0):
        return "mixed_float16"
    return "float32"


def _communication(strategy: str, all_reduce: str, devices: Devices) -> str:
    if all_reduce != "auto":
        return all_reduce
    if strategy == "multi_worker_mirrored":
        return "nccl" if devices.gpus else "ring"
    if strategy == "mirrored":
        return "nccl" if devices.gpus else "reduce_to_one_device"
    return "auto"
