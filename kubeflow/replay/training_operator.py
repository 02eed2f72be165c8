"""The Kubeflow Training Operator, on this machine: a TFJob's replicas become processes (local_operators.py),
as the operator makes them pods, so that `tfxd replay` runs a Kubeflow file whose Trainer launches a TFJob;
and what the
API server and the operator's webhook refuse of a new TFJob (TFJOBS, kube_api.py's JobKind): a field the
CRD does not have (the real server would drop it silently, and the setting with it), a pod template that
is not a PodTemplateSpec (checked field by field against the kubernetes client's own models), an owner
reference without uid, and what the admission webhook denies (training-operator v1.9,
pkg/webhooks/tensorflow/tfjob_webhook.go: a DNS-1035 name, a container named `tensorflow` with an image in
every replica, at most one chief).

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
import re
from typing import Any

from tfxd import keys, stops
from tfxd.components.trainer import tfjob_manifest as manifest
from tfxd.kubeflow.replay.kube_api import DNS_1035, Invalid, JobKind, Replica, model_problems, now

TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")
SPEC_KEYS = {"enableDynamicWorker", "runPolicy", "successPolicy", "tfReplicaSpecs"}
RUN_POLICY_KEYS = {"activeDeadlineSeconds", "backoffLimit", "cleanPodPolicy", "managedBy", "schedulingPolicy",
                   "suspend", "ttlSecondsAfterFinished"}
REPLICA_KEYS = {"replicas", "restartPolicy", "template"}
# tfxd's own rule, earlier than a cluster's: the TFJob CRD has no enum for restartPolicy and the webhook does
# not check it (tests/conformance: the real code takes "Sometimes"), but the controller copies it onto each
# pod (pkg/controller.v1/tensorflow/util.go, setRestartPolicy; ExitCode becomes Never), where the Pod API
# refuses it: the job would never start. cleanPodPolicy has no such check anywhere: an unknown one acts as All.
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")


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


def replicas(job: dict[str, Any]) -> list[Replica]:
    """Every replica, with the TF_CONFIG the operator writes into it."""
    configs = tf_configs(job)
    addresses = tuple(address for members in next(iter(configs.values()))["cluster"].values() for address in members)
    found = []
    for (kind, index), config in configs.items():
        template = job["spec"]["tfReplicaSpecs"][kind]["template"]["spec"]
        container = next(c for c in template["containers"] if c["name"] == keys.TFJob.CONTAINER)
        env = {**{e["name"]: e.get("value", "") for e in container.get("env", [])}, "TF_CONFIG": written(config)}
        own = config["cluster"][config["task"]["type"]][config["task"]["index"]]
        found.append(Replica((kind, index), pod_name(job["metadata"]["name"], kind, index), container, env, addresses,
                             own))
    return found


def deadline(job: dict[str, Any]) -> int | None:
    return job["spec"].get("runPolicy", {}).get("activeDeadlineSeconds")


def ended(status: dict[str, Any]) -> bool:
    return bool({c["type"] for c in status["conditions"]} & {"Succeeded", "Failed"})


def cleanup(job: dict[str, Any], deadline_passed: bool) -> tuple[bool, set[str] | None]:
    """When the job has ended: whether its processes stop, and the phases of the pods then removed (None:
    all). Under cleanPodPolicy None what still runs runs on, until the job is deleted; past the job's
    deadline the replay stops it all the same, where the controller (v1.9.4) would leave it running.
    Running removes the running and pending pods; All, and any other value, every pod
    (pkg/controller.v1/common/job.go, DeletePodsAndServices)."""
    policy = job["spec"].get("runPolicy", {}).get("cleanPodPolicy", "None")
    return policy != "None" or deadline_passed, {"Running", "Pending"} if policy in ("Running", "None") else None


def pod(job: dict[str, Any], replica: tuple[str, int], phase: str, container_state: dict[str, Any],
        failures: int = 0) -> dict[str, Any]:
    """A replica's pod as the operator creates it (again after ``failures``, under the same name) and the
    kubelet reports it."""
    kind, index = replica
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


def restarts(job: dict[str, Any], replica: tuple[str, int], exit_code: int, failures: int = 0) -> bool:
    """Whether the operator deletes a replica's failed pod and creates it again (pkg/controller.v1/common/pod.go,
    ReconcilePods): under restartPolicy ExitCode when its exit code is retryable (128 or more, a signal:
    tfxd.stops.by_signal), under OnFailure and Always
    whatever the code (there the kubelet restarts the container in place first; the pod, its name and
    address stay, as here). Never, the default: the pod stays failed and fails the job."""
    policy = job["spec"]["tfReplicaSpecs"][replica[0]].get("restartPolicy", "Never")
    return policy in ("OnFailure", "Always") or (policy == "ExitCode" and stops.by_signal(exit_code))


def restart_delay(failures: int) -> float:
    """The operator creates a failed replica's pod again at its next reconcile."""
    return 0.0


