"""Faults of a local Trainer cluster (issue 63): how fast a lost peer ends the job, how many steps a killed
training redoes, and what a fault costs in wall time against the same training without it.

A small project (300 rows, 300 steps of 10 epochs, one step a call, a backup every 10 steps) trains on
`targets.local.trainer`; each fault is dealt once training is under way (the chief logged 45 steps):
- MultiWorkerMirrored, 2 workers: worker 1 killed (SIGKILL): seconds from the kill to tfxd's exit; then
  the same command again resumes, and the steps both attempts trained are the steps redone;
- the same, worker 1 frozen (SIGSTOP) under `training.peer_timeout: 5`: seconds to the exit, against the
  bound tfxd set (TensorFlow's coordination service heartbeat timeout);
- ParameterServer, a chief, 2 workers and a ps: worker 1 killed; tfxd starts it again and the training
  finishes: its wall time against the same training without the fault.
Every process runs on this machine's loopback (the hosts-of-their-own harness is not built yet).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import common
import numpy as np
import psutil

NAME = "faults"
STEPS, EVERY, TIMEOUT = 300, 10, 5
SPEC = f"""\
tfxd: 1
name: faults
data: {{format: csv, path: data.csv}}
features:
  - {{name: x, transform: zscore}}
label: {{name: y, column: target, task: binary}}
model: {{type: dnn, hidden_units: [4]}}
training:
  batch_size: 8
  steps: {STEPS}
  eval_steps: 1
  steps_per_execution: 1
  callbacks: {{tensorboard: false, backup_every_steps: {EVERY}, custom: ["step_log:StepLog"]}}
targets:
  local:
    trainer: {{workers: 2}}
"""
# the chief's steps, one line each (epoch, step), in a file beside the spec; a short sleep a step, so that a
# fault lands mid-training. Under ParameterServer Keras runs no step hooks: the epochs are logged instead.
STEP_LOG = """\
import json
import os
import time
from pathlib import Path

import tensorflow as tf

TASK = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
CHIEF = TASK.get("type") == "chief" or TASK.get("index", 0) == 0


class EpochLog(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1

    def on_epoch_end(self, epoch, logs=None):
        if CHIEF:
            with open(Path(__file__).parent / "epochs.txt", "a") as out:
                out.write(f"{epoch + 1}\\n")


class StepLog(EpochLog):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.02)
        if CHIEF:
            with open(Path(__file__).parent / "steps.txt", "a") as out:
                out.write(f"{self.epoch} {int(batch) + 1}\\n")
