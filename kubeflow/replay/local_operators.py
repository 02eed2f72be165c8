"""Kubeflow's training operators on this machine, for `tfxd replay`: a loopback Kubernetes API (kube_api.py)
serving TrainJobs (Kubeflow Trainer v2 with tfxd's runtime, trainer_v2.py) and TFJobs (the Training
Operator v1, training_operator.py), as a cluster with both installed does, whose jobs' replicas run as
local processes, as the operators run them as pods.

Each replica gets exactly the environment its operator gives the pod (a TFJob's TF_CONFIG; a TrainJob
node's JobSet environment). Given ``reach``, each replica runs on a host of its own
(components/trainer/replica_hosts.py) under its cluster address's host name, at its port, as a pod: the
cluster's names resolve there, and the replicas reach this machine only at the addresses ``reach``
names. Else the cluster's addresses, which name no host here, are mapped to loopback ports
(keys.ADDRESSES_ENV, read by trainer_module/cluster.py). The job's status follows the processes as
its operator's does (each kind's job_status); a failed replica the operator would create again (each kind's
restarts: a TFJob's `restartPolicy: ExitCode`, a TrainJob node's podFailurePolicy and backoffLimitPerIndex)
starts again after the operator's wait (restart_delay) with its new pod's environment (restarted_env); a
deleted job's processes are stopped first, as a foreground deletion stops the pods.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tfxd import keys
from tfxd.components.trainer.local_cluster import free_ports
from tfxd.components.trainer.replica_hosts import ReplicaHosts
from tfxd.kubeflow.replay import trainer_v2, training_operator
from tfxd.kubeflow.replay.forked_tasks import container_temp
from tfxd.kubeflow.replay.kube_api import KubeApi, Replica, now

# each kind's operator: replicas, pod, restarts, restart_delay, restarted_env, job_status, deadline, ended and
# cleanup of its jobs
OPERATORS: dict[str, ModuleType] = {keys.TrainJob.KIND: trainer_v2, keys.TFJob.KIND: training_operator}


def _name(replica: Replica) -> str:
    """A replica's name for its host's namespace: `worker-0`, `node-1`."""
    return f"{replica.id[0].lower()}-{replica.id[1]}"


class LocalOperators:
    """A KubeApi whose jobs run as local processes. ``argv_for(container)``: the command to run for a
    replica's container; ``cwd`` and ``env``: where and with what extra environment they run; ``host``:
    where the API listens (KubeApi); ``reach``: None, or hosts of their own for the replicas, reaching
    this machine's addresses it names (ReplicaHosts's)."""

    def __init__(self, log_dir: str, argv_for: Callable[[dict[str, Any]], list[str]], cwd: str | None = None,
                 env: dict[str, str] | None = None, host: str = "127.0.0.1",
                 reach: dict[str, list[str]] | None = None) -> None:
        self.api = KubeApi((trainer_v2.TRAINJOBS, training_operator.TFJOBS), controller=self, host=host)
        self.log_dir, self.argv_for, self.cwd, self.env, self.reach = log_dir, argv_for, cwd, env or {}, reach
        self.hosts: dict[tuple[str, str], ReplicaHosts] = {}  # each job's, given reach
        self.processes: dict[tuple[str, str], dict[tuple[str, int], subprocess.Popen]] = {}
        self.temps: dict[tuple[str, str], dict[tuple[str, int], str]] = {}  # each pod's temporary folder
        self.replicas: dict[tuple[str, str], dict[tuple[str, int], tuple[Replica, dict[str, str]]]] = {}
        self.failures: dict[tuple[str, str], dict[tuple[str, int], int]] = {}  # each replica's failed pods
        self.due: dict[tuple[str, str], dict[tuple[str, int], tuple[float, str]]] = {}  # restarts: when, why
        self.started: dict[tuple[str, str], float] = {}
        self.finished: set[tuple[str, str]] = set()
        self.stopping = threading.Event()
        self.monitor = threading.Thread(target=self._monitor, name="tfxd-local-operators", daemon=True)

    def __enter__(self) -> LocalOperators:
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
        replicas = OPERATORS[job["kind"]].replicas(job)
        if self.reach is not None:  # the names resolve on the replicas' hosts: nothing to map
            addresses = {}
            self.hosts[key] = ReplicaHosts({_name(r): r.address.rsplit(":", 1)[0] for r in replicas}, self.reach)
            self.hosts[key].__enter__()
        else:
            ports = iter(free_ports(len(replicas[0].addresses)))
            addresses = {address: f"localhost:{next(ports)}" for address in replicas[0].addresses}
        self.started[key] = time.monotonic()
        self.finished.discard(key)
        self.processes[key], self.failures[key], self.due[key] = {}, {}, {}
        self.replicas[key] = {replica.id: (replica, addresses) for replica in replicas}
        for replica in replicas:
            self._start(key, job, replica.id)

    def _start(self, key: tuple[str, str], job: dict[str, Any], replica_id: tuple[str, int],
               restart: str | None = None) -> None:
        """A replica's process, with its pod's environment; a ``restart`` (why) is written to its new pod's
        log first: after the old pod's story where the pod keeps its name (a TFJob's), as `kubectl logs`
        would carry it on, or at the head of a new pod's own log (a TrainJob node's)."""
        replica, addresses = self.replicas[key][replica_id]
        operator, failures = OPERATORS[job["kind"]], self.failures[key].get(replica_id, 0)
        made = operator.pod(job, replica.id, "Running", {"running": {"startedAt": now()}}, failures=failures)
        temp = container_temp(self.log_dir, made["metadata"]["name"])
        env = {**os.environ, **self.env, **replica.env, **operator.restarted_env(job, replica.id, failures),
               "TMPDIR": temp}
        env.update({keys.ADDRESSES_ENV: json.dumps(addresses)} if addresses else {})
        env.pop("KUBERNETES_SERVICE_HOST", None)
        argv = self.argv_for(replica.container)
        if key in self.hosts:
            argv = self.hosts[key].hosts[_name(replica)].command(argv)
        log_path = os.path.join(self.log_dir, f"{made['metadata']['name']}.log")
        with open(log_path, "a" if restart else "w", encoding="utf-8") as log:
            if restart:
                log.write(f"\n---- replay: {restart} ----\n")
                log.flush()
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, cwd=self.cwd, env=env)
        self.processes[key][replica.id] = process
        self.temps.setdefault(key, {})[replica.id] = temp
        self.api.put_pod(made, log_path)

    def deleted(self, job: dict[str, Any]) -> None:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        self._stop(key)
        self.api.finish_delete(*key)

    def _stop(self, key: tuple[str, str]) -> None:
        self.replicas.pop(key, None)
        self.due.pop(key, None)
        for process in (self.processes.pop(key, None) or {}).values():
            if process.poll() is None:
                process.kill()
                process.wait()
        for temp in self.temps.pop(key, {}).values():
            shutil.rmtree(temp, ignore_errors=True)
        if key in self.hosts:
            self.hosts.pop(key).__exit__()

    def _monitor(self) -> None:
        while not self.stopping.wait(0.3):
            for key in list(self.processes):
                with self.api.lock:
                    job = self.api.jobs.get(key)
                if job is None or key in self.finished or job.get("metadata", {}).get("deletionTimestamp"):
                    continue
                self._update(key, job)

    def _update(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        operator = OPERATORS[job["kind"]]
        restarting: list[str] = []
        for replica, process in list(self.processes.get(key, {}).items()):
            code = process.poll()
            if code is None:
                continue
            exit_code = code if code >= 0 else 128 - code
            state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if code == 0 else "Error",
                                    "startedAt": now(), "finishedAt": now()}}
            failures = self.failures[key].get(replica, 0)
            made = operator.pod(job, replica, "Succeeded" if code == 0 else "Failed", state, failures=failures)
            self.api.put_pod(made, self.api.logs.get((key[0], made["metadata"]["name"])))
            del self.processes[key][replica]
            temp = self.temps.get(key, {}).pop(replica, None)
            if temp:
                shutil.rmtree(temp, ignore_errors=True)
            if code != 0 and operator.restarts(job, replica, exit_code, failures):  # the operator creates it again
                self.failures[key][replica] = failures + 1
                self.due[key][replica] = (time.monotonic() + operator.restart_delay(failures + 1),
                                          f"pod {made['metadata']['name']} failed with exit code {exit_code}; "
                                          "the operator created it again")
        for replica, (when, why) in list(self.due.get(key, {}).items()):
            if time.monotonic() >= when:
                del self.due[key][replica]
                restarting.append(replica[0])
                self._start(key, job, replica, why)
        deadline = operator.deadline(job)
        late = deadline is not None and time.monotonic() - self.started[key] > deadline
        status = operator.job_status(job, self.api.job_pods(*key), deadline_passed=late, restarting=restarting)
        self.api.set_status(*key, status)
        if operator.ended(status):
            self.finished.add(key)
            stop, only = operator.cleanup(job, late)
            if stop:
                self._stop(key)
                self.api.remove_pods(*key, only=only)
