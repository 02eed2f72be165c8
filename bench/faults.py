"""Faults of a local Trainer cluster (issue 63): how fast a lost peer ends the job, how many steps a killed
training redoes, and what a fault costs in wall time against the same training without it.

A small project (300 rows, 300 steps of 10 epochs, one step a call, a backup every 10 steps) trains on
`targets.local.trainer` with `network: hosts`: each replica on a host of its own (a network namespace on
a bridge, port 2222, components/trainer/replica_hosts.py). Each fault is dealt once training is under way
(the chief logged 45 steps):
- MultiWorkerMirrored, 2 workers: worker 1 killed (SIGKILL): seconds from the kill to tfxd's exit; then
  the same command again resumes, and the steps both attempts trained are the steps redone; the same for
  the chief (worker 0) killed;
- the same, worker 1 frozen (SIGSTOP), and worker 1's host cut off (its link set down), under
  `training.peer_timeout: 5`: seconds to the exit, against the bound tfxd set (TensorFlow's coordination
  service heartbeat timeout);
- the same, worker 1's link turned slow and lossy for the last 30 steps (a token bucket of 10 Mbit/s, 50 ms
  more and 1% of its packets dropped, each way; a step takes seconds over it): the training finishes; its
  wall against the same training without it. This machine's kernel has no netem (CONFIG_NET_SCH_NETEM is
  off): the delay and the loss are link_delay.py's, netfilter's queue read in the replica's namespace;
- ParameterServer, a chief, 2 workers and a ps: worker 1 killed; tfxd starts it again and the training
  finishes: its wall time against the same training without the fault.
And the planner's rule where communication costs something: examples/s of 1 (the planner's choice on one
machine: no cluster, the default strategy), 2 and 4 MultiWorkerMirrored replicas, each on a host whose
link is a 10 Mbit/s token bucket, from the chief's step times after its first 50 steps.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import common
import numpy as np
import psutil

NAME = "faults"
STEPS, EVERY, TIMEOUT, LOSS, DELAY, SLOW_STEPS, BATCH, LINK_STEPS = 300, 10, 5, 0.01, 0.05, 30, 8, 1000
TOKEN_BUCKET = ["tbf", "rate", "10mbit", "burst", "32kbit", "latency", "100ms"]
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
    trainer: {{workers: 2, network: hosts}}
"""
# the chief's steps, one line each (epoch, step), in a file beside the spec; a short sleep a step, so that a
# fault lands mid-training. Under ParameterServer Keras runs no step hooks: the epochs are logged instead.
STEP_LOG = """\
import glob
import json
import os
import time
from collections.abc import Callable
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


class Rate(tf.keras.callbacks.Callback):  # the chief's steps/s after its first 50, written at the end

    def on_train_begin(self, logs=None):
        self.steps, self.start = 0, None

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == 50:
            self.start = time.monotonic()

    def on_train_end(self, logs=None):
        if CHIEF and self.start is not None:
            with open(Path(__file__).parent / "rate.txt", "w") as out:
                out.write(f"{(self.steps - 50) / (time.monotonic() - self.start)}\\n")
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


def _bridge(pid: int) -> str | None:
    """The bridge of the cluster tfxd ``pid`` made (replica_hosts: /run/tfxd-hosts/tfxdbK.pid holds its
    owner's pid); its replicas' links are tfxdbKhI and namespaces tfxdbK-NAME, I the replica's place."""
    for owner in glob.glob("/run/tfxd-hosts/tfxdb*.pid"):
        with open(owner) as handle:
            if handle.read().strip() == str(pid):
                return os.path.basename(owner)[:-4]
    return None


def _signal(signum: signal.Signals, kind: str = "worker", index: int = 1) -> Callable[[int], bool]:
    def deal(pid: int) -> bool:
        victim = _task(psutil.Process(pid), kind, index)
        if victim is not None:
            victim.send_signal(signum)
        return victim is not None
    return deal


def _cut(pid: int) -> bool:
    """Worker 1's link set down: its host cut off from the others."""
    bridge = _bridge(pid)
    if bridge is not None:
        subprocess.run(["ip", "link", "set", f"{bridge}h1", "down"], check=True)
    return bridge is not None


# link_delay.py processes started by _slow, stopped by _run once its training ended: each with its counts file
_DELAYERS: list[tuple[subprocess.Popen, str]] = []


def _slow(pid: int, links: list[int], loss: float = 0.0, delay: float = 0.0) -> bool:
    """Replicas' links (by place) as a 10 Mbit/s token bucket each way; with ``delay`` or ``loss``, each
    packet held ``delay`` seconds and ``loss`` of them dropped, each way (link_delay.py in the namespace)."""
    bridge = _bridge(pid)
    # the hosts files are written once every host is made
    if bridge is None or not all(os.path.exists(f"/etc/netns/{bridge}-worker-{place}/hosts") for place in links):
        return False
    for place in links:  # worker I is the I-th replica of a MultiWorkerMirrored cluster
        inside = ["ip", "netns", "exec", f"{bridge}-worker-{place}"]
        for command in (["tc", "qdisc", "add", "dev", f"{bridge}h{place}", "root", *TOKEN_BUCKET],
                        [*inside, "tc", "qdisc", "add", "dev", "eth0", "root", *TOKEN_BUCKET]):
            subprocess.run(command, check=True)
        if delay or loss:
            counts = f"{tempfile.mkdtemp(prefix='tfxd-link-')}/counts.json"
            delayer = subprocess.Popen([*inside, sys.executable, os.path.join(os.path.dirname(__file__), "link_delay.py"),
                                        "--device", "eth0", "--delay", str(delay), "--loss", str(loss),
                                        "--stats", counts], stdout=subprocess.PIPE, text=True)
            _DELAYERS.append((delayer, counts))
            if delayer.stdout.readline().strip() != "link delay ready":
                raise RuntimeError(f"link_delay.py did not start in {inside[-1]}")
    return True


def _delayers_stopped() -> list[dict]:
    """Stops the link delays _slow started; their counts (packets accepted, dropped, the least held)."""
    counts = []
    while _DELAYERS:
        delayer, path = _DELAYERS.pop()
        delayer.terminate()
        delayer.wait(timeout=30)
        with open(path, encoding="utf-8") as read:
            counts.append(json.load(read))
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return counts


def _run(folder: str, *extra: str, fault: Callable[[int], bool] | None = None, at_steps: int = 45) -> dict:
    """`tfxd run --to Trainer`; with a ``fault``, dealt (``fault(tfxd's pid)``) once the chief logged
    ``at_steps`` steps (or an epoch, under ParameterServer). Wall seconds, exit code, seconds from the fault
    to the exit (None: no fault dealt, the training ended first)."""
    for name in ("steps.txt", "epochs.txt", "rate.txt"):
        if os.path.exists(os.path.join(folder, name)):
            os.rename(os.path.join(folder, name), os.path.join(folder, f"{name}.{time.time_ns()}"))
    start = time.monotonic()
    process = subprocess.Popen([common.TFXD, *RUN, *extra], cwd=folder, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    dealt = None
    while fault is not None and dealt is None and process.poll() is None:
        steps = _lines(folder, "steps.txt")  # none under ParameterServer: Keras runs no step hooks there
        under_way = len(steps) >= at_steps * 2 if steps else _lines(folder, "epochs.txt")
        if under_way and fault(process.pid):
            dealt = time.monotonic()
        time.sleep(0.05)
    code = process.wait(timeout=900)
    end = time.monotonic()
    rate = _lines(folder, "rate.txt")
    return {"wall_s": end - start, "code": code, "detection_s": end - dealt if dealt else None,
            "steps_per_s": float(rate[0]) if rate else None, "link_delay": _delayers_stopped()}


def _redone(folder: str) -> int:
    """Steps both attempts trained: the first's log (renamed by the second run) against the second's."""
    first = [name for name in sorted(os.listdir(folder)) if name.startswith("steps.txt.")][-1]
    done = set(zip(*[iter(_lines(folder, first))] * 2, strict=True))
    again = set(zip(*[iter(_lines(folder, "steps.txt"))] * 2, strict=True))
    return len(done & again)


def _killed_and_resumed(name: str, fault: Callable[[int], bool]) -> dict:
    killed = _run(folder := _project(name), fault=fault)
    resumed = _run(folder)
    return {"killed": killed, "resumed": resumed, "redone": _redone(folder)}


def _link_scaling() -> dict[int, dict]:
    """Examples/s of 1, 2 and 4 replicas, each link a 10 Mbit/s token bucket from the first step."""
    rates = {}
    for workers in (1, 2, 4):
        extra = ("--set", f"targets.local.trainer.workers={workers}", "--set", f"training.steps={LINK_STEPS}",
                 "--set", 'training.callbacks.custom=["step_log:Rate"]')
        fault = None if workers == 1 else (lambda pid, n=workers: _slow(pid, list(range(n))))
        result = _run(_project(f"link-{workers}", *extra), *extra, fault=fault, at_steps=0)
        result["examples_per_s"] = (result["steps_per_s"] or 0) * BATCH * workers  # batch_size is per replica
        rates[workers] = result
    return rates


def run(quick: bool = False) -> dict:
    # a project each: a training that completed is cached, and would not run again
    worker = _killed_and_resumed("mwms-killed", _signal(signal.SIGKILL))
    chief = _killed_and_resumed("mwms-chief-killed", _signal(signal.SIGKILL, index=0))
    clean = _run(_project("mwms-clean"))
    timeout = ("--set", f"training.peer_timeout={TIMEOUT}")
    frozen = _run(_project("mwms-frozen", *timeout), *timeout, fault=_signal(signal.SIGSTOP))
    cut = _run(_project("mwms-cut", *timeout), *timeout, fault=_cut)
    lossy = _run(_project("mwms-lossy"), fault=lambda pid: _slow(pid, [1], LOSS, DELAY), at_steps=STEPS - SLOW_STEPS)
    ps_killed = _run(ps := _project("ps-killed", *PS), *PS, fault=_signal(signal.SIGKILL))
    ps_epochs = _lines(ps, "epochs.txt")
    ps_clean = _run(_project("ps-clean", *PS), *PS)
    link = _link_scaling()
    both = {k: (v["killed"]["wall_s"] + v["resumed"]["wall_s"]) / clean["wall_s"] for k, v in
            (("worker", worker), ("chief", chief))}
    return {
        "name": NAME, "mwms_clean": clean, "worker": worker, "chief": chief, "mwms_frozen": frozen, "mwms_cut": cut,
        "mwms_lossy": lossy, "ps_clean": ps_clean, "ps_killed": ps_killed, "ps_epochs": len(ps_epochs),
        "overhead": both, "lossy_overhead": lossy["wall_s"] / clean["wall_s"],
        "ps_overhead": ps_killed["wall_s"] / ps_clean["wall_s"], "link": link,
        "targets": [
            *[common.target(f"Killed MultiWorkerMirrored {who}", f"fails within 5 s, the rerun redoes <= {EVERY} steps",
                            r["killed"]["code"] == 1 and (r["killed"]["detection_s"] or 99) <= 5
                            and r["resumed"]["code"] == 0 and r["redone"] <= EVERY)
              for who, r in (("worker", worker), ("chief", chief))],
            *[common.target(f"{what} MultiWorkerMirrored worker", f"fails within peer_timeout ({TIMEOUT} s) + 10 s",
                            r["code"] == 1 and (r["detection_s"] or 99) <= TIMEOUT + 10)
              for what, r in (("Frozen", frozen), ("Cut-off", cut))],
            common.target("Slow, lossy link", "finishes, no peer timeout tripped",
                          lossy["code"] == 0 and lossy["detection_s"] is not None
                          and all(c["dropped"] and c["least_hold_s"] >= DELAY for c in lossy["link_delay"])),
            common.target("Killed ParameterServer worker", "finishes, every epoch once, <= 1.5x the clean wall",
                          ps_killed["code"] == 0 and ps_killed["detection_s"] is not None
                          and ps_epochs == [str(e) for e in range(1, 11)] and ps_killed["wall_s"] <= 1.5 * ps_clean["wall_s"]),
            common.target("Replicas over a limited link", "the planner's one-machine choice (1) trains the most "
                          "examples/s", link[1]["examples_per_s"] >= max(r["examples_per_s"] for r in link.values()))]}


def table_rows(result: dict) -> list[str]:
    clean, targets = result["mwms_clean"], result["targets"]
    rows = [
        f"| Faults: a MultiWorkerMirrored {who} killed mid-training ({STEPS} steps, a backup every {EVERY}, "
        f"hosts of their own): failure seen, the rerun's steps redone; wall of both attempts vs one clean training "
        f"| failed {_seconds(r['killed']['detection_s'])} after the kill; {r['redone']} steps redone; "
        f"{r['killed']['wall_s'] + r['resumed']['wall_s']:.1f} s | {clean['wall_s']:.1f} s | "
        f"{result['overhead'][key]:.2f} | {common.judged(target)} |"
        for who, key, r, target in (("worker (1)", "worker", result["worker"], targets[0]),
                                    ("chief (worker 0)", "chief", result["chief"], targets[1]))]
    rows += [
        f"| Faults: a MultiWorkerMirrored worker {what}, peer_timeout {TIMEOUT} s: seconds to the Trainer's "
        f"failure vs the bound set | {_seconds(r['detection_s'])} | {TIMEOUT} s | "
        f"{(r['detection_s'] or 0) / TIMEOUT:.2f} | {common.judged(target)} |"
        for what, r, target in (("frozen (SIGSTOP)", result["mwms_frozen"], targets[2]),
                                ("cut off (its host's link down)", result["mwms_cut"], targets[3]))]
    lossy, ps_killed, ps_clean, link = result["mwms_lossy"], result["ps_killed"], result["ps_clean"], result["link"]
    rows += [
        f"| Faults: a MultiWorkerMirrored worker's link turned slow and lossy for the last {SLOW_STEPS} steps "
        f"(10 Mbit/s, {DELAY * 1000:.0f} ms and {LOSS:.0%} loss each way, bench/link_delay.py: no netem here): "
        "wall vs the same training without it | "
        f"{_outcome(lossy)} | {clean['wall_s']:.1f} s | {result['lossy_overhead']:.2f} | {common.judged(targets[4])} |",
        f"| Faults: a ParameterServer worker killed mid-training, restarted by tfxd: wall vs the same training "
        f"without it | {ps_killed['wall_s']:.1f} s; {result['ps_epochs']} epochs, none twice | "
        f"{ps_clean['wall_s']:.1f} s | {result['ps_overhead']:.2f} | {common.judged(targets[5])} |",
        f"| Faults: examples/s of 2 and 4 MultiWorkerMirrored replicas on hosts with 10 Mbit/s links vs 1 (the "
        f"planner's choice on one machine) | {link[2]['examples_per_s']:.0f} (2), {link[4]['examples_per_s']:.0f} "
        f"(4) | {link[1]['examples_per_s']:.0f} | {link[2]['examples_per_s'] / (link[1]['examples_per_s'] or 1):.2f}, "
        f"{link[4]['examples_per_s'] / (link[1]['examples_per_s'] or 1):.2f} | {common.judged(targets[6])} |"]
    return rows


def _outcome(result: dict) -> str:
    ended = "finished" if result["code"] == 0 else f"failed (exit {result['code']})"
    return f"{ended} in {result['wall_s']:.1f} s"


def _seconds(value: float | None) -> str:
    return "no fault dealt (the training ended first)" if value is None else f"{value:.1f} s"
