"""A local ParameterServer Trainer (a chief, 2 workers, 1 ps) rides out a lost worker: worker 1 killed
mid-training is started again by tfxd (components/trainer/local_cluster.py, as the Training Operator's
`restartPolicy: ExitCode` restarts a TFJob's worker killed by a signal); TensorFlow's ClusterCoordinator
puts the lost worker's steps back, trains on worker 0 meanwhile and takes worker 1 back when it is up
(tensorflow/python/distribute/coordinator/cluster_coordinator.py: WorkerPreemptionHandler); the run ends
with every step asked for, the model blessed and pushed. A lost parameter server cannot be ridden out
(its variables are gone): it fails the Trainer, named as the cause, and the same command resumes from
the last BackupAndRestore checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.trainer_module.test_worker_crash import (
    SPEC,
    _newest_logs,
    _project,
    _wait_for,
    cluster_processes,
)

PS_SPEC = (SPEC.replace("  batch_size: 8\n", "  batch_size: 8\n  strategy: parameter_server\n")
           .replace("trainer: {workers: 2}", "trainer: {workers: 2, parameter_servers: 1}")
           .replace('custom: ["slow_epochs:SlowEpochs"]', 'custom: ["held_epochs:HeldEpochs"]')
           + "evaluation: {thresholds: {binary_accuracy: {min: 0.0}}}\n")

# the user's callback beside the spec, run by the chief (the coordinator): epochs slow enough to kill a
# worker mid-training, and epoch 8 held while the file `hold` exists, so the restarted worker is back before
# training ends (the test lifts the hold once the chief's log says so)
HELD_EPOCHS = """\
import time
from pathlib import Path

import tensorflow as tf

HOLD = Path(__file__).parent / "hold"


class HeldEpochs(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.5)
        deadline = time.monotonic() + 180
        while epoch + 1 == 8 and HOLD.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
"""

LOST = "Worker /job:worker/replica:0/task:1 failed with UnavailableError"
RECOVERED = "Worker /job:worker/replica:0/task:1 has been recovered"


def _ps_project(folder: Path) -> Path:
    _project(folder)
    (folder / "spec.yaml").write_text(PS_SPEC)
    (folder / "held_epochs.py").write_text(HELD_EPOCHS)
    return folder


def _tfxd(folder: Path, started: list) -> subprocess.Popen:
    """`tfxd run` of the whole pipeline (to the Pusher)."""
    tfxd_bin = os.path.join(os.path.dirname(sys.executable), "tfxd")
    process = subprocess.Popen([tfxd_bin, "run", "spec.yaml", "--set", "beam.workers=1"], cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started.append(process)
    return process


def _kill_after_a_checkpoint(folder: Path, started: list, task: tuple[str, int]):
    """`tfxd run` of the project in ``folder``; ``task`` is SIGKILLed once the chief has backed up an epoch.
    The run, the cluster's processes as first started (by task), and the victim."""
    backups = folder / "tfxd-runs" / "crash" / "pipeline" / "Trainer" / ".backup"
    run = _tfxd(folder, started)
    cluster = _wait_for(lambda: (c := cluster_processes(run)) and len(c) == 4 and c, "4 cluster processes", 240,
                        run)
    started.extend(cluster.values())
    _wait_for(lambda: list(backups.glob("*/chief/checkpoint")), "a checkpoint", 120, run)
    cluster[task].kill()
    return run, cluster, cluster[task]


def _namespace(pid: int) -> str:
    """The network namespace process ``pid`` runs in, by its name (`ip netns identify`)."""
    return subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True).stdout.strip()


