"""Kubeflow Trainer v2 on this machine, for `tfxd replay`: what the API server and Trainer's webhooks refuse
of a new TrainJob (TRAINJOBS, kube_api.py's JobKind), and what Trainer's controller, JobSet and the Job
controller make of one on tfxd's runtime (kubeflow/trainjob-runtime.yaml, the one ClusterTrainingRuntime
this stand-in cluster has installed): one pod per node, named, labelled and given the environment the real
code gives it, so that local_operators.py runs each node as a process with exactly that environment.

Restated from kubeflow/trainer v2.3.0 and JobSet v0.12.0 and held to them: tests/conformance/test_trainer.py
compares every node's environment, host name and labels with what the real code (conformance/trainer) makes
of the same TrainJob, and the refusals with the real refusals. What differs: the nodes' host names mean
nothing here, so their addresses are mapped to loopback ports (keys.ADDRESSES_ENV); the processes run
this install instead of the image.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from functools import cache
from typing import Any

import yaml

from tfxd import keys
from tfxd.kubeflow.replay.kube_api import DNS_1035, Invalid, JobKind, Replica, now

NAMES = keys.TrainJob
SPEC_KEYS = {"runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds",
             "managedBy"}
TRAINER_KEYS = {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
RUNTIME_REF_KEYS = {"name", "apiGroup", "kind"}


@cache
def runtime() -> dict[str, Any]:
    """tfxd's ClusterTrainingRuntime, as the wheel ships it."""
    from importlib import resources

    return yaml.safe_load(resources.files("tfxd.kubeflow").joinpath("trainjob-runtime.yaml").read_text("utf-8"))


def validate(body: dict[str, Any], namespace: str) -> None:
    """A new TrainJob as the API server (the CRD's fields and CEL rules) and Trainer's webhook take it."""
    metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
    name = metadata.get("name") or ""
    unknown = sorted([f"spec.{k}" for k in set(spec) - SPEC_KEYS]
                     + [f"spec.trainer.{k}" for k in set(spec.get("trainer") or {}) - TRAINER_KEYS]
                     + [f"spec.runtimeRef.{k}" for k in set(spec.get("runtimeRef") or {}) - RUNTIME_REF_KEYS])
    if unknown:
        raise Invalid(400, "BadRequest", "strict decoding error: "
                      + ", ".join(f'unknown field "{path}"' for path in unknown))
    broken = [message for rule, message in (
        (re.match(DNS_1035, name), "metadata.name must match RFC 1035 DNS label format"),
        (len(name) <= 63, "metadata.name must be no more than 63 characters")) if not rule]
    if broken:
        raise Invalid(422, "Invalid", f'TrainJob.{NAMES.GROUP} "{name}" is invalid: '
                      + ", ".join(f'<nil>: Invalid value: "object": {message}' for message in broken))
    reference = spec.get("runtimeRef") or {}
    kind, group = reference.get("kind", NAMES.RUNTIME_KIND), reference.get("apiGroup", NAMES.GROUP)
    if (kind, group) != (NAMES.RUNTIME_KIND, NAMES.GROUP):
        raise Invalid(403, "Forbidden", f'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the '
                      f"request: spec.RuntimeRef: Invalid value: unsupported runtime: {kind}.{group}")
    if reference.get("name") != runtime()["metadata"]["name"]:
        raise Invalid(403, "Forbidden", 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the '
                      f'request: spec.RuntimeRef: Invalid value: clustertrainingruntimes.{NAMES.GROUP} '
                      f'"{reference.get("name")}" not found: specified clusterTrainingRuntime must be created '
                      "before the TrainJob is created")


def replicas(job: dict[str, Any]) -> list[Replica]:
    """The nodes: one pod each of the JobSet's one Indexed Job (`<job>-node-0`), index by index."""
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer") or {}
    nodes = int(trainer.get("numNodes", runtime()["spec"]["mlPolicy"]["numNodes"]))
    hosts = tuple(f"{host(name, index)}.{name}:{NAMES.PORT}" for index in range(nodes))
    return [Replica(("node", index), pod_name(name, index), _container(job), environment(job, index), hosts,
                    hosts[index]) for index in range(nodes)]


def host(jobset: str, index: int) -> str:
    """A node's host name: the Job controller's `<job>-<completion index>`, JobSet's Job `<jobset>-node-0`."""
    return f"{jobset}-{NAMES.REPLICATED_JOB}-0-{index}"


def pod_name(jobset: str, index: int) -> str:
    """`<host>-<5 characters>`, as the Job controller's generateName; here the same for the same node."""
    return f"{host(jobset, index)}-{hashlib.sha256(host(jobset, index).encode()).hexdigest()[:5]}"


def labels(job: dict[str, Any], index: int) -> dict[str, str]:
    """The labels a node's pod carries that someone reads: JobSet's (the downward API, the launcher's pod
    selector) and the Job controller's completion index."""
    return {NAMES.JOBSET_NAME_LABEL: job["metadata"]["name"], NAMES.REPLICATED_JOB_LABEL: NAMES.REPLICATED_JOB,
            NAMES.JOB_INDEX_LABEL: "0", NAMES.COMPLETION_INDEX_LABEL: str(index)}


