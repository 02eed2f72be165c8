"""The Trainer as a TFJob (kubeflow.org/v1, the Kubeflow Training Operator v1) on Kubeflow, when
`targets.kubeflow.trainer` asks for more than one process and the cluster serves TFJobs: the TFJob's
side of operator_job.py's interface, beside the TrainJob's (trainjob.py). job_launch.py launches it; the
body is tfjob_manifest.py's; its state is read from the operator's conditions and replica statuses. The
operator writes each replica's TF_CONFIG, which the replica's planner reads.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfxd import keys
from tfxd.components.trainer import tfjob_manifest as manifest
from tfxd.components.trainer.operator_job import OperatorJob
from tfxd.trainer_config import OperatorSettings


class TFJob(OperatorJob):
    KIND: ClassVar[str] = keys.TFJob.KIND
    GROUP: ClassVar[str] = keys.TFJob.GROUP
    VERSION: ClassVar[str] = keys.TFJob.VERSION
    PLURAL: ClassVar[str] = keys.TFJob.PLURAL
    CONTAINER: ClassVar[str] = keys.TFJob.CONTAINER
    JOB_NAME_LABEL: ClassVar[str] = keys.TFJob.JOB_NAME_LABEL
    OPERATOR: ClassVar[str] = "the Training Operator"
    INSTALL: ClassVar[str] = "the Kubeflow Training Operator"
    RBAC: ClassVar[str] = "kubeflow/tfjob-rbac.yaml"

    def body(self, name: str, namespace: str, settings: OperatorSettings, args: list[str],
             owner: dict[str, str] | None) -> dict[str, Any]:
        return manifest.body(name, namespace, settings, args, owner=owner)

    def shape(self, body: dict[str, Any]) -> str:
        return ", ".join(f"{spec['replicas']} {kind}" for kind, spec in body["spec"]["tfReplicaSpecs"].items())

    def state(self, job: dict[str, Any]) -> str | None:
        """The job's last condition that is true (Created, Running, Restarting, Succeeded, Failed)."""
        true = [c["type"] for c in job.get("status", {}).get("conditions") or [] if c.get("status") == "True"]
        for final in ("Failed", "Succeeded"):
            if final in true:
                return final
        return true[-1] if true else None

    def progress(self, job: dict[str, Any]) -> str:
        statuses = job.get("status", {}).get("replicaStatuses") or {}
        parts = []
        for kind in ("Chief", "Worker", "PS"):
            counts = statuses.get(kind) or {}
            shown = ", ".join(f"{counts[what]} {what}" for what in ("active", "succeeded", "failed")
                              if counts.get(what))
            if shown:
                parts.append(f"{kind}: {shown}")
        return "; ".join(parts) or "no replica running yet"

    def replica(self, pod: dict[str, Any]) -> str:
        labels = pod["metadata"].get("labels") or {}
        return f"{labels.get(keys.TFJob.REPLICA_TYPE_LABEL, '?')}-{labels.get(keys.TFJob.REPLICA_INDEX_LABEL, '?')}"

    def task(self, pod: dict[str, Any], job: dict[str, Any]) -> str:
        return self.replica(pod)  # the operator's TF_CONFIG names each replica by its type and index

