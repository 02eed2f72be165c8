"""Kubeflow Trainer v2 on this machine, for `tfxd replay`: what the API server and Trainer's webhooks refuse
of a new TrainJob (TRAINJOBS, kube_api.py's JobKind), and what Trainer's controller, JobSet and the Job
controller make of one on tfxd's runtime (kubeflow/trainjob-runtime.yaml, the one ClusterTrainingRuntime
this stand-in cluster has installed): one pod per node, named, labelled and given the environment the real
code gives it, so that local_operators.py runs each node as a process with exactly that environment.

Restated from kubeflow/trainer v2.3.0 and JobSet v0.12.0 and held to them: tests/conformance/test_trainer.py
compares every node's environment, host name and labels with what the real code (conformance/trainer) makes
of the same TrainJob, and the refusals with the real refusals. A node's failed pod meets the runtime's
podFailurePolicy and backoffLimitPerIndex as the Job controller's code does (held to it there: each exit
code's fate, the failure count on the new pod, the wait before it). What differs: the nodes' host names
mean nothing here, so their addresses are mapped to loopback ports (keys.ADDRESSES_ENV); the processes run
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


# The Job controller's wait before a failed index's new pod (pkg/controller/job DefaultJobPodFailureBackOff),
# doubling with each failure of the index up to MaxJobPodFailureBackOff
POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF = 10.0, 600.0


def host(jobset: str, index: int) -> str:
    """A node's host name: the Job controller's `<job>-<completion index>`, JobSet's Job `<jobset>-node-0`."""
    return f"{jobset}-{NAMES.REPLICATED_JOB}-0-{index}"


def pod_name(jobset: str, index: int, failures: int = 0) -> str:
    """`<host>-<5 characters>`, as the Job controller's generateName; here the same for the same node and
    failure count (a failed node's new pod has a name of its own)."""
    return f"{host(jobset, index)}-{hashlib.sha256(f'{host(jobset, index)}/{failures}'.encode()).hexdigest()[:5]}"


def labels(job: dict[str, Any], index: int) -> dict[str, str]:
    """The labels a node's pod carries that someone reads: JobSet's (the downward API, the launcher's pod
    selector) and the Job controller's completion index."""
    return {NAMES.JOBSET_NAME_LABEL: job["metadata"]["name"], NAMES.REPLICATED_JOB_LABEL: NAMES.REPLICATED_JOB,
            NAMES.JOB_INDEX_LABEL: "0", NAMES.COMPLETION_INDEX_LABEL: str(index)}


def pod_annotations(index: int, failures: int = 0) -> dict[str, str]:
    """The Job controller's annotations on a node's pod: its completion index, and under the runtime's
    backoffLimitPerIndex how many of the index's pods failed before it."""
    return {NAMES.COMPLETION_INDEX_LABEL: str(index), NAMES.INDEX_FAILURES_ANNOTATION: str(failures)}


def environment(job: dict[str, Any], index: int, failures: int = 0) -> dict[str, str]:
    """The node container's environment: the runtime's (its downward API read from the pod's labels and
    annotations), the TrainJob's trainer.env over it (Trainer's builder upserts by name), and the Job
    controller's JOB_COMPLETION_INDEX."""
    on_pod = {"labels": labels(job, index), "annotations": pod_annotations(index, failures)}
    env: dict[str, str] = {}
    for item in _runtime_container().get("env") or []:
        field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        read = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", field)
        env[item["name"]] = on_pod[read.group(1)][read.group(2)] if read else item.get("value", "")
    for item in (job["spec"].get("trainer") or {}).get("env") or []:
        env[item["name"]] = item.get("value", "")
    env.setdefault(NAMES.COMPLETION_INDEX_ENV, str(index))
    return env


