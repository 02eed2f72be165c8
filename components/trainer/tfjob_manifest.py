"""The TFJob (kubeflow.org/v1, the Kubeflow Training Operator) that trains when
`targets.kubeflow.trainer` asks for more than one process: a pure function of the settings the
assembly wrote into the Trainer's custom_config, the replicas' command and the pod that owns it.

Replicas, as for Vertex: without parameter servers one Chief and `workers - 1` Workers
(MultiWorkerMirrored, the chief is a worker too); with them one Chief, `workers` Workers and
`parameter_servers` PS (ParameterServer: the chief coordinates). The operator writes each replica's
TF_CONFIG (`<job>-<type>-<i>.<namespace>.svc:2222`), which the planner reads; the body sets none.
The operator's webhook requires a container named `tensorflow` with an image, at most one chief and
a DNS-1035 job name (training-operator v1.9: pkg/webhooks/tensorflow/tfjob_webhook.go).
"""

from __future__ import annotations

from typing import Any

from tfxd import keys, stops
from tfxd.components.trainer.operator_job import REPLICA_COMMAND, metadata, placement, resources
from tfxd.trainer_config import OperatorSettings

PORT = 2222


def replica_counts(workers: int, parameter_servers: int) -> dict[str, int]:
    """Replica type -> count; `workers` and `parameter_servers` mean what they mean for Vertex."""
    if parameter_servers:
        return {"Chief": 1, "Worker": workers, "PS": parameter_servers}
    return {"Chief": 1, "Worker": workers - 1} if workers > 1 else {"Chief": 1}


def restart_policy(kind: str, parameter_servers: int) -> str:
    """Never: a replica that dies fails the job (a MultiWorkerMirrored peer cannot rejoin a collective; a
    lost chief or parameter server takes the training's state with it); the step fails naming it, and its
    retry resumes from the BackupAndRestore checkpoint. But a ParameterServer worker is stateless: TensorFlow's
    ClusterCoordinator reschedules its steps on the other workers and takes it back when it returns, so a
    worker killed by a signal (preempted, evicted, out of memory) is created again: ExitCode, under which the
    operator recreates a pod that exited with 128 or more and fails the job on any other code, a bug that a
    restart would only repeat (training-operator v1.9: pkg/controller.v1/common/pod.go, ReconcilePods;
    pkg/util/train, IsRetryableExitCode). Not OnFailure: the kubelet would restart a failing worker in place
    until the job's backoffLimit, whatever its exit code."""
    return "ExitCode" if parameter_servers and kind == "Worker" else "Never"


def _template(settings: OperatorSettings, kind: str, args: list[str]) -> dict[str, Any]:
    wanted = settings.resources["ps" if kind == "PS" else "worker"]
    # under ParameterServer the chief coordinates and computes nothing: no GPU for it (as for Vertex)
    accelerated = kind == "Worker" or (kind == "Chief" and not settings.parameter_servers)
    container: dict[str, Any] = {"name": keys.TFJob.CONTAINER, "image": settings.image, "command": list(REPLICA_COMMAND),
                                 "args": args, "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}]}
    if spec := resources(wanted, gpu=accelerated):
        container["resources"] = spec
    # a stopped replica ends within stops.STOP_SECONDS (tfxd.stops); the grace period says so, so that a
    # cluster whose pods default to less still lets it end its own way
    pod: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": stops.GRACE_SECONDS,
                           **placement(settings)}
    # a Kubeflow profile namespace injects Istio sidecars: replicas would talk gRPC through the mesh and a
    # finished replica's pod would never complete (Kubeflow's own TFJob examples turn it off the same way)
    return {"metadata": {"annotations": {"sidecar.istio.io/inject": "false"}}, "spec": pod}


def body(name: str, namespace: str, settings: OperatorSettings, args: list[str],
         owner: dict[str, str] | None = None) -> dict[str, Any]:
    """The TFJob to create. ``owner``: the pipeline step's pod ({name, uid}) (operator_job.metadata)."""
    replicas = {kind: {"replicas": count, "restartPolicy": restart_policy(kind, settings.parameter_servers),
                       "template": _template(settings, kind, args)}
                for kind, count in replica_counts(settings.workers, settings.parameter_servers).items()
                if count}
    return {"apiVersion": f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}", "kind": keys.TFJob.KIND,
            "metadata": metadata(name, namespace, settings, owner),
            "spec": {"runPolicy": {"cleanPodPolicy": settings.clean_pod_policy,
                                   "activeDeadlineSeconds": settings.timeout_seconds},
                     "tfReplicaSpecs": replicas}}

