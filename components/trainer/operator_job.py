"""What a Kubeflow training operator's job is to tfxd's Trainer, whichever operator serves it: its names, the
job's body, and its state read back (OperatorJob); what every such job shares (its name, metadata, the
replicas' command and resources); and how the launching task hands its inputs to each replica
(replica_args, read back by operator_replica.py). job_launch.py chooses, launches and follows the job;
Kubeflow Trainer v2's TrainJob is trainjob.py, the Training Operator v1's TFJob is tfjob.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from tfx.types import artifact_utils

from tfxd.trainer_config import OperatorSettings

GPU = "nvidia.com/gpu"
REPLICA_COMMAND = ["python", "-m", "tfxd.components.trainer.operator_replica"]
# a pod's name, `<job>-worker-<i>` for a TFJob, `<job>-node-0-<i>-<5 random>` for a TrainJob's JobSet, must
# stay a 63-character DNS label (JobSet's webhook refuses a JobSet whose pod names would not)
MAX_NAME = 47


class OperatorJob(ABC):
    """One training operator's job, as the launcher and the Kubernetes client need it."""

    KIND: ClassVar[str]  # the custom resource's kind, e.g. TFJob
    GROUP: ClassVar[str]
    VERSION: ClassVar[str]
    PLURAL: ClassVar[str]
    CONTAINER: ClassVar[str]  # the replicas' container that trains (and whose log tells why one failed)
    JOB_NAME_LABEL: ClassVar[str]  # the label the operator puts on each replica pod, with the job's name
    OPERATOR: ClassVar[str]  # who serves the kind, as its users call it ("the Training Operator")
    INSTALL: ClassVar[str]  # what a cluster without the kind installs
    RBAC: ClassVar[str]  # the Role the pipeline's service account needs, under kubeflow/

    @abstractmethod
    def body(self, name: str, namespace: str, settings: OperatorSettings, args: list[str],
             owner: dict[str, str] | None) -> dict[str, Any]:
        """The job to create; ``args``: each replica's (replica_args), ``owner``: the step's pod."""

    @abstractmethod
    def shape(self, body: dict[str, Any]) -> str:
        """The replicas a body asks for, in words (`2 Worker, 1 PS`)."""

    @abstractmethod
    def state(self, job: dict[str, Any]) -> str | None:
        """Pending (None), or the job's state; Succeeded and Failed are final."""

    @abstractmethod
    def progress(self, job: dict[str, Any]) -> str:
        """The replicas' counts as the operator reports them, in words."""

    @abstractmethod
    def replica(self, pod: dict[str, Any]) -> str:
        """Which replica a pod is (`worker-1`)."""

    @abstractmethod
    def task(self, pod: dict[str, Any], job: dict[str, Any]) -> str:
        """The pod's task in its TF_CONFIG (`worker-1`), as TensorFlow names it in its errors."""


def job_name(pipeline: str, model_uri: str) -> str:
    """Deterministic per run and task (the model artifact's URI is both), so a retried step finds its own
    job; a DNS-1035 label, as both operators' webhooks require."""
    digest = hashlib.sha256(model_uri.rstrip("/").encode()).hexdigest()[:10]
    prefix = re.sub(r"[^a-z0-9-]+", "-", pipeline.lower()).strip("-")
    if not prefix[:1].isalpha():
        prefix = f"t-{prefix}"
    prefix = prefix[: MAX_NAME - len(digest) - len("-trainer-")].rstrip("-")
    return f"{prefix}-trainer-{digest}"


def metadata(name: str, namespace: str, settings: OperatorSettings, owner: dict[str, str] | None) -> dict[str, Any]:
    """The job's metadata. ``owner``: the pipeline step's pod ({name, uid}); the job is then deleted with it
    by Kubernetes' garbage collector (same namespace only)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "labels": {"app.kubernetes.io/managed-by": "tfxd",
                                       "tfxd.dev/pipeline": _label(settings.pipeline)}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["name"], "uid": owner["uid"]}]
    return meta


def placement(settings: OperatorSettings) -> dict[str, Any]:
    """The pod spec's fields that say where and as whom the replicas run (none when the spec sets none)."""
    pod: dict[str, Any] = {}
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod["tolerations"] = [{k: v for k, v in toleration.items() if v is not None}
                              for toleration in settings.tolerations]
    return pod


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


def _label(value: str) -> str:
    """A label value (63 characters, alphanumeric at both ends)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", value)[:63].strip("-_.")


def encode(value: Any) -> str:
    return base64.b64encode(zlib.compress(json.dumps(value, sort_keys=True).encode())).decode()


def decode(text: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(text)))


def replica_args(input_dict, output_dict, exec_properties) -> list[str]:
    """The replicas' arguments: this task's inputs, outputs and properties (without the job's settings, so
    a replica trains instead of launching), as TFX's own cloud trainer passes them to its replicas."""
    return [encode({"inputs": artifact_utils.jsonify_artifact_dict(input_dict),
                    "outputs": artifact_utils.jsonify_artifact_dict(output_dict),
                    "exec_properties": exec_properties})]