def pod(job: dict[str, Any], replica: tuple[str, int], phase: str, container_state: dict[str, Any],
        failures: int = 0) -> dict[str, Any]:
    """A node's pod as the Job controller creates it (``failures``: of the index's pods before it) and the
    kubelet reports it."""
    name, index = job["metadata"]["name"], replica[1]
    container = _container(job)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(name, index, failures), "namespace": job["metadata"]["namespace"],
                         "labels": labels(job, index), "annotations": pod_annotations(index, failures),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": f"{name}-{NAMES.REPLICATED_JOB}-0", "controller": True,
                                              "uid": str(uuid.uuid5(uuid.UUID(job["metadata"]["uid"]), "job"))}]},
            "spec": {"hostname": host(name, index), "subdomain": name, "containers": [container]},
            "status": {"phase": phase, "containerStatuses": [
                {"name": NAMES.CONTAINER, "image": container.get("image", ""), "imageID": "",
                 "ready": phase == "Running", "restartCount": 0, "state": container_state}]}}


def restarts(job: dict[str, Any], replica: tuple[str, int], exit_code: int, failures: int = 0) -> bool:
    """Whether the Job controller makes a new pod for a node whose pod failed with ``exit_code`` after
    ``failures`` earlier failures of its index: not when a FailJob rule of the runtime's podFailurePolicy
    matches the code, nor past backoffLimitPerIndex (then the index fails, and with maxFailedIndexes 0 the
    Job). A TrainJob changes neither (Trainer v2.3's runtimePatches reach a pod's placement)."""
    return fate(exit_code, failures) is None


def restart_delay(failures: int) -> float:
    """Seconds the Job controller waits before the new pod of an index that failed ``failures`` times."""
    return min(POD_FAILURE_BACKOFF * 2 ** (failures - 1), MAX_POD_FAILURE_BACKOFF)


def restarted_env(job: dict[str, Any], replica: tuple[str, int], failures: int) -> dict[str, str]:
    """A node's environment in its new pod: the failure count its annotation carries."""
    return environment(job, replica[1], failures)


def fate(exit_code: int, failures: int, pod: str = "") -> tuple[str, str] | None:
    """How a node's failed pod fails the Job ((reason, message) of the Job's Failed condition), or None
    when the index gets a new pod (pkg/controller/job: matchPodFailurePolicy, then the index's count
    against backoffLimitPerIndex). tfxd's runtime has FailJob rules only; a failure no rule matches counts."""
    spec = _node_job()["template"]["spec"]
    for at, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules") or []):
        codes = rule.get("onExitCodes") or {}
        if not codes or codes.get("containerName", NAMES.CONTAINER) != NAMES.CONTAINER:
            continue
        if (exit_code in codes["values"]) == (codes["operator"] == "In"):
            if rule["action"] == "FailJob":
                return "PodFailurePolicy", (f"Container {NAMES.CONTAINER} for pod {pod} failed with exit code "
                                            f"{exit_code} matching FailJob rule at index {at}")
            break
    if failures + 1 > spec.get("backoffLimitPerIndex", 0):
        return "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes"
    return None


def job_status(job: dict[str, Any], pods: list[dict[str, Any]], deadline_passed: bool = False,
               restarting: list[str] | None = None) -> dict[str, Any]:
    """The TrainJob's status as Trainer copies it from the JobSet: Complete when the Job is (node 0
    succeeded: the runtime's Job success policy), Failed when a node's failed pod failed the Job (its
    podFailurePolicy, its backoffLimitPerIndex; JobSet's maxRestarts 0) or the TrainJob outlived
    activeDeadlineSeconds; jobsStatus counts the one Job. A failed pod whose index gets a new one fails
    nothing."""
    latest: dict[str, dict[str, Any]] = {}
    failed = False
    for item in pods:
        index, count = item["metadata"]["labels"][NAMES.COMPLETION_INDEX_LABEL], _failures(item)
        if index not in latest or count >= _failures(latest[index]):
            latest[index] = item
        if item["status"]["phase"] == "Failed":
            ended = item["status"]["containerStatuses"][0]["state"].get("terminated") or {}
            failed = failed or fate(ended.get("exitCode", 1), count) is not None
    phases = {index: item["status"]["phase"] for index, item in latest.items()}
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


def _failures(pod: dict[str, Any]) -> int:
    return int(pod["metadata"].get("annotations", {}).get(NAMES.INDEX_FAILURES_ANNOTATION, 0))


def _node_job() -> dict[str, Any]:
    [job] = [j for j in runtime()["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == NAMES.REPLICATED_JOB]
    return job


def _runtime_container() -> dict[str, Any]:
    spec = _node_job()["template"]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == NAMES.CONTAINER)


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
