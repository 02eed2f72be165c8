"""The Kubeflow Training Operator, on this machine: a TFJob's replicas become processes, as the operator
makes them pods, so that `tfxd replay` runs a Kubeflow file whose Trainer launches a TFJob.

What the operator does and this does the same way (training-operator v1.9,
pkg/controller.v1/tensorflow): a pod per replica named `<job>-<type>-<i>` with its labels; each
replica's TF_CONFIG (`{"cluster": {"chief": ["<job>-chief-0.<ns>.svc:2222"], ...}, "task": {...},
"environment": "cloud"}`); the job's conditions (Created, Running while the chief runs, Succeeded when
the chief has, Failed when any replica has under restartPolicy Never, or past activeDeadlineSeconds);
the replica statuses; cleanPodPolicy when the job ends; a foreground delete stopping the pods first.
What differs: the cluster's DNS names mean nothing here, so each replica also gets a map from those
addresses to loopback ports (trainer_module/cluster.py, keys.ADDRESSES_ENV); the processes run this install
instead of the image (``argv_for``).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from tfxd import keys
from tfxd.components.trainer import tfjob_manifest as manifest
from tfxd.components.trainer.local_cluster import free_ports
from tfxd.kubeflow.replay.kube_api import KubeApi, now

TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")


# The operator's own deployment may set this; the controller then names replicas `....svc.<domain>`.
CLUSTER_DOMAIN_ENV = "CUSTOM_CLUSTER_DOMAIN"


def tf_configs(job: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(replica type, index) -> the TF_CONFIG the operator writes for that replica (genClusterSpec: the
    service `<job>-<type>-<i>.<ns>.svc`, then `.<domain>` when the operator's CUSTOM_CLUSTER_DOMAIN is set,
    at the default port; the types in the order Go writes a map's keys)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    specs = job["spec"]["tfReplicaSpecs"]
    domain = os.environ.get(CLUSTER_DOMAIN_ENV)
    suffix = f".{namespace}.svc" + (f".{domain}" if domain else "")
    cluster = {kind.lower(): [f"{pod_name(name, kind, i)}{suffix}:{manifest.PORT}"
                              for i in range(specs[kind].get("replicas", 1))]
               for kind in sorted(specs, key=str.lower)}
    return {(kind, i): {"cluster": cluster, "task": {"type": kind.lower(), "index": i}, "environment": "cloud"}
            for kind in specs for i in range(specs[kind].get("replicas", 1))}


def written(config: dict[str, Any]) -> str:
    """A TF_CONFIG as the operator's controller writes it into the pod (Go's encoding/json: no spaces)."""
    return json.dumps(config, separators=(",", ":"))


def pod_name(job: str, kind: str, index: int) -> str:
    return f"{job}-{kind.lower()}-{index}"


def pod(job: dict[str, Any], kind: str, index: int, phase: str, container_state: dict[str, Any]) -> dict[str, Any]:
    """A replica's pod as the operator creates it and the kubelet reports it."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    template = job["spec"]["tfReplicaSpecs"][kind]["template"]
    labels = {keys.TFJob.JOB_NAME_LABEL: name, keys.TFJob.REPLICA_TYPE_LABEL: kind.lower(),
              keys.TFJob.REPLICA_INDEX_LABEL: str(index), "training.kubeflow.org/operator-name": "tfjob-controller"}
    if kind in ("Chief", "Master"):
        labels["training.kubeflow.org/job-role"] = "master"
    container = next(c for c in template["spec"]["containers"] if c["name"] == keys.TFJob.CONTAINER)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(name, kind, index), "namespace": namespace, "labels": labels,
                         "ownerReferences": [{"apiVersion": f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}",
                                              "kind": keys.TFJob.KIND, "name": name, "uid": job["metadata"]["uid"],
                                              "controller": True}]},
            "spec": template["spec"],
            "status": {"phase": phase, "containerStatuses": [
                {"name": keys.TFJob.CONTAINER, "image": container["image"], "imageID": "", "ready": phase == "Running",
                 "restartCount": 0, "state": container_state}]}}