def environment(job: dict[str, Any], index: int) -> dict[str, str]:
    """The node container's environment: the runtime's (its downward API read from the pod's labels), the
    TrainJob's trainer.env over it (Trainer's builder upserts by name), and the Job controller's
    JOB_COMPLETION_INDEX."""
    on_pod = labels(job, index)
    env: dict[str, str] = {}
    for item in _runtime_container().get("env") or []:
        field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        label = re.fullmatch(r"metadata\.labels\['([^']+)'\]", field)
        env[item["name"]] = on_pod[label.group(1)] if label else item.get("value", "")
    for item in (job["spec"].get("trainer") or {}).get("env") or []:
        env[item["name"]] = item.get("value", "")
    env.setdefault(NAMES.COMPLETION_INDEX_ENV, str(index))
    return env


def pod(job: dict[str, Any], replica: tuple[str, int], phase: str, container_state: dict[str, Any]) -> dict[str, Any]:
    """A node's pod as the Job controller creates it and the kubelet reports it."""
    name, index = job["metadata"]["name"], replica[1]
    container = _container(job)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(name, index), "namespace": job["metadata"]["namespace"],
                         "labels": labels(job, index),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": f"{name}-{NAMES.REPLICATED_JOB}-0", "controller": True,
                                              "uid": str(uuid.uuid5(uuid.UUID(job["metadata"]["uid"]), "job"))}]},
            "spec": {"hostname": host(name, index), "subdomain": name, "containers": [container]},
            "status": {"phase": phase, "containerStatuses": [
                {"name": NAMES.CONTAINER, "image": container.get("image", ""), "imageID": "",
                 "ready": phase == "Running", "restartCount": 0, "state": container_state}]}}


def restarts(job: dict[str, Any], replica: tuple[str, int], exit_code: int) -> bool:
    """Never: tfxd's runtime gives the Job backoffLimit 0 and its pods restartPolicy Never, and a TrainJob
    can change neither (Trainer v2.3's runtimePatches reach a pod's placement, not its restarts)."""
    return False


def job_status(job: dict[str, Any], pods: list[dict[str, Any]], deadline_passed: bool = False,
               restarting: list[str] | None = None) -> dict[str, Any]:
    """The TrainJob's status as Trainer copies it from the JobSet: Complete when the Job is (node 0
    succeeded: the runtime's Job success policy), Failed when a node failed (backoffLimit 0, JobSet's
    maxRestarts 0) or the TrainJob outlived activeDeadlineSeconds; jobsStatus counts the one Job."""
    phases = {item["metadata"]["labels"][NAMES.COMPLETION_INDEX_LABEL]: item["status"]["phase"] for item in pods}
    failed = "Failed" in phases.values()
    done = phases.get("0") == "Succeeded" and not failed
    conditions = []
    if deadline_passed and not done:
        conditions.append(_condition("Failed", "DeadlineExceeded", "TrainJob exceeded its active deadline"))
    elif failed:
        conditions.append(_condition("Failed", "ReachedMaxRestarts",
                                     "jobset failed due to reaching max number of restarts"))
    elif done:
        conditions.append(_condition("Complete", "AllJobsCompleted", "jobset completed successfully"))
    running = not conditions and any(phase in ("Running", "Pending") for phase in phases.values())
    counts = {"active": int(running), "ready": int(running), "succeeded": int(done), "failed": int(failed),
              "suspended": 0}
    return {"conditions": conditions, "jobsStatus": [{"name": NAMES.REPLICATED_JOB, **counts}]}


def ended(status: dict[str, Any]) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", []))


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now()}


def _runtime_container() -> dict[str, Any]:
    [job] = [j for j in runtime()["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == NAMES.REPLICATED_JOB]
    return next(c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == NAMES.CONTAINER)


def _container(job: dict[str, Any]) -> dict[str, Any]:
    """The node container after Trainer's builder: the runtime's, with the TrainJob's image, command, args."""
    trainer = job["spec"].get("trainer") or {}
    return {**{k: v for k, v in _runtime_container().items() if k != "env"},
            **{key: trainer[key] for key in ("image", "command", "args") if key in trainer}}



def deadline(job: dict[str, Any]) -> int | None:
    return job["spec"].get("activeDeadlineSeconds")


def cleanup(job: dict[str, Any], deadline_passed: bool) -> tuple[bool, set[str] | None]:
    """When the TrainJob has ended: its nodes still running stop (the Job controller terminates them when
    the Job succeeds by its success policy or fails), and their pods go."""
    return True, {"Running", "Pending"}


TRAINJOBS = JobKind(NAMES.GROUP, NAMES.VERSION, NAMES.PLURAL, NAMES.KIND, NAMES.JOBSET_NAME_LABEL, validate)
