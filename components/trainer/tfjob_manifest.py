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

import hashlib
import re
from typing import Any

from tfxd import keys, stops
from tfxd.trainer_config import OperatorSettings

PORT = 2222
GPU = "nvidia.com/gpu"
REPLICA_COMMAND = ["python", "-m", "tfxd.components.trainer.tfjob_replica"]
MAX_NAME = 47  # `<job>-worker-<i>` must stay a 63-character DNS label: the operator names pods and services so


def job_name(pipeline: str, model_uri: str) -> str:
    """Deterministic per run and task (the model artifact's URI is both), so a retried step finds its own
    job; a DNS-1035 label, as the webhook requires."""
    digest = hashlib.sha256(model_uri.rstrip("/").encode()).hexdigest()[:10]
    prefix = re.sub(r"[^a-z0-9-]+", "-", pipeline.lower()).strip("-")
    if not prefix[:1].isalpha():
        prefix = f"t-{prefix}"
    prefix = prefix[: MAX_NAME - len(digest) - len("-trainer-")].rstrip("-")
    return f"{prefix}-trainer-{digest}"


def replica_counts(workers: int, parameter_servers: int) -> dict[str, int]:
    """Replica type -> count; `workers` and `parameter_servers` mean what they mean for Vertex."""
    if parameter_servers:
        return {"Chief": 1, "Worker": workers, "PS": parameter_servers}
    return {"Chief": 1, "Worker": workers - 1} if workers > 1 else {"Chief": 1}


def resources(wanted: dict[str, Any], gpu: bool = True) -> dict[str, Any]:
    """Kubernetes requests and limits from a spec's {cpu, memory, gpu}: requests equal to limits (the
    replicas of a synchronous training wait for the slowest); GPUs in limits, as the device plugin wants."""
    amounts = {}
    cpu = wanted.get("cpu")
    if cpu is not None:
        amounts["cpu"] = str(int(cpu)) if isinstance(cpu, float) and cpu.is_integer() else str(cpu)
    if wanted.get("memory") is not None:
        amounts["memory"] = wanted["memory"]
    spec: dict[str, Any] = {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}
    if gpu and wanted.get("gpu"):
        spec.setdefault("limits", {})[GPU] = str(wanted["gpu"])
    return spec


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
    pod: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": stops.GRACE_SECONDS}
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod["tolerations"] = [{k: v for k, v in toleration.items() if v is not None}
                              for toleration in settings.tolerations]
    # a Kubeflow profile namespace injects Istio sidecars: replicas would talk gRPC through the mesh and a
    # finished replica's pod would never complete (Kubeflow's own TFJob examples turn it off the same way)
    return {"metadata": {"annotations": {"sidecar.istio.io/inject": "false"}}, "spec": pod}


def body(name: str, namespace: str, settings: OperatorSettings, args: list[str],
         owner: dict[str, str] | None = None) -> dict[str, Any]:
    """The TFJob to create. ``owner``: the pipeline step's pod ({name, uid}); the job is then deleted with
    it by Kubernetes' garbage collector (same namespace only)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"app.kubernetes.io/managed-by": "tfxd",
                                           "tfxd.dev/pipeline": _label(settings.pipeline)}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["name"],
                                        "uid": owner["uid"]}]
    replicas = {kind: {"replicas": count, "restartPolicy": "Never", "template": _template(settings, kind, args)}
                for kind, count in replica_counts(settings.workers, settings.parameter_servers).items()
                if count}
    # Never: a replica that dies fails the job (a peer of MultiWorkerMirrored cannot rejoin a collective);
    # the step fails naming it, and its retry resumes from the BackupAndRestore checkpoint
    return {"apiVersion": f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}", "kind": keys.TFJob.KIND, "metadata": metadata,
            "spec": {"runPolicy": {"cleanPodPolicy": settings.clean_pod_policy,
                                   "activeDeadlineSeconds": settings.timeout_seconds},
                     "tfReplicaSpecs": replicas}}


def _label(value: str) -> str:
    """A label value (63 characters, alphanumeric at both ends)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", value)[:63].strip("-_.")
