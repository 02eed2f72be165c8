"""The thin TensorFlow adapter of the planner: find devices without starting the runtime, build the
strategy the plan names, set the precision policy.

``detect_devices`` only lists physical devices and reads the logical device
configuration, so logical CPU devices can still be configured afterwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from tfxd.trainer_module.planner import Devices, Plan, Strategy

TPU_DEVICE_FILES = ("/dev/accel0", "/dev/vfio/0")


def tpu_address(env: Mapping[str, str], exists: Callable[[str], bool] = os.path.exists) -> str | None:
    """Where a TPU could be: TPU_NAME, or 'local' on a TPU VM (its accelerator device files)."""
    if env.get("TPU_NAME"):
        return env["TPU_NAME"]
    return "local" if any(exists(path) for path in TPU_DEVICE_FILES) else None


def resolve_tpu(address: str | None, resolver_class: Any = None) -> Any | None:
    """A TPUClusterResolver for ``address``, or None: a resolver error falls through to the other rules."""
    if address is None:
        return None
    if resolver_class is None:
        import tensorflow as tf

        resolver_class = tf.distribute.cluster_resolver.TPUClusterResolver
    try:
        return resolver_class(tpu=address)
    except (ValueError, RuntimeError, OSError):
        return None


def detect_devices(env: Mapping[str, str] = os.environ) -> tuple[Devices, Any | None]:
    """The devices here and a TPU resolver if one resolves; the runtime stays unstarted."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    capabilities = [tf.config.experimental.get_device_details(gpu).get("compute_capability") for gpu in gpus]
    capabilities = [tuple(c) for c in capabilities if c]
    cpus = tf.config.list_physical_devices("CPU")
    logical = tf.config.get_logical_device_configuration(cpus[0]) if cpus else None
    resolver = resolve_tpu(tpu_address(env))
    tpu_cores = 0
    if resolver is not None:
        tpu_cores = resolver.num_accelerators().get("TPU", 0) * max(1, len(resolver.cluster_spec().as_dict().get(
            "worker", [None])))
    devices = Devices(gpus=len(gpus), gpu_compute_capability=min(capabilities) if capabilities else None,
                      cpu_devices=len(logical) if logical else 1,
                      tpu=resolver.master() if resolver is not None else None, tpu_cores=tpu_cores)
    return devices, resolver


def export_cluster(plan: Plan) -> None:
    """Write the normalised TF_CONFIG (from Vertex's CLUSTER_SPEC or a TrainJob's JobSet environment,
    'master' renamed) before any TF op."""
    if plan.cluster is not None:
        os.environ["TF_CONFIG"] = json.dumps(plan.cluster)


def build(plan: Plan, tpu_resolver: Any = None, peer_timeout: int | None = None) -> Any:
    """The tf.distribute strategy of ``plan``; MultiWorkerMirrored is created before any other TF op, with
    ``peer_timeout`` (seconds, training.peer_timeout) as its coordination service's heartbeat timeout."""
    import tensorflow as tf

    export_cluster(plan)
    if plan.strategy is Strategy.MULTI_WORKER_MIRRORED:
        if peer_timeout:
            coordinate(peer_timeout)
        implementation = {"nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
                          "ring": tf.distribute.experimental.CommunicationImplementation.RING}.get(
            plan.communication, tf.distribute.experimental.CommunicationImplementation.AUTO)
        options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    elif plan.strategy is Strategy.TPU:
        tf.config.experimental_connect_to_cluster(tpu_resolver)
        tf.tpu.experimental.initialize_tpu_system(tpu_resolver)
        strategy = tf.distribute.TPUStrategy(tpu_resolver)
    elif plan.strategy is Strategy.PARAMETER_SERVER:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    elif plan.strategy is Strategy.MIRRORED:
        devices = None if plan.devices["gpus"] else [f"/cpu:{i}" for i in range(plan.devices["cpu_devices"])]
        strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=_cross_device_ops(plan))
    elif plan.strategy is Strategy.CENTRAL_STORAGE:
        strategy = tf.distribute.experimental.CentralStorageStrategy()
    elif plan.strategy is Strategy.ONE_DEVICE:
        strategy = tf.distribute.OneDeviceStrategy(plan.device)
    else:
        strategy = tf.distribute.get_strategy()
    tf.keras.mixed_precision.set_global_policy(plan.precision)
    return strategy


def coordinate(heartbeat_timeout: int) -> None:
    """Configure TensorFlow's coordination service for this MultiWorkerMirrored task as the strategy does
    (collective_all_reduce_strategy.py, _initialize_multi_worker: a standalone service led by
    multi_worker_util.coordination_leader, the chief and workers coordinated), with a heartbeat timeout of
    ``heartbeat_timeout`` seconds, which the strategy offers no argument for. It configures only a context
    left unconfigured, so it keeps this one (tests/trainer_module/test_strategies.py checks it does)."""
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.distribute.cluster_resolver import TFConfigClusterResolver
    from tensorflow.python.eager import context
    from tensorflow.tsl.protobuf import coordination_config_pb2

    spec = TFConfigClusterResolver().cluster_spec()
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=spec.num_tasks(job))
            for job in ("chief", "worker") if job in spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=heartbeat_timeout * 1000)


def _cross_device_ops(plan: Plan) -> Any:
    import tensorflow as tf

    if plan.communication == "nccl":
        return tf.distribute.NcclAllReduce()
    if plan.communication == "hierarchical_copy":
        return tf.distribute.HierarchicalCopyAllReduce()
    if plan.communication == "reduce_to_one_device":
        return tf.distribute.ReductionToOneDevice()
    return None
