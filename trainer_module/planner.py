"""The strategy planner: one pure function from (environment, devices, training spec) to a plan.

This is the one place that decides how to train: which tf.distribute strategy,
how many replicas, who is chief, the global batch, how input is sharded, the
precision, the collective implementation and how many steps each call of the
compiled step runs. It follows the decision table in
docs/distributed.md; an explicit ``training.strategy`` wins, and is refused with a
reason when the hardware or cluster cannot serve it. TensorFlow is not
imported here (see ``strategy.py`` for the thin adapter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from tfxd.trainer_module.cluster import Cluster, from_environment
from tfxd.training_report import PlanRecord


class Strategy(str, Enum):
    """The tf.distribute strategies, by the names the spec, the plan and the Trainer use: the one list of them.

    ``training.strategy`` takes any of them; AUTO asks the planner, which answers with one of the others
    (DEFAULT, TensorFlow's default strategy, where one CPU device is fastest)."""

    AUTO = "auto"
    DEFAULT = "default"
    ONE_DEVICE = "one_device"
    MIRRORED = "mirrored"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    PARAMETER_SERVER = "parameter_server"
    TPU = "tpu"
    CENTRAL_STORAGE = "central_storage"

    def __str__(self) -> str:  # the name as written in a spec, in logs and messages alike
        return self.value


# The strategies that train in one process: a cluster of several tasks cannot run them.
ONE_PROCESS = frozenset({Strategy.DEFAULT, Strategy.ONE_DEVICE, Strategy.MIRRORED, Strategy.CENTRAL_STORAGE})
# The strategies across processes: each worker reads a shard of the input, and a signal stops them all.
MULTI_WORKER = frozenset({Strategy.MULTI_WORKER_MIRRORED, Strategy.PARAMETER_SERVER})


# Steps per call of Keras's compiled train (and test) step under `auto`. Each call costs Python work (the
# callbacks' hooks, the function's dispatch, the logs), in the order of a millisecond on a slow machine
# and the same whatever the step: for a small model at a small batch (the taxi model at batch 40) that was
# more than the step itself, so more steps a call train more examples a second (bench/RESULTS.md has
# bench/strategies.py's worker and the taxi Trainer at 1 to 100 steps a call). Keras runs the same steps, so
# the weights are the same bit for bit (tests/trainer_module/test_strategies.py); what changes is that
# callbacks, and a stop a signal asks for, act between calls: 32 keeps that within a few seconds for steps
# up to ~100 ms.
STEPS_PER_EXECUTION = 32


class PlanError(ValueError):
    """The strategy asked for cannot run here; says why and what would work."""


@dataclass(frozen=True)
class Refusal:
    problem: str
    fix: str


def cluster_refusal(strategy: Strategy, training_tasks: int, parameter_servers: int, where: str) -> Refusal | None:
    """Why ``strategy`` cannot run on a cluster of this shape, or None: the one copy of these rules.

    The planner asks it of the cluster a task finds (TF_CONFIG); `tfxd validate` asks it of the cluster a
    target's trainer section asks for, so a spec that could never train is refused before it runs."""
    if strategy is Strategy.PARAMETER_SERVER and parameter_servers == 0:
        return Refusal(f"parameter_server needs parameter servers, and {where} has none",
                       f"give {where} 1 or more parameter servers, or use strategy auto")
    if strategy in ONE_PROCESS and (training_tasks > 1 or parameter_servers > 0):
        return Refusal(f"{strategy} trains in one process, and {where} has {training_tasks} chief/worker "
                       f"task(s) and {parameter_servers} parameter server(s)",
                       f"use strategy auto (multi_worker_mirrored or parameter_server follow from the cluster), "
                       f"or one worker and no parameter servers in {where}")
    if strategy is Strategy.MULTI_WORKER_MIRRORED and parameter_servers:
        return Refusal(f"multi_worker_mirrored has no parameter servers, and {where} has {parameter_servers}",
                       f"use strategy parameter_server or auto, or no parameter servers in {where}")
    return None


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
    strategy: Strategy  # never AUTO
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
    steps_per_execution: int = 1  # training steps per call of Keras's compiled step
    execution_reason: str = ""
    cluster: dict[str, Any] | None = field(default=None)

    def record(self) -> PlanRecord:
        """The plan as the Trainer records it beside the model and the summaries show it (without the
        cluster, which TF_CONFIG holds)."""
        data = asdict(self)
        data.pop("cluster")
        return PlanRecord(**{**data, "strategy": self.strategy.value})

    def to_json(self) -> dict[str, Any]:
        """The shape `tfxd plan --json` prints (docs/reference/cli.md), plus the role and the collective."""
        return self.record().to_json()


def plan(env: Mapping[str, str], devices: Devices, strategy: Strategy = Strategy.AUTO, batch_size: int = 64,
         mixed_precision: str = "auto", all_reduce: str = "auto", train_files: int | None = None,
         steps_per_execution: int | str = "auto", custom_callbacks: bool = False) -> Plan:
    """Decide; raise PlanError when an explicit strategy cannot work here. ``custom_callbacks``: the spec
    has some (their batch hooks would see only every call's last step)."""
    cluster = from_environment(env)
    strategy = Strategy(strategy)  # a name from a spec's JSON is taken as the member it names
    if strategy is not Strategy.AUTO:
        chosen, reason = _explicit(strategy, devices, cluster)
    else:
        chosen, reason = _automatic(devices, cluster)
    replicas = _replicas(chosen, devices, cluster)
    per_host = devices.gpus or 1
    workers = max(1, cluster.training_tasks)
    role = _role(chosen, cluster)
    execution, execution_reason = _steps_per_execution(steps_per_execution, custom_callbacks)
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
        device=("/gpu:0" if devices.gpus else "/cpu:0") if chosen is Strategy.ONE_DEVICE else None,
        steps_per_execution=execution,
        execution_reason=execution_reason,
        cluster=cluster.tf_config(),
    )


