"""Local multi-worker training: the Trainer as localhost processes with their own TF_CONFIG.

N workers train with MultiWorkerMirroredStrategy (worker 0 is the chief); with
parameter servers, a chief coordinates N workers and M ps (ParameterServerStrategy).
Each process logs to its own file; any training process that fails (or is killed)
fails the Trainer at once, naming it, its pid and its log, and the others are
stopped; when it failed because TensorFlow lost a peer (frozen, hung, cut off), the
peer is named as the cause and the failed process as its reporter (peer_blame.py).
One exception, as the Training Operator's `restartPolicy: ExitCode` makes it for a
TFJob's workers: under ParameterServer a worker killed by a signal (preempted, out of
memory) is started again, up to WORKER_RESTARTS times, with the same TF_CONFIG and
port; TensorFlow's ClusterCoordinator meanwhile runs its steps on the other workers
and takes it back when it is up. A worker that exits with an error still fails the
Trainer: a restart would only fail again.
The processes read their inputs on stdin and stop by themselves when the tfxd that
started them is gone (local_worker.py): nothing is left behind.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tfxd import console, stops
from tfxd.components.trainer import peer_blame
from tfxd.trainer_config import ProcessCluster

PARENT_ENV = "TFXD_TRAINER_PARENT"  # the workers stop when this process is gone (local_worker.py)
WORKER_RESTARTS = 3  # per worker, under ParameterServer: a worker killed more often than this fails the Trainer

Process = tuple[str, str, Any]  # (name, log path, Popen)


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


def train(input_dict, output_dict, exec_properties, cluster: ProcessCluster, log_dir: str) -> None:
    os.makedirs(log_dir, exist_ok=True)
    payload = pickle.dumps((input_dict, output_dict, exec_properties))  # on stdin: no file to leave behind
    processes: list[Process] = []
    # the processes' temporary files (TensorFlow's autograph modules among them, which a process removes
    # only when it exits normally) in a folder that goes with them, however they end
    temp = tempfile.mkdtemp(prefix="tfxd-cluster-")
    layout = {f"{kind}-{index}": (kind, index, spec)
              for kind, index, spec in cluster_layout(cluster.workers, cluster.parameter_servers)}

    def start(name: str, restart: str | None = None) -> None:
        kind, index, spec = layout[name]
        log_path = os.path.join(log_dir, f"trainer-{name}.log")
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": kind, "index": index}}),
               PARENT_ENV: str(os.getpid()), "TMPDIR": temp}
        env.pop("CLUSTER_SPEC", None)
        with open(log_path, "a" if restart else "w") as log:
            if restart:
                log.write(f"\n---- tfxd: {restart} ----\n")
                log.flush()
            process = subprocess.Popen([sys.executable, "-m", "tfxd.components.trainer.local_worker"],
                                       stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
        processes.append((name, log_path, process))
        try:
            with process.stdin:  # type: ignore[union-attr]  # a pipe: stdin=PIPE above
                process.stdin.write(payload)  # type: ignore[union-attr]
        except BrokenPipeError:
            pass  # it died before reading: _wait reports it

    try:
        for name in layout:
            start(name)
        serving = {n for n in layout if cluster.parameter_servers and not n.startswith("chief")}
        restartable = {n for n in layout if cluster.parameter_servers and n.startswith("worker")}
        _wait(processes, serving, restartable, start)
    finally:
        for _, _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _wait(processes: list[Process], serving: set[str], restartable: set[str],
          start: Callable[[str, str], None]) -> None:
    """Until every training process is done. The first death fails the Trainer at once (the caller then
    stops the others: a survivor would wait forever on a collective with its dead peer), but for a
    ``restartable`` process killed by a signal: it is started again (``start(name, why)``)."""
    restarts = {name: 0 for name in restartable}
    while True:
        failed = [p for p in processes if p[2].poll() not in (None, 0) or (p[2].poll() == 0 and p[0] in serving)]
        for lost in [p for p in failed if stops.by_signal(p[2].returncode) and restarts.get(p[0], WORKER_RESTARTS) <
                     WORKER_RESTARTS]:
            name, _, process = lost
            restarts[name] += 1
            why = f"{name} (pid {process.pid}) {_death(process.returncode)}; restart {restarts[name]} of " \
                  f"{WORKER_RESTARTS}"
            console.warn(f"Trainer {why}: the other workers train meanwhile, and it rejoins when it is up")
            processes.remove(lost)
            failed.remove(lost)
            start(name, why)
        if failed:
            raise WorkerFailed(_failure(failed, processes))
        if all(process.poll() == 0 for name, _, process in processes if name not in serving):
            return
        time.sleep(0.5)


def _failure(failed: list[Process], processes: list[Process]) -> str:
    """Why the cluster failed, naming the cause: a process killed by a signal (a peer that then errored out
    is its consequence); else the peer TensorFlow says it lost in the failed process's log (frozen, hung or
    cut off: alive, so only its peers' errors tell), the failed process named as the one that reported it;
    else the failed process."""
    name, log_path, process = min(failed, key=lambda p: p[2].returncode >= 0)
    cause = f"Trainer process {name} (pid {process.pid}) {_death(process.returncode)}; its log: {log_path}"
    lost = peer_blame.lost_peer_in(log_path, name) if process.returncode >= 0 else None
    peer = next((p for p in processes if lost is not None and p[0] == lost.replica), None)
    if lost is not None and peer is not None:
        peer_name, peer_log, peer_process = peer
        code = peer_process.poll()
        what = (_death(code) if code is not None else peer_blame.process_state(peer_process.pid)
                or "stopped answering while alive (hung, or cut off from the others)")
        cause = (f"Trainer process {peer_name} (pid {peer_process.pid}) {what}: TensorFlow lost it "
                 f"({lost.said}); its log: {peer_log}. Reported by {name} (pid {process.pid}), which "
                 f"{_death(process.returncode)}; its log: {log_path}")
    others = [n for n, _, p in processes if n != name and p.poll() is None]
    return cause + (f"; stopped the others ({', '.join(others)})" if others else "")


def _death(code: int) -> str:
    """How a process ended, in words: 'was killed by signal 9 (SIGKILL...)', 'exited with code 1'."""
    return "exited (code 0) while the training still needed it" if code == 0 else stops.ended(code)
