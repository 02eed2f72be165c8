"""The Trainer as a Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1) on tfxd's TensorFlow
runtime (kubeflow/trainjob-runtime.yaml): the TrainJob's side of operator_job.py's interface, beside the
TFJob's (tfjob.py). job_launch.py launches and follows it.

Trainer v2 ships no TensorFlow runtime; tfxd's has one replicated job, `node`, whose pods are the whole
TensorFlow cluster. The TrainJob sizes it (numNodes: the workers, plus the chief and the parameter
servers under ParameterServer), gives every node the pipeline image, the replica command, the task's
inputs, the cluster's shape (env) and the workers' resources (resourcesPerNode: Trainer v2 sizes every
node alike), and patches the pod for the service account, node selector and tolerations (runtimePatches).
Each node derives its TF_CONFIG from that and from what JobSet gives it (trainer_module/cluster.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfxd import keys
from tfxd.components.trainer import operator_job
from tfxd.components.trainer.operator_job import OperatorJob
from tfxd.trainer_config import OperatorSettings
from tfxd.trainer_module.cluster import jobset_task

NAMES = keys.TrainJob
PATCH_MANAGER = "tfxd.dev/trainer"  # whose runtimePatches entry this is (the list is keyed by manager)


def nodes(settings: OperatorSettings) -> int:
    """The TrainJob's numNodes: the workers, and under ParameterServer a chief and the parameter servers."""
    if settings.parameter_servers:
        return 1 + settings.workers + settings.parameter_servers
    return settings.workers


def body(name: str, namespace: str, settings: OperatorSettings, args: list[str],
         owner: dict[str, str] | None = None) -> dict[str, Any]:
    """The TrainJob to create. ``owner``: the pipeline step's pod ({name, uid}), as for a TFJob."""
    trainer: dict[str, Any] = {
        "image": settings.image, "command": list(operator_job.REPLICA_COMMAND), "args": args,
        "numNodes": nodes(settings),
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": NAMES.NODES_ENV, "value": str(nodes(settings))},
                {"name": NAMES.PARAMETER_SERVERS_ENV, "value": str(settings.parameter_servers)}]}
    if wanted := operator_job.resources(settings.resources["worker"]):
        trainer["resourcesPerNode"] = wanted
    spec: dict[str, Any] = {"runtimeRef": {"name": settings.runtime, "apiGroup": NAMES.GROUP,
                                           "kind": NAMES.RUNTIME_KIND},
                            "trainer": trainer, "activeDeadlineSeconds": settings.timeout_seconds}
    if pod := operator_job.placement(settings):
        spec["runtimePatches"] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": NAMES.REPLICATED_JOB, "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    return {"apiVersion": f"{NAMES.GROUP}/{NAMES.VERSION}", "kind": NAMES.KIND,
            "metadata": operator_job.metadata(name, namespace, settings, owner), "spec": spec}


class TrainJob(OperatorJob):
    KIND: ClassVar[str] = NAMES.KIND
    GROUP: ClassVar[str] = NAMES.GROUP
    VERSION: ClassVar[str] = NAMES.VERSION
    PLURAL: ClassVar[str] = NAMES.PLURAL
    CONTAINER: ClassVar[str] = NAMES.CONTAINER
    JOB_NAME_LABEL: ClassVar[str] = NAMES.JOBSET_NAME_LABEL  # the JobSet is named after the TrainJob
    OPERATOR: ClassVar[str] = "Kubeflow Trainer"
    INSTALL: ClassVar[str] = ("Kubeflow Trainer v2 and tfxd's TensorFlow runtime (tfxd kubeflow-manifest "
                              "trainjob-runtime | kubectl apply -f -)")
    RBAC: ClassVar[str] = "kubeflow/trainjob-rbac.yaml"

    def body(self, name: str, namespace: str, settings: OperatorSettings, args: list[str],
             owner: dict[str, str] | None) -> dict[str, Any]:
        return body(name, namespace, settings, args, owner=owner)

    def shape(self, body: dict[str, Any]) -> str:
        trainer = body["spec"]["trainer"]
        servers = _servers(trainer)
        if not servers:
            return f"{trainer['numNodes']} nodes, all workers"
        return f"{trainer['numNodes']} nodes: a chief, {trainer['numNodes'] - 1 - servers} workers, {servers} PS"

    def state(self, job: dict[str, Any]) -> str | None:
        """Complete (as Succeeded) or Failed, from the TrainJob's conditions; Suspended; else pending."""
        true = {c["type"] for c in job.get("status", {}).get("conditions") or [] if c.get("status") == "True"}
        if "Failed" in true:
            return "Failed"
        if "Complete" in true:
            return "Succeeded"
        if "Suspended" in true:
            return "Suspended"
        jobs = job.get("status", {}).get("jobsStatus") or []
        return "Running" if any((status.get("active") or 0) > 0 for status in jobs) else None

    def progress(self, job: dict[str, Any]) -> str:
        parts = []
        for status in job.get("status", {}).get("jobsStatus") or []:
            shown = ", ".join(f"{status[what]} {what}" for what in ("active", "ready", "succeeded", "failed")
                              if status.get(what))
            if shown:
                parts.append(f"job {status.get('name')}: {shown}")
        return "; ".join(parts) or "no node running yet"

    def replica(self, pod: dict[str, Any]) -> str:
        labels = pod["metadata"].get("labels") or {}
        return f"node-{labels.get(NAMES.COMPLETION_INDEX_LABEL, '?')}"

    def task(self, pod: dict[str, Any], job: dict[str, Any]) -> str:
        """As the node derives it from its JobSet environment (trainer_module/cluster.py: from_jobset)."""
        trainer = job["spec"]["trainer"]
        index = (pod["metadata"].get("labels") or {}).get(NAMES.COMPLETION_INDEX_LABEL, "")
        if not index.isdigit():
            return "?"
        kind, at = jobset_task(int(index), int(trainer["numNodes"]), _servers(trainer))
        return f"{kind}-{at}"


def _servers(trainer: dict[str, Any]) -> int:
    """The parameter servers a TrainJob's trainer asks for (the count its nodes read from their env)."""
    return int(next(e["value"] for e in trainer["env"] if e["name"] == NAMES.PARAMETER_SERVERS_ENV))
