"""A local 2-worker MultiWorkerMirrored Trainer loses a worker (SIGKILL) mid-training: the Trainer fails
promptly, naming the dead worker and its log, with no process of the cluster left; the same command run
again resumes from the last BackupAndRestore checkpoint (the log says at which epoch) and completes, and
a completed training leaves no backup behind."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests.conftest import own_temp_dir

SPEC = """\
tfxd: 1
name: crash
data: {format: csv, path: data.csv}
features:
  - {name: x, transform: zscore}
label: {name: y, column: target, task: binary}
model: {type: dnn, hidden_units: [4]}
training:
  batch_size: 8
  steps: 30           # 10 epochs of 3 steps: epoch boundaries, a checkpoint after each
  eval_steps: 1
  callbacks: {tensorboard: false, custom: ["slow_epochs:SlowEpochs"]}
targets:
  local:
    trainer: {workers: 2}
"""

# a user's callback beside the spec: each epoch lasts long enough for the test to kill a worker mid-training
SLOW_EPOCHS = """\
import time

import tensorflow as tf


class SlowEpochs(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.5)
"""

FROZEN_FOR = 12  # training.peer_timeout of the frozen-worker test
ARGS = ("run", "spec.yaml", "--to", "Trainer", "--set", "beam.workers=1")
WORKER_MODULE = "tfxd.components.trainer.local_worker"


def _project(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    rows = "\n".join(f"{value:.4f},{int(value + rng.normal(scale=0.5) > 0)}" for value in x)
    (folder / "data.csv").write_text("x,target\n" + rows + "\n")
    (folder / "spec.yaml").write_text(SPEC)
    (folder / "slow_epochs.py").write_text(SLOW_EPOCHS)
    return folder


def _tfxd(folder: Path, started: list[subprocess.Popen], own_temp: bool = False) -> subprocess.Popen:
    """``own_temp``: a temporary folder of its own (conftest.own_temp_dir), for a run the test SIGKILLs: a killed
    tfxd cannot remove its cluster's temporary folder."""
    tfxd_bin = os.path.join(os.path.dirname(sys.executable), "tfxd")
    env = dict(os.environ)
    if own_temp:
        env["TMPDIR"] = own_temp_dir(folder)
    process = subprocess.Popen([tfxd_bin, *ARGS], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    started.append(process)
    return process


def cluster_processes(parent: subprocess.Popen) -> dict[tuple[str, int], psutil.Process]:
    """The Trainer cluster's processes under ``parent``, by (task type, index) from their TF_CONFIG."""
    found = {}
    for child in psutil.Process(parent.pid).children(recursive=True):
        try:
            if WORKER_MODULE in child.cmdline():
                task = json.loads(child.environ()["TF_CONFIG"])["task"]
                found[(task["type"], task["index"])] = child
        except (psutil.NoSuchProcess, KeyError):
            continue
    return found


def _workers(parent: subprocess.Popen) -> dict[int, psutil.Process]:
    """The MultiWorkerMirrored cluster's processes under ``parent``, by worker index."""
    return {index: process for (_, index), process in cluster_processes(parent).items()}


def _both_workers(parent: subprocess.Popen, started: list) -> dict[int, psutil.Process] | None:
    found = _workers(parent)
    if len(found) < 2:
        return None
    started.extend(found.values())
    return found


def _wait_for(predicate, what: str, timeout: float, process: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert process.poll() is None, f"tfxd ended while waiting for {what}: {process.communicate()}"
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _newest_logs(folder: Path) -> Path:
    return Path(sorted(glob.glob(str(folder / "tfxd-runs" / "crash" / "runs" / "*" / "logs")))[-1])


def _signal_worker_one_after_a_checkpoint(folder: Path, started: list, signum: int, still_up_for: float = 0):
    """`tfxd run` of the project in ``folder``, whose worker 1 gets ``signum`` once the chief has backed up
    an epoch (BackupAndRestore's checkpoint); the run, its workers by index, and its output once it ended.
    ``still_up_for``: seconds after the signal during which the run and worker 0 must keep running."""
    backups = folder / "tfxd-runs" / "crash" / "pipeline" / "Trainer" / ".backup"
    run = _tfxd(folder, started)
    workers = _wait_for(lambda: _both_workers(run, started), "2 workers", 240, run)
    _wait_for(lambda: glob.glob(str(backups / "*" / "chief" / "checkpoint")), "a checkpoint", 120, run)
    workers[1].send_signal(signum)
    time.sleep(still_up_for)
    assert run.poll() is None and workers[0].is_running(), f"ended within {still_up_for} s of the signal"
    stdout, stderr = run.communicate(timeout=180)
    return run, workers, stdout, stderr


@pytest.mark.reliability("crash point")
def test_killed_worker_fails_the_trainer_and_a_rerun_resumes(tmp_path, started):
    folder = _project(tmp_path)
    backups = folder / "tfxd-runs" / "crash" / "pipeline" / "Trainer" / ".backup"
    # a Trainer that waited for worker-0 (blocked on a collective with its dead peer) would never end: the
    # harness's timeout fails it; the cause named is the killed worker, however worker-0 ended
    first, workers, stdout, stderr = _signal_worker_one_after_a_checkpoint(folder, started, signal.SIGKILL)
    victim = workers[1]

    assert first.returncode == 1, stdout + stderr
    log = _newest_logs(folder) / "trainer-worker-1.log"
    assert f"Trainer process worker-1 (pid {victim.pid}) was killed by signal 9 (SIGKILL" in stderr, stderr
    assert f"its log: {log}" in stderr and "Run the same command again to resume" in stderr, stderr
    for process in workers.values():  # every process of the cluster is gone
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE, process
    [backup] = glob.glob(str(backups / "*"))  # kept for the retry
    assert "tfxd trainer: starts at epoch 1/10" in (log.parent / "trainer-worker-0.log").read_text()

    # tfxd itself killed: its workers notice and stop rather than live on as orphans
    second = _tfxd(folder, started, own_temp=True)
    orphans = _wait_for(lambda: _both_workers(second, started), "2 workers", 120, second)
    second.kill()
    second.communicate()
    # each asked Linux to kill it with its parent (PR_SET_PDEATHSIG): unwatched, they would train on
    alive = psutil.wait_procs(list(orphans.values()), timeout=60)[1]
    assert not alive, f"workers left running after tfxd was killed: {alive}"

    third = _tfxd(folder, started)
    stdout, stderr = third.communicate(timeout=240)
    assert third.returncode == 0, stdout + stderr
    chief_log = (_newest_logs(folder) / "trainer-worker-0.log").read_text()
    resumed = [line for line in chief_log.splitlines() if line.startswith("> Trainer resumes at epoch ")]
    assert resumed, chief_log[-3000:]
    epoch = int(resumed[0].split("resumes at epoch ")[1].split("/")[0])
    assert epoch > 1 and resumed[0].endswith(f"checkpoint in {backup}"), resumed  # the killed run's folder
    assert "Trainer epoch 1/10" not in chief_log and "Trainer epoch 10/10" in chief_log
    assert not os.path.exists(backup)  # a completed training leaves no backup: new work starts at epoch 1


@pytest.mark.reliability("crash point")
def test_a_frozen_worker_is_named_as_the_cause_and_every_process_ends(tmp_path, started):
    """Worker 1 frozen (SIGSTOP: alive and silent, as a hung or partitioned pod) after its first epoch:
    TensorFlow's coordination service misses its heartbeats for training.peer_timeout seconds and fails
    worker 0, which reports it; tfxd names worker 1 as the cause, frozen, and worker 0 as the reporter, and
    ends every process of the cluster, the frozen one too. The bound is what ends it (the judge bites):
    halfway to it, nothing has: without the coordination service's heartbeats the cluster would wait on
    its frozen peer."""
    folder = _project(tmp_path)
    (folder / "spec.yaml").write_text(SPEC.replace("  eval_steps: 1\n", f"  eval_steps: 1\n  peer_timeout: {FROZEN_FOR}\n"))
    run, workers, stdout, stderr = _signal_worker_one_after_a_checkpoint(folder, started, signal.SIGSTOP,
                                                                           still_up_for=FROZEN_FOR / 2)
    frozen = workers[1]

    assert run.returncode == 1, stdout + stderr
    logs = _newest_logs(folder)
    message = " ".join(stderr.split())
    assert (f"Trainer process worker-1 (pid {frozen.pid}) was frozen (stopped by a signal): TensorFlow lost it "
            f"(Task /job:worker/replica:0/task:1 heartbeat timeout); its log: {logs / 'trainer-worker-1.log'}. "
            f"Reported by worker-0 (pid {workers[0].pid}), which exited with code 1") in message, message
    for process in workers.values():  # every process of the cluster is gone, the frozen one too
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE, process


def _backup_number(backups: Path) -> int:
    """N of the chief's newest BackupAndRestore checkpoint (`ckpt-N`, one an epoch here), 0 before the first."""
    for path in glob.glob(str(backups / "*" / "chief" / "checkpoint")):
        text = Path(path).read_text()
        if 'model_checkpoint_path: "ckpt-' in text:
            return int(text.split('model_checkpoint_path: "ckpt-')[1].split('"')[0])
    return 0


def _link_of(run: subprocess.Popen, replica_index: int) -> str:
    """The bridge's end of a replica's link, for the cluster ``run`` made: replica_hosts names its bridge
    tfxdbK (its owner's pid in /run/tfxd-hosts/tfxdbK.pid) and the links tfxdbKhI, I the replica's place in
    the layout (worker-0, worker-1)."""
    [bridge] = [owner.stem for owner in Path("/run/tfxd-hosts").glob("tfxdb*.pid")
                if owner.read_text() == str(run.pid)]
    return f"{bridge}h{replica_index}"


def _replica_hosts_left(bridge: str) -> str:
    """What is left of the hosts of bridge ``bridge``'s cluster: links, namespaces, hosts files."""
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    owned = [line for line in (listed + namespaces).splitlines() if f"{bridge}:" in line or f"{bridge}h" in line
             or line.startswith(f"{bridge}-")]
    return "\n".join(owned + [str(p) for p in Path("/etc/netns").glob(f"{bridge}-*")])


@pytest.mark.reliability("environment fault")
def test_on_hosts_of_their_own_a_worker_trains_on_over_a_slow_lossy_link_and_cut_off_is_named(tmp_path, started):
    """network: hosts: each worker in a network namespace of its own on a bridge, at worker-N:2222 (the
    TF_CONFIG a TFJob's pods get, verbatim). After the first backup worker 1's link turns slow and lossy
    (50 ms and 1% of the packets lost, each way: bench/link_delay.py, this kernel having no netem): the
    training goes on over it, an epoch backed up meanwhile, no peer timeout tripped. Then the link is cut
    (`ip link set ... down`: a partitioned pod, alive and unreachable): the coordination service misses its
    heartbeats for peer_timeout seconds, the Trainer fails naming worker 1, every process ends, and no
    namespace, link or hosts file is left. The same command then trains on fresh hosts, resuming from the
    backup."""
    from tests.bench.test_link_delay import delayed

    folder = _project(tmp_path)
    (folder / "spec.yaml").write_text(SPEC.replace("  eval_steps: 1\n", "  eval_steps: 1\n  peer_timeout: 3\n")
                                      .replace("{workers: 2}", "{workers: 2, network: hosts}"))
    backups = folder / "tfxd-runs" / "crash" / "pipeline" / "Trainer" / ".backup"
    run = _tfxd(folder, started)
    workers = _wait_for(lambda: _both_workers(run, started), "2 workers", 240, run)
    cluster = {"worker": ["worker-0:2222", "worker-1:2222"]}
    assert [json.loads(workers[i].environ()["TF_CONFIG"]) for i in (0, 1)] == [
        {"cluster": cluster, "task": {"type": "worker", "index": i}} for i in (0, 1)]
    _wait_for(lambda: glob.glob(str(backups / "*" / "chief" / "checkpoint")), "a checkpoint", 120, run)
    link = _link_of(run, 1)
    bridge = link.split("h")[0]
    with delayed(f"{bridge}-worker-1", tmp_path / "link.json", "--delay", "0.05", "--loss", "0.01"):
        backed_up = _backup_number(backups)
        _wait_for(lambda: _backup_number(backups) > backed_up, "an epoch backed up over the slow link", 120, run)
    counts = json.loads((tmp_path / "link.json").read_text())
    assert counts["accepted"] > 0 and counts["least_hold_s"] >= 0.05, counts  # every packet held, both ways
    subprocess.run(["ip", "link", "set", link, "down"], check=True)
    stdout, stderr = run.communicate(timeout=180)

    assert run.returncode == 1, stdout + stderr
    message = " ".join(stderr.split())
    # each side of the cut loses the other, and either may exit first: the link says which was cut
    cause = message.split("Trainer process ", 1)[1]
    assert cause.startswith(f"worker-1 (pid {workers[1].pid}) was cut off from the others (its host's link "
                            f"{link} is down)"), message
    assert "Run the same command again to resume" in message, message
    for process in workers.values():
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE, process
    assert _replica_hosts_left(bridge) == ""

    again = _tfxd(folder, started)
    stdout, stderr = again.communicate(timeout=240)
    assert again.returncode == 0, stdout + stderr
    chief_log = (_newest_logs(folder) / "trainer-worker-0.log").read_text()
    assert "> Trainer resumes at epoch " in chief_log and "Trainer epoch 10/10" in chief_log, chief_log[-3000:]
    # its hosts gone too: no bridge of its own left (replica_hosts's owner files)
    assert all(owner.read_text() != str(again.pid) for owner in Path("/run/tfxd-hosts").glob("*.pid"))