@pytest.mark.reliability("crash point")
def test_a_killed_worker_is_restarted_and_training_finishes_through_it(tmp_path, started):
    """On hosts of their own (network: hosts), each replica at its name's port 2222 as a TFJob's pods are:
    the restarted worker comes back on its own host, under the same name."""
    folder = _ps_project(tmp_path)
    (folder / "spec.yaml").write_text(PS_SPEC.replace("parameter_servers: 1}", "parameter_servers: 1, network: hosts}"))
    (folder / "hold").touch()
    run, cluster, victim = _kill_after_a_checkpoint(folder, started, ("worker", 1))
    assert json.loads(cluster[("chief", 0)].environ()["TF_CONFIG"])["cluster"] == {
        "chief": ["chief-0:2222"], "worker": ["worker-0:2222", "worker-1:2222"], "ps": ["ps-0:2222"]}
    logs = _wait_for(lambda: _newest_logs(folder), "the run's logs", 30, run)
    chief_log = logs / "trainer-chief-0.log"
    _wait_for(lambda: RECOVERED in chief_log.read_text(), "the coordinator taking worker 1 back", 240, run)
    [back] = [p for (kind, index), p in cluster_processes(run).items() if (kind, index) == ("worker", 1)]
    started.append(back)
    host = _namespace(back.pid)
    assert host.endswith("-worker-1") and host == _namespace(cluster[("worker", 0)].pid).replace("worker-0", "worker-1")
    (folder / "hold").unlink()
    stdout, stderr = run.communicate(timeout=240)

    assert run.returncode == 0, stdout + stderr
    restart = (f"worker-1 (pid {victim.pid}) was killed by signal 9 (SIGKILL: out of memory, or stopped from "
               "outside); restart 1 of 3")
    assert f"Trainer {restart}: the other workers train meanwhile" in " ".join((stdout + stderr).split()), stdout + stderr
    worker_log = (logs / "trainer-worker-1.log").read_text()
    assert f"---- tfxd: {restart} ----" in worker_log  # the restarted worker appends to the same log
    assert worker_log.count("udf_utils.get_fn") == 2, worker_log[-2000:]  # it ran the Trainer again
    # the coordinator put the lost steps back, trained meanwhile on worker 0, and took worker 1 back
    chief = chief_log.read_text()
    lost, recovered = chief.index(LOST), chief.index(RECOVERED)
    meanwhile = [line for line in chief[lost:recovered].splitlines() if line.startswith("> Trainer epoch ")]
    assert meanwhile, chief[lost:recovered][-3000:]
    assert "Putting back a closure after it failed" in chief[lost:recovered]
    assert "> Trainer epoch 10/10" in chief and "resumes at epoch" not in chief  # every epoch, none redone
    for process in cluster.values():  # the first processes are gone; the restarted worker too
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE, process
    summary = json.loads(next(logs.parent.glob("summary.json")).read_text())
    statuses = {c["name"]: c["status"] for c in summary["components"]}
    assert statuses["Trainer"] == "ran" and statuses["Pusher"] == "ran", statuses
    assert summary["blessed"] is True and summary["pushed_to"], summary


@pytest.mark.reliability("crash point")
def test_a_killed_parameter_server_fails_the_trainer_and_a_rerun_resumes(tmp_path, started):
    folder = _ps_project(tmp_path)
    run, cluster, victim = _kill_after_a_checkpoint(folder, started, ("ps", 0))
    stdout, stderr = run.communicate(timeout=240)

    assert run.returncode == 1, stdout + stderr
    logs = _newest_logs(folder)
    message = " ".join(stderr.split())
    assert (f"Trainer process ps-0 (pid {victim.pid}) was killed by signal 9 (SIGKILL: out of memory, or stopped "
            f"from outside); its log: {logs / 'trainer-ps-0.log'}") in message, message
    assert "restart" not in stdout + stderr  # a parameter server is not restarted: its variables went with it
    deadline = time.monotonic() + 30
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in cluster.values()):
        assert time.monotonic() < deadline, cluster
        time.sleep(0.2)

    rerun = _tfxd(folder, started)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stdout + stderr
    chief = (_newest_logs(folder) / "trainer-chief-0.log").read_text()
    assert [line for line in chief.splitlines() if line.startswith("> Trainer resumes at epoch ")], chief[-3000:]
    assert "> Trainer epoch 1/10" not in chief and "> Trainer epoch 10/10" in chief