def job_status(job: dict[str, Any], pods: list[dict[str, Any]], deadline_passed: bool = False) -> dict[str, Any]:
    """The status the operator writes for ``job`` whose pods are ``pods`` (a job with a Chief)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    counts: dict[str, dict[str, int]] = {}
    for item in pods:
        kind = next(k for k in TYPES if k.lower() == item["metadata"]["labels"][keys.TFJob.REPLICA_TYPE_LABEL])
        phase = item["status"]["phase"]
        key = {"Running": "active", "Pending": "active", "Succeeded": "succeeded", "Failed": "failed"}[phase]
        counts.setdefault(kind, {}).setdefault(key, 0)
        counts[kind][key] += 1
    conditions = [_condition("Created", "TFJobCreated", f"TFJob {namespace}/{name} is created.")]
    failed = [(kind, c["failed"]) for kind, c in counts.items() if c.get("failed")]
    chief = counts.get("Chief") or counts.get("Master") or {}
    if chief.get("active"):
        conditions.append(_condition("Running", "TFJobRunning", f"TFJob {namespace}/{name} is running."))
    if failed:
        kind, number = failed[0]
        conditions.append(_condition("Failed", "TFJobFailed", f"TFJob {namespace}/{name} has failed because {number} "
                                     f"{kind} replica(s) failed."))
    elif deadline_passed:
        conditions.append(_condition("Failed", "TFJobFailed", f"Job {name} has failed because it was active longer "
                                     "than specified deadline"))
    elif chief.get("succeeded"):
        conditions.append(_condition("Succeeded", "TFJobSucceeded", f"TFJob {namespace}/{name} successfully "
                                     "completed."))
    if len(conditions) > 2:
        conditions[1]["status"] = "False" if conditions[1]["type"] == "Running" else conditions[1]["status"]
    return {"conditions": conditions, "replicaStatuses": counts, "startTime": job["metadata"]["creationTimestamp"]}


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastUpdateTime": now(),
            "lastTransitionTime": now()}


class LocalTrainingOperator:
    """A KubeApi whose TFJobs run as local processes. ``argv_for(container)``: the command to run for a
    replica's container; ``cwd`` and ``env``: where and with what extra environment they run."""

    def __init__(self, log_dir: str, argv_for: Callable[[dict[str, Any]], list[str]], cwd: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.api = KubeApi(controller=self)
        self.log_dir, self.argv_for, self.cwd, self.env = log_dir, argv_for, cwd, env or {}
        self.processes: dict[tuple[str, str], dict[tuple[str, int], subprocess.Popen]] = {}
        self.started: dict[tuple[str, str], float] = {}
        self.finished: set[tuple[str, str]] = set()
        self.stopping = threading.Event()
        self.monitor = threading.Thread(target=self._monitor, name="tfxd-training-operator", daemon=True)

    def __enter__(self) -> LocalTrainingOperator:
        os.makedirs(self.log_dir, exist_ok=True)
        self.api.__enter__()
        self.monitor.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for key in list(self.processes):
            self._stop(key)
        self.api.__exit__()

    def environment(self, namespace: str) -> dict[str, str]:
        """What a process needs to reach this API as its cluster: KUBECONFIG, and no in-cluster hint."""
        path = self.api.kubeconfig(os.path.join(self.log_dir, "kubeconfig.json"), namespace)
        return {"KUBECONFIG": path}

    def created(self, job: dict[str, Any]) -> None:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        configs = tf_configs(job)
        cluster = next(iter(configs.values()))["cluster"]
        ports = iter(free_ports(len(configs)))
        addresses = {address: f"localhost:{next(ports)}" for members in cluster.values() for address in members}
        self.started[key] = time.monotonic()
        self.finished.discard(key)
        self.processes[key] = {}
        for (kind, index), config in configs.items():
            template = job["spec"]["tfReplicaSpecs"][kind]["template"]["spec"]
            container = next(c for c in template["containers"] if c["name"] == keys.TFJob.CONTAINER)
            env = {**os.environ, **self.env, **{e["name"]: e.get("value", "") for e in container.get("env", [])},
                   "TF_CONFIG": written(config), keys.ADDRESSES_ENV: json.dumps(addresses)}
            env.pop("KUBERNETES_SERVICE_HOST", None)
            log_path = os.path.join(self.log_dir, f"{pod_name(key[1], kind, index)}.log")
            with open(log_path, "w", encoding="utf-8") as log:
                process = subprocess.Popen(self.argv_for(container), stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, cwd=self.cwd, env=env)
            self.processes[key][(kind, index)] = process
            self.api.put_pod(pod(job, kind, index, "Running", {"running": {"startedAt": now()}}), log_path)

    def deleted(self, job: dict[str, Any]) -> None:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        self._stop(key)
        self.api.finish_delete(*key)

    def _stop(self, key: tuple[str, str]) -> None:
        for process in (self.processes.pop(key, None) or {}).values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def _monitor(self) -> None:
        while not self.stopping.wait(0.3):
            for key in list(self.processes):
                with self.api.lock:
                    job = self.api.jobs.get(key)
                if job is None or key in self.finished or job.get("metadata", {}).get("deletionTimestamp"):
                    continue
                self._update(key, job)

    def _update(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        for (kind, index), process in list(self.processes.get(key, {}).items()):
            code = process.poll()
            if code is None:
                continue
            exit_code = code if code >= 0 else 128 - code
            state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if code == 0 else "Error",
                                    "startedAt": now(), "finishedAt": now()}}
            log = self.api.logs.get((key[0], pod_name(key[1], kind, index)))
            self.api.put_pod(pod(job, kind, index, "Succeeded" if code == 0 else "Failed", state), log)
            del self.processes[key][(kind, index)]
        deadline = job["spec"].get("runPolicy", {}).get("activeDeadlineSeconds")
        late = deadline is not None and time.monotonic() - self.started[key] > deadline
        status = job_status(job, self.api.job_pods(*key), deadline_passed=late)
        self.api.set_status(*key, status)
        if {c["type"] for c in status["conditions"]} & {"Succeeded", "Failed"}:
            policy = job["spec"].get("runPolicy", {}).get("cleanPodPolicy", "None")
            self.finished.add(key)  # under cleanPodPolicy None what still runs runs on, until the job is deleted
            if policy != "None" or late:
                self._stop(key)
                self.api.remove_pods(*key, only=None if policy == "All" else {"Running", "Pending"})
