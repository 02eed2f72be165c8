"""Local multi-worker training: the Trainer as local processes with their own TF_CONFIG.

On ``network: loopback`` every process listens on a free port of localhost; on ``network: hosts`` each
runs on a host of its own (replica_hosts.py) at port 2222 under its replica name (`worker-1:2222`), with
the TF_CONFIG a cluster writes. N workers train with MultiWorkerMirroredStrategy (worker 0 is the chief); with
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

import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from tfxd import console, stops
from tfxd.components.trainer import peer_blame, replica_hosts
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


def cluster_layout(workers: int, parameter_servers: int, hosts: bool = False
                   ) -> list[tuple[str, int, dict[str, list[str]]]]:
    """[(task type, index, cluster)] for every process to start; ``hosts``: each on a host named after
    it (`worker-1`) at replica_hosts.PORT, else on localhost's free ports."""
    counts = {"chief": 1, "worker": workers, "ps": parameter_servers} if parameter_servers else {"worker": workers}
    ports = iter(free_ports(sum(counts.values())))
    cluster = {kind: [f"{kind}-{index}:{replica_hosts.PORT}" if hosts else f"localhost:{next(ports)}"
                      for index in range(count)] for kind, count in counts.items()}
    return [(kind, index, cluster) for kind, addresses in cluster.items() for index in range(len(addresses))]


def train(input_dict, output_dict, exec_properties, cluster: ProcessCluster, log_dir: str) -> None:
    os.makedirs(log_dir, exist_ok=True)
    payload = pickle.dumps((input_dict, output_dict, exec_properties))  # on stdin: no file to leave behind
    processes: list[Process] = []
    # the processes' temporary files (TensorFlow's autograph modules among them, which a process removes
    # only when it exits normally) in a folder that goes with them, however they end
    temp = tempfile.mkdtemp(prefix="tfxd-cluster-")
    on_hosts = cluster.network == "hosts"
    layout = {f"{kind}-{index}": (kind, index, spec)
              for kind, index, spec in cluster_layout(cluster.workers, cluster.parameter_servers, on_hosts)}
    hosts = replica_hosts.ReplicaHosts({name: name for name in layout} if on_hosts else {})

    def start(name: str, restart: str | None = None) -> None:
        kind, index, spec = layout[name]
        log_path = os.path.join(log_dir, f"trainer-{name}.log")
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": kind, "index": index}}),
               PARENT_ENV: str(os.getpid()), "TMPDIR": temp}
        env.pop("CLUSTER_SPEC", None)
        argv = [sys.executable, "-m", "tfxd.components.trainer.local_worker"]
        with open(log_path, "a" if restart else "w") as log:
            if restart:
                log.write(f"\n---- tfxd: {restart} ----\n")
                log.flush()
            process = subprocess.Popen(hosts.hosts[name].command(argv) if on_hosts else argv,
                                       stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
        processes.append((name, log_path, process))
        try:
            with process.stdin:  # type: ignore[union-attr]  # a pipe: stdin=PIPE above
                process.stdin.write(payload)  # type: ignore[union-attr]
        except BrokenPipeError:
            pass  # it died before reading: _wait reports it

    try:
        with hosts, _stopping(processes):  # the processes stop before their hosts go
            for name in layout:
                start(name)
            serving = {n for n in layout if cluster.parameter_servers and not n.startswith("chief")}
            restartable = {n for n in layout if cluster.parameter_servers and n.startswith("worker")}
            _wait(processes, serving, restartable, start, hosts)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def _stopping(processes: list[Process]) -> Iterator[None]:
    """Kills what is still running of ``processes`` on the way out, however it is left."""
    try:
        yield
    finally:
        for _, _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait(processes: list[Process], serving: set[str], restartable: set[str],
          start: Callable[[str, str], None], hosts: replica_hosts.ReplicaHosts) -> None:
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
            raise WorkerFailed(_failure(failed, processes, hosts))
        if all(process.poll() == 0 for name, _, process in processes if name not in serving):
            return
        time.sleep(0.5)


def _failure(failed: list[Process], processes: list[Process],
             hosts: replica_hosts.ReplicaHosts | None = None) -> str:
    """Why the cluster failed, naming the cause: a process killed by a signal (a peer that then errored out
    is its consequence); else a replica whose host is cut off (on hosts of their own: each side of a cut
    loses the other, and the link says which side was cut); else the peer TensorFlow says it lost in the
    failed process's log (frozen, hung or cut off: alive, so only its peers' errors tell), the failed
    process named as the one that reported it; else the failed process."""
    name, log_path, process = min(failed, key=lambda p: p[2].returncode >= 0)
    cause = f"Trainer process {name} (pid {process.pid}) {_death(process.returncode)}; its log: {log_path}"
    lost = peer_blame.lost_peer_in(log_path, name) if process.returncode >= 0 else None
    cut = [(p, why) for p in processes if hosts is not None and process.returncode >= 0
           and (why := hosts.cut_off(p[0])) is not None]
    peer = cut[0][0] if cut else next((p for p in processes if lost is not None and p[0] == lost.replica), None)
    if peer is not None:
        peer_name, peer_log, peer_process = peer
        code = peer_process.poll()
        alive = (peer_blame.process_state(peer_process.pid)
                 or "stopped answering while alive (hung, or cut off from the others)")
        what = f"{cut[0][1]}{f' and {_death(code)}' if code is not None else ''}" if cut else (
            _death(code) if code is not None else alive)
        seen = f": TensorFlow lost it ({lost.said})" if lost is not None and lost.replica == peer_name else ""
        cause = f"Trainer process {peer_name} (pid {peer_process.pid}) {what}{seen}; its log: {peer_log}"
        if peer_name != name:
            cause += f". Reported by {name} (pid {process.pid}), which {_death(process.returncode)}; its log: {log_path}"
    others = [n for n, _, p in processes if n != name and p.poll() is None]
    return cause + (f"; stopped the others ({', '.join(others)})" if others else "")


def _death(code: int) -> str:
    """How a process ended, in words: 'was killed by signal 9 (SIGKILL...)', 'exited with code 1'."""
    return "exited (code 0) while the training still needed it" if code == 0 else stops.ended(code)