def _automatic(devices: Devices, cluster: Cluster) -> tuple[Strategy, str]:
    if devices.tpu:
        return Strategy.TPU, f"a TPU resolved ({devices.tpu})"
    if cluster.task_type == "evaluator":
        return Strategy.DEFAULT, "this task is the side-car evaluator"
    if cluster.parameter_servers:
        return (Strategy.PARAMETER_SERVER,
                f"the cluster has {cluster.parameter_servers} parameter server(s) and {cluster.training_tasks} "
                "chief/worker task(s)")
    if cluster.training_tasks >= 2:
        return Strategy.MULTI_WORKER_MIRRORED, f"the cluster has {cluster.training_tasks} chief/worker tasks and no ps"
    if devices.gpus >= 2:
        return Strategy.MIRRORED, f"one task with {devices.gpus} GPUs"
    if devices.gpus == 1:
        return Strategy.ONE_DEVICE, "one task with one GPU"
    # bench/strategies.py measures the others at the same global batch to show this rule right
    return Strategy.DEFAULT, ("one task, no GPU: the default strategy, since TensorFlow's CPU kernels already use "
                              "every core and Mirrored over logical CPUs or local workers trains fewer examples/s")


def _explicit(strategy: Strategy, devices: Devices, cluster: Cluster) -> tuple[Strategy, str]:
    if strategy is Strategy.TPU and not devices.tpu:
        raise PlanError("training.strategy is tpu but no TPU resolves here (TPUClusterResolver found none; "
                        "set TPU_NAME or run on a TPU VM), or use strategy auto")
    refusal = cluster_refusal(strategy, cluster.training_tasks, cluster.parameter_servers, "the cluster in TF_CONFIG")
    if refusal is not None:
        raise PlanError(f"training.strategy: {refusal.problem}; {refusal.fix}")
    if strategy is Strategy.MIRRORED and (devices.gpus or devices.cpu_devices) < 2:
        raise PlanError(f"training.strategy is mirrored but this machine has {devices.gpus} GPU(s) and "
                        f"{devices.cpu_devices} CPU device(s); mirrored needs two or more devices. "
                        "Use strategy auto (or one_device)")
    return strategy, f"training.strategy is {strategy}"


def _steps_per_execution(setting: int | str, custom_callbacks: bool) -> tuple[int, str]:
    if setting != "auto":
        return int(setting), f"training.steps_per_execution is {setting}"
    if custom_callbacks:
        return 1, ("custom callbacks: Keras calls their batch hooks once per call of the compiled step, so each "
                   "step is a call of its own")
    return STEPS_PER_EXECUTION, (f"Keras's Python work per call is paid once per {STEPS_PER_EXECUTION} steps; "
                                 "callbacks and a stop act between calls")


def _replicas(strategy: Strategy, devices: Devices, cluster: Cluster) -> int:
    per_host = devices.gpus or 1
    if strategy is Strategy.TPU:
        return max(1, devices.tpu_cores)
    if strategy is Strategy.MIRRORED:
        return devices.gpus or devices.cpu_devices
    if strategy is Strategy.CENTRAL_STORAGE:
        return max(1, devices.gpus)
    if strategy is Strategy.MULTI_WORKER_MIRRORED:
        return max(1, cluster.training_tasks) * per_host
    if strategy is Strategy.PARAMETER_SERVER:
        return max(1, len(cluster.spec.get("worker", []))) * per_host
    return 1


def _role(strategy: Strategy, cluster: Cluster) -> str:
    if cluster.task_type == "evaluator":
        return "evaluate"
    if strategy is Strategy.PARAMETER_SERVER and cluster.task_type in ("worker", "ps"):
        return "serve"
    return "train"


def _shard_policy(strategy: Strategy, workers: int, train_files: int | None) -> str:
    if strategy not in MULTI_WORKER or workers < 2:
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


def _communication(strategy: Strategy, all_reduce: str, devices: Devices) -> str:
    if all_reduce != "auto":
        return all_reduce
    if strategy is Strategy.MULTI_WORKER_MIRRORED:
        return "nccl" if devices.gpus else "ring"
    if strategy is Strategy.MIRRORED:
        return "nccl" if devices.gpus else "reduce_to_one_device"
    return "auto"