"""
RUN = ("run", "spec.yaml", "--to", "Trainer", "--set", "beam.workers=1")
PS = ("--set", "targets.local.trainer.parameter_servers=1", "--set", "training.strategy=parameter_server",
      "--set", 'training.callbacks.custom=["step_log:EpochLog"]')  # Keras refuses step hooks there


def _project(name: str, *extra: str) -> str:
    folder = common.scratch(f"{NAME}/{name}")
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    rows = "\n".join(f"{value:.4f},{int(value + rng.normal(scale=0.5) > 0)}" for value in x)
    with open(os.path.join(folder, "data.csv"), "w") as handle:
        handle.write("x,target\n" + rows + "\n")
    for file, text in (("spec.yaml", SPEC), ("step_log.py", STEP_LOG)):
        with open(os.path.join(folder, file), "w") as handle:
            handle.write(text)
    subprocess.run([common.TFXD, "run", "spec.yaml", "--to", "Transform", "--set", "beam.workers=1", *extra],
                   cwd=folder, check=True, capture_output=True)
    return folder


def _lines(folder: str, name: str) -> list[str]:
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return handle.read().split()


def _task(parent: psutil.Process, kind: str, index: int) -> psutil.Process | None:
    for child in parent.children(recursive=True):
        try:
            task = json.loads(child.environ().get("TF_CONFIG") or "{}").get("task")
        except psutil.NoSuchProcess:
            continue
        if task == {"type": kind, "index": index} and "local_worker" in " ".join(child.cmdline()):
            return child
    return None


def _run(folder: str, *extra: str, fault: signal.Signals | None = None) -> dict:
    """`tfxd run --to Trainer`; with a ``fault``, worker 1 gets it once the chief logged 45 steps (or an
    epoch, under ParameterServer). Wall seconds, exit code, seconds from the fault to the exit (None: no
    fault dealt, the training ended first)."""
    for name in ("steps.txt", "epochs.txt"):
        if os.path.exists(os.path.join(folder, name)):
            os.rename(os.path.join(folder, name), os.path.join(folder, f"{name}.{time.time_ns()}"))
    start = time.monotonic()
    process = subprocess.Popen([common.TFXD, *RUN, *extra], cwd=folder, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    dealt = None
    while fault is not None and dealt is None and process.poll() is None:
        if len(_lines(folder, "steps.txt")) >= 45 or _lines(folder, "epochs.txt"):
            victim = _task(psutil.Process(process.pid), "worker", 1)
            if victim is not None:
                victim.send_signal(fault)
                dealt = time.monotonic()
        time.sleep(0.05)
    code = process.wait(timeout=900)
    end = time.monotonic()
    return {"wall_s": end - start, "code": code, "detection_s": end - dealt if dealt else None}


def _redone(folder: str) -> int:
    """Steps both attempts trained: the first's log (renamed by the second run) against the second's."""
    first = [name for name in sorted(os.listdir(folder)) if name.startswith("steps.txt.")][-1]
    done = set(zip(*[iter(_lines(folder, first))] * 2, strict=True))
    again = set(zip(*[iter(_lines(folder, "steps.txt"))] * 2, strict=True))
    return len(done & again)


def run(quick: bool = False) -> dict:
    # a project each: a training that completed is cached, and would not run again
    killed = _run(mwms := _project("mwms-killed"), fault=signal.SIGKILL)
    resumed = _run(mwms)
    redone = _redone(mwms)
    clean = _run(_project("mwms-clean"))
    timeout = ("--set", f"training.peer_timeout={TIMEOUT}")
    frozen = _run(_project("mwms-frozen", *timeout), *timeout, fault=signal.SIGSTOP)
    ps_killed = _run(ps := _project("ps-killed", *PS), *PS, fault=signal.SIGKILL)
    ps_epochs = _lines(ps, "epochs.txt")
    ps_clean = _run(_project("ps-clean", *PS), *PS)
    overhead = (killed["wall_s"] + resumed["wall_s"]) / clean["wall_s"]
    ps_overhead = ps_killed["wall_s"] / ps_clean["wall_s"]
    return {
        "name": NAME, "mwms_clean": clean, "mwms_killed": killed, "mwms_resumed": resumed, "steps_redone": redone,
        "mwms_frozen": frozen, "ps_clean": ps_clean, "ps_killed": ps_killed, "ps_epochs": len(ps_epochs),
        "overhead": overhead, "ps_overhead": ps_overhead,
        "targets": [
            common.target("Killed MultiWorkerMirrored worker", f"fails within 5 s, the rerun redoes <= {EVERY} steps",
                          killed["code"] == 1 and (killed["detection_s"] or 99) <= 5 and resumed["code"] == 0
                          and redone <= EVERY),
            common.target("Frozen MultiWorkerMirrored worker", f"fails within peer_timeout ({TIMEOUT} s) + 10 s",
                          frozen["code"] == 1 and (frozen["detection_s"] or 99) <= TIMEOUT + 10),
            common.target("Killed ParameterServer worker", "finishes, every epoch once, <= 1.5x the clean wall",
                          ps_killed["code"] == 0 and ps_killed["detection_s"] is not None
                          and ps_epochs == [str(e) for e in range(1, 11)] and ps_overhead <= 1.5)]}


def table_rows(result: dict) -> list[str]:
    killed, frozen, ps_killed = result["mwms_killed"], result["mwms_frozen"], result["ps_killed"]
    clean, ps_clean = result["mwms_clean"], result["ps_clean"]
    return [
        f"| Faults: a MultiWorkerMirrored worker killed mid-training ({STEPS} steps, a backup every {EVERY}): "
        f"failure seen, the rerun's steps redone; wall of both attempts vs one clean training | "
        f"failed {_seconds(killed['detection_s'])} after the kill; {result['steps_redone']} steps redone; "
        f"{killed['wall_s'] + result['mwms_resumed']['wall_s']:.1f} s | {clean['wall_s']:.1f} s | "
        f"{result['overhead']:.2f} | {common.judged(result['targets'][0])} |",
        f"| Faults: a MultiWorkerMirrored worker frozen (SIGSTOP), peer_timeout {TIMEOUT} s: seconds to the "
        f"Trainer's failure vs the bound set | {_seconds(frozen['detection_s'])} | {TIMEOUT} s | "
        f"{(frozen['detection_s'] or 0) / TIMEOUT:.2f} | {common.judged(result['targets'][1])} |",
        f"| Faults: a ParameterServer worker killed mid-training, restarted by tfxd: wall vs the same training "
        f"without it | {ps_killed['wall_s']:.1f} s; {result['ps_epochs']} epochs, none twice | "
        f"{ps_clean['wall_s']:.1f} s | {result['ps_overhead']:.2f} | {common.judged(result['targets'][2])} |"]


def _seconds(value: float | None) -> str:
    return "no fault dealt (the training ended first)" if value is None else f"{value:.1f} s"