def restarted_env(job: dict[str, Any], replica: tuple[str, int], failures: int) -> dict[str, str]:
    """A replica's new pod has the environment of the one before."""
    return {}


def job_status(job: dict[str, Any], pods: list[dict[str, Any]], deadline_passed: bool = False,
               restarting: list[str] | None = None) -> dict[str, Any]:
    """The status the operator writes for ``job`` whose pods are ``pods`` (a job with a Chief), ``restarting``
    the types of the replicas whose failed pods it has just created again (the Restarting condition, until its
    next reconcile: the failed pod is gone by then)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    counts: dict[str, dict[str, int]] = {}
    for item in pods:
        kind = next(k for k in TYPES if k.lower() == item["metadata"]["labels"][keys.TFJob.REPLICA_TYPE_LABEL])
        phase = item["status"]["phase"]
        key = {"Running": "active", "Pending": "active", "Succeeded": "succeeded", "Failed": "failed"}[phase]
        counts.setdefault(kind, {}).setdefault(key, 0)
        counts[kind][key] += 1
    conditions = [_condition("Created", "TFJobCreated", f"TFJob {namespace}/{name} is created.")]
    failed = [(kind, c["failed"]) for kind, c in counts.items() if c.get("failed") and kind not in (restarting or [])]
    chief = counts.get("Chief") or counts.get("Master") or {}
    if chief.get("active"):
        conditions.append(_condition("Running", "TFJobRunning", f"TFJob {namespace}/{name} is running."))
    if restarting:  # the message ReconcilePods records, with the replica type as Go prints it
        conditions.append(_condition("Restarting", "TFJobRestarting", f"job {name} is restarting because "
                                     f"{restarting[0]} replica(s) failed."))
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


def validate(body: dict[str, Any], namespace: str) -> None:
    """A new TFJob as the API server (the CRD's fields, metadata rules) and the operator's webhook take it."""
    problems: list[str] = []
    metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
    for owner in metadata.get("ownerReferences") or []:
        for key in ("apiVersion", "kind", "name", "uid"):
            if not owner.get(key):
                problems.append(f"metadata.ownerReferences.{key}: Invalid value: \"\": {key} must not be empty")
    problems += [f"spec.{k}: field not declared in schema" for k in set(spec) - SPEC_KEYS]
    run_policy = spec.get("runPolicy") or {}
    problems += [f"spec.runPolicy.{k}: field not declared in schema" for k in set(run_policy) - RUN_POLICY_KEYS]
    replicas = spec.get("tfReplicaSpecs")
    if not replicas:
        problems.append("spec.tfReplicaSpecs: Required value: must be required")
    for kind, replica in (replicas or {}).items():
        at = f"spec.tfReplicaSpecs[{kind}]"
        problems += [f"{at}.{k}: field not declared in schema" for k in set(replica) - REPLICA_KEYS]
        if replica.get("restartPolicy", "Never") not in RESTART_POLICIES:
            problems.append(f"{at}.restartPolicy: Unsupported value: {replica['restartPolicy']!r}: supported values: "
                            + ", ".join(RESTART_POLICIES) + " (a cluster takes the TFJob, then refuses each of its "
                            "pods, so it never starts)")
        problems += [f"{at}.template{p}" for p in model_problems(replica.get("template") or {}, "V1PodTemplateSpec")]
    if problems:
        raise Invalid(422, "Invalid", f"TFJob.{keys.TFJob.GROUP} \"{metadata.get('name')}\" is invalid: "
                      + "; ".join(problems))
    denied = webhook_problems(body)
    if denied:
        raise Invalid(403, "Forbidden", 'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied '
                      "the request: " + "; ".join(denied))


def webhook_problems(body: dict[str, Any]) -> list[str]:
    name = body.get("metadata", {}).get("name") or ""
    problems = [] if re.match(DNS_1035, name) and len(name) <= 63 else [
        f"metadata.name: Invalid value: {name!r}: should match a DNS-1035 label"]
    chiefs = 0
    for kind, replica in (body.get("spec", {}).get("tfReplicaSpecs") or {}).items():
        containers = replica.get("template", {}).get("spec", {}).get("containers") or []
        at = f"spec.tfReplicaSpecs[{kind}].template.spec.containers"
        if not containers:
            problems.append(f"{at}: Required value: must be specified")
        problems += [f"{at}[{i}].image: Required value" for i, c in enumerate(containers) if not c.get("image")]
        if keys.TFJob.CONTAINER not in [c.get("name") for c in containers]:
            problems.append(f"{at}: Required value: must have at least one container with name {keys.TFJob.CONTAINER}")
        chiefs += kind in ("Chief", "Master")
    if chiefs > 1:
        problems.append("spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role")
    return problems


TFJOBS = JobKind(keys.TFJob.GROUP, keys.TFJob.VERSION, keys.TFJob.PLURAL, keys.TFJob.KIND, keys.TFJob.JOB_NAME_LABEL,
                 validate)
