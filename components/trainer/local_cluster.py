"""Local multi-worker training: the Trainer as localhost processes with their own TF_CONFIG.

N workers train with MultiWorkerMirroredStrategy (worker 0 is the chief); with
parameter servers, a chief coordinates N workers and M ps (ParameterServerStrategy).
Each process logs to its own file; any training process that fails fails the
Trainer, naming its log, and the others are stopped.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

LOG_DIR_ENV = "TFXD_TRAINER_LOG_DIR"  # set by `tfxd run`: where the processes' logs go


class WorkerFailed(RuntimeError):
    """A training process exited with an error; names the process and its log."""


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_layout(workers: int, parameter_servers: int) -> list[tuple[str, int, dict[str, list[str]]]]:
    """[(task type, index, cluster)] for every process to start."""
    if parameter_servers:
        ports = iter(free_ports(1 + workers + parameter_servers))
        cluster = {"chief": [f"localhost:{next(ports)}"],
                   "worker": [f"localhost:{next(ports)}" for _ in range(workers)],
                   "ps": [f"localhost:{next(ports)}" for _ in range(parameter_servers)]}
    else:
        cluster = {"worker": [f"localhost:{port}" for port in free_ports(workers)]}
    return [(kind, index, cluster) for kind, addresses in cluster.items() for index in range(len(addresses))]


def train(input_dict, output_dict, exec_properties, cluster: dict[str, int], log_dir: str) -> None:
    os.makedirs(log_dir, exist_ok=True)
    payload = tempfile.NamedTemporaryFile(prefix="tfxd-trainer-", suffix=".pkl", delete=False)  # noqa: SIM115
    with payload:
        pickle.dump((input_dict, output_dict, exec_properties), payload)
    processes: list[tuple[str, str, subprocess.Popen]] = []
    try:
        for kind, index, spec in cluster_layout(cluster["workers"], cluster["parameter_servers"]):
            name = f"{kind}-{index}"
            log_path = os.path.join(log_dir, f"trainer-{name}.log")
            env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": kind, "index": index}})}
            env.pop("CLUSTER_SPEC", None)
            with open(log_path, "w") as log:
                process = subprocess.Popen([sys.executable, "-m", "components.trainer.local_worker", payload.name],
                                           stdout=log, stderr=subprocess.STDOUT, env=env)
            processes.append((name, log_path, process))
        _wait(processes, serving={n for n, _, _ in processes if cluster["parameter_servers"] and
                                  not n.startswith("chief")})
    finally:
        for _, _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        os.unlink(payload.name)


def _wait(processes: list[tuple[str, str, Any]], serving: set[str]) -> None:
    """Until every training process is done; the first failure stops everything."""
    training = [p for p in processes if p[0] not in serving]
    while True:
        for name, log_path, process in processes:
            code = process.poll()
            if code not in (None, 0) or (code == 0 and name in serving):
                raise WorkerFailed(f"Trainer process {name} exited with code {code}; its log: {log_path}")
        if all(process.poll() == 0 for _, _, process in training):
            return
        time.sleep(0.5)
