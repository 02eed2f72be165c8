"""Who this process is in a training cluster: TF_CONFIG, or Vertex's CLUSTER_SPEC, or a Kubeflow Trainer v2
TrainJob's JobSet environment translated to it.

Pure functions of the environment, so every case is testable without a cluster. tfxd.keys.ADDRESSES_ENV maps
TF_CONFIG's addresses to others: `tfxd replay` runs a TFJob's replicas on this machine with the
TF_CONFIG the Training Operator writes (`<job>-worker-0.<namespace>.svc:2222`, names no resolver here
knows) and these loopback ports in their place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfxd import keys

# Vertex AI worker pools -> TensorFlow task types
VERTEX_POOLS = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}


class ClusterError(ValueError):
    """TF_CONFIG or CLUSTER_SPEC cannot be understood; says which and why."""


@dataclass(frozen=True)
class Cluster:
    """The normalised cluster (task type -> addresses, evaluator left out) and this task."""

    spec: dict[str, list[str]] = field(default_factory=dict)
    task_type: str | None = None
    task_index: int = 0

    @property
    def training_tasks(self) -> int:
        """Chief plus workers: the processes that hold replicas."""
        return len(self.spec.get("chief", [])) + len(self.spec.get("worker", []))

    @property
    def parameter_servers(self) -> int:
        return len(self.spec.get("ps", []))

    @property
    def is_chief(self) -> bool:
        if self.task_type is None:
            return True
        if "chief" in self.spec:
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    def tf_config(self) -> dict[str, Any] | None:
        """The TF_CONFIG this task must see (None outside a cluster)."""
        if self.task_type is None:
            return None
        return {"cluster": self.spec, "task": {"type": self.task_type, "index": self.task_index}}


def from_environment(env: Mapping[str, str]) -> Cluster:
    """TF_CONFIG if set, else Vertex's CLUSTER_SPEC, else no cluster; 'master' becomes 'chief'."""
    if env.get("TF_CONFIG"):
        config = _parse(env["TF_CONFIG"], "TF_CONFIG")
        moved = _parse(env[keys.ADDRESSES_ENV], keys.ADDRESSES_ENV) if env.get(keys.ADDRESSES_ENV) else {}
        renamed = {_rename(kind): [moved.get(address, address) for address in addresses]
                   for kind, addresses in (config.get("cluster") or {}).items()}
        task = config.get("task") or {}
        kind = _rename(task.get("type")) if task.get("type") else None
        return _checked(renamed, kind, int(task.get("index", 0)), "TF_CONFIG")
    if env.get("CLUSTER_SPEC"):
        config = _parse(env["CLUSTER_SPEC"], "CLUSTER_SPEC")
        cluster: dict[str, list[str]] = {}
        for pool, addresses in (config.get("cluster") or {}).items():
            if pool not in VERTEX_POOLS:
                raise ClusterError(f"CLUSTER_SPEC has an unknown worker pool {pool!r}; "
                                   f"expected {', '.join(VERTEX_POOLS)}")
            cluster[VERTEX_POOLS[pool]] = list(addresses)
        task = config.get("task") or {}
        pool = task.get("type")
        if pool not in VERTEX_POOLS:
            raise ClusterError(f"CLUSTER_SPEC task type {pool!r} is not a Vertex worker pool")
        return _checked(cluster, VERTEX_POOLS[pool], int(task.get("index", 0)), "CLUSTER_SPEC")
    if env.get(keys.TrainJob.JOBSET_NAME_ENV):
        return from_jobset(env)
    return Cluster()


def from_jobset(env: Mapping[str, str]) -> Cluster:
    """A node of a TrainJob on tfxd's runtime (kubeflow/trainjob-runtime.yaml): every node is a pod of the
    JobSet's one Indexed Job, reachable at `<jobset>-<replicated job>-<job index>-<completion index>.<jobset>`
    (JobSet's DNS hostnames: the Job controller names each pod's host `<job>-<completion index>`, JobSet
    names the Job `<jobset>-<replicated job>-<job index>` and its headless service after the JobSet). Node
    0 is the chief; without parameter servers all nodes are workers (the chief is worker 0), with them
    node 0 coordinates, then come the workers, then the parameter servers."""
    names = keys.TrainJob
    wanted = (names.JOBSET_NAME_ENV, names.REPLICATED_JOB_ENV, names.JOB_INDEX_ENV, names.COMPLETION_INDEX_ENV,
              names.NODES_ENV)
    missing = [name for name in wanted if not env.get(name)]
    if missing:
        raise ClusterError(f"a TrainJob node needs {', '.join(missing)} in its environment (set by tfxd's "
                           f"runtime {names.RUNTIME} and the TrainJob tfxd's Trainer creates): is the "
                           "ClusterTrainingRuntime the one tfxd ships (tfxd kubeflow-manifest trainjob-runtime)?")
    try:
        nodes, job_index, index = (int(env[names.NODES_ENV]), int(env[names.JOB_INDEX_ENV]),
                                   int(env[names.COMPLETION_INDEX_ENV]))
        parameter_servers = int(env.get(names.PARAMETER_SERVERS_ENV) or 0)
        failures = int(env.get(names.INDEX_FAILURES_ENV) or 0)
    except ValueError as exc:
        raise ClusterError(f"a TrainJob node's environment has a count that is not a number: {exc}") from None
    if parameter_servers and nodes < parameter_servers + 2:
        raise ClusterError(f"a TrainJob of {nodes} nodes cannot hold a chief, a worker and {parameter_servers} "
                           "parameter servers")
    jobset = env[names.JOBSET_NAME_ENV]
    moved = _parse(env[keys.ADDRESSES_ENV], keys.ADDRESSES_ENV) if env.get(keys.ADDRESSES_ENV) else {}
    hosts = [f"{jobset}-{env[names.REPLICATED_JOB_ENV]}-{job_index}-{node}.{jobset}:{names.PORT}"
             for node in range(nodes)]
    hosts = [moved.get(host, host) for host in hosts]
    kind, at = jobset_task(index, nodes, parameter_servers)
    if failures:
        _rejoins(kind, at, index, failures, parameter_servers)
    if not parameter_servers:
        return _checked({"worker": hosts}, kind, at, "the TrainJob's environment")
    workers = nodes - parameter_servers - 1
    cluster = {"chief": hosts[:1], "worker": hosts[1:1 + workers], "ps": hosts[1 + workers:]}
    return _checked(cluster, kind, at, "the TrainJob's environment")


def _rejoins(kind: str, at: int, index: int, failures: int, parameter_servers: int) -> None:
    """A node's new pod, after the Job controller saw ``failures`` of its pods killed by a signal (tfxd's
    runtime: backoffLimitPerIndex): only a ParameterServer worker can go on, TensorFlow's coordinator
    taking it back. Any other raises, and so exits with an error, which fails the Job (the runtime's
    podFailurePolicy), and the pipeline's retried step resumes from the backup."""
    if parameter_servers and kind == "worker":
        return
    why = ("the chief runs the training loop and its state went with its pod" if kind == "chief" else
           "a parameter server's variables went with its pod" if kind == "ps" else
           "a MultiWorkerMirrored worker cannot rejoin its peers' collective")
    raise ClusterError(f"node {index} ({kind} {at}) was started again after its pod was killed "
                       f"({failures} of its pods failed, the Job controller's {keys.TrainJob.INDEX_FAILURES_ANNOTATION}), "
                       f"and {why}: this node exits with an error, which fails the TrainJob; retry the pipeline's "
                       "step to resume from the last backup")


def jobset_task(index: int, nodes: int, parameter_servers: int) -> tuple[str, int]:
    """TF_CONFIG's task (type, index) of a TrainJob's node ``index`` (from_jobset's order)."""
    if not parameter_servers:
        return "worker", index
    workers = nodes - parameter_servers - 1
    return ("chief", 0) if index == 0 else ("worker", index - 1) if index <= workers else (
        "ps", index - 1 - workers)


def _parse(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterError(f"{name} is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ClusterError(f"{name} must be a JSON object")
    return value


def _rename(kind: str | None) -> str:
    return "chief" if kind == "master" else str(kind)


def _checked(cluster: dict[str, list[str]], kind: str | None, index: int, source: str) -> Cluster:
    cluster.pop("evaluator", None)  # the evaluator is never part of the training cluster
    known = {"chief", "worker", "ps"}
    unknown = set(cluster) - known
    if unknown:
        raise ClusterError(f"{source} has unknown task types {sorted(unknown)}; expected chief, worker, ps, evaluator")
    if len(cluster.get("chief", [])) > 1:
        raise ClusterError(f"{source} has {len(cluster['chief'])} chiefs; a cluster has at most one")
    if kind not in (None, "evaluator") and (kind not in cluster or not 0 <= index < len(cluster[kind])):
        raise ClusterError(f"{source}: task {kind}:{index} is not in the cluster {cluster}")
    if not cluster:
        return Cluster(task_type=kind if kind == "evaluator" else None, task_index=index)
    return Cluster({k: cluster[k] for k in ("chief", "worker", "ps") if k in cluster}, kind, index)
