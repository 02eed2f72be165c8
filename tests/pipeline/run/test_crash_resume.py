"""Crashes and restarts of `tfxd run` (issue 8): SIGKILL during Transform and during the Trainer, then
the same command again (the components that had finished come from the cache, nothing half-written is
ever LIVE in ML Metadata, the model is blessed and pushed); a killed main process leaves no Trainer
worker behind; Ctrl-C (exit 130, a line on how to resume, no traceback, no process left), with either
orchestrator; two runs of one root at once (the second is refused by the run lock)."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import BASE_SPEC, own_temp_dir, write_spec
from tests.pipeline.run.test_run_taxi import COMPONENTS, tfxd

TFXD = os.path.join(os.path.dirname(sys.executable), "tfxd")
# 3000 steps of 32 over ~140 training rows: 10 epochs of about a second, time enough to stop the Trainer
SPEC = (BASE_SPEC.replace("steps: 10", "steps: 3000") + "beam: {workers: 1}\n"
        "evaluation: {thresholds: {binary_accuracy: {min: 0.5}}}\n")
BEFORE_TRANSFORM = COMPONENTS[:COMPONENTS.index("Transform")]
BEFORE_TRAINER = COMPONENTS[:COMPONENTS.index("Trainer")]


@pytest.fixture
def crash_project(project: Path) -> Iterator[Path]:
    rows = "".join(f"{(i % 7) + 0.5},{'abc'[i % 3]},{int(i % 7 > 3)}\n" for i in range(200))
    (project / "data.csv").write_text("x,city,target\n" + rows)
    write_spec(project, SPEC)
    yield project
    for running in Running.started:  # whatever a failed test left running
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.process.pid, signal.SIGKILL)
    Running.started.clear()


class Running:
    """`tfxd run spec.yaml` started in a session of its own, as a shell starts a job; its console is
    read line by line as it comes."""

    started: list[Running] = []

    def __init__(self, folder: Path, *args: str, own_temp: bool = False) -> None:
        """``own_temp``: a temporary folder of its own (conftest.own_temp_dir), for a run the test SIGKILLs;
        one stopped by SIGTERM or SIGINT leaves nothing, as the session checks."""
        self.stderr_path = folder / f"stderr-{time.monotonic_ns()}.txt"
        env = dict(os.environ)
        self.temp = own_temp_dir(folder) if own_temp else None
        if self.temp:
            env["TMPDIR"] = self.temp
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen([TFXD, "run", "spec.yaml", *args], cwd=folder, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True, start_new_session=True, env=env)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        Running.started.append(self)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 240) -> None:
        """Until a console line contains ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.process.kill()
                pytest.fail(f"no line with {text!r}:\n{''.join(self.lines)}{self.stderr_path.read_text()}")
            if text in line:
                return

    def wait_for_transform_work(self, folder: Path, timeout: float = 240) -> None:
        """Until Transform's executor is at work (tf.Transform's temporary folder in its output): a point
        inside the component however fast the machine (Transform takes about 2 s here), to stop it at."""
        pattern = str(folder / "tfxd-runs" / "demo" / "pipeline" / "Transform" / "transform_graph" / "*" / ".temp_path")
        self.wait_for("> Transform ...", timeout)
        deadline = time.monotonic() + timeout
        while not glob.glob(pattern):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.process.kill()
                pytest.fail(f"Transform never started its work:\n{''.join(self.lines)}{self.stderr_path.read_text()}")
            time.sleep(0.02)

    def finish(self, timeout: float = 300) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once the process has ended."""
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code, "".join(self.lines), self.stderr_path.read_text()

    def group_gone(self, timeout: float = 20) -> bool:
        """Whether every process of the run's session has ended (none left behind, e.g. a worker)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.5)
        return False


def _runs(folder: Path) -> list[dict]:
    """Each run's summary.json, oldest first (a run killed by SIGKILL leaves none)."""
    paths = sorted(glob.glob(str(folder / "tfxd-runs" / "demo" / "runs" / "*" / "summary.json")))
    return [json.loads(Path(path).read_text()) for path in paths]


def _statuses(summary: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in summary["components"]}


def _executions(folder: Path) -> dict[str, list[str]]:
    """Each component's executions' states, oldest first, from the run's ML Metadata (opened read-only),
    after checking that every LIVE artifact was output by a COMPLETE execution and by no unfinished one,
    and that its files are there, and that what canceled executions began is abandoned and removed."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd

    from tfxd.pipeline.run.metadata import open_store

    store = open_store(str(folder / "tfxd-runs" / "demo"), readonly=True)
    executions = {e.id: e for e in store.get_executions()}
    kinds = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    writers: dict[int, set[int]] = defaultdict(set)
    for event in store.get_events_by_execution_ids(list(executions)):
        if event.type in (mlmd.Event.OUTPUT, mlmd.Event.DECLARED_OUTPUT, mlmd.Event.PENDING_OUTPUT):
            writers[event.artifact_id].add(event.execution_id)
    for artifact in store.get_artifacts():
        states = {mlmd.Execution.State.Name(executions[i].last_known_state) for i in writers[artifact.id]}
        if states == {"CANCELED"}:  # begun by a run that died: abandoned, and its folder removed
            assert artifact.state == mlmd.Artifact.ABANDONED and not os.path.exists(artifact.uri), artifact
        if artifact.state != mlmd.Artifact.LIVE:
            continue
        assert "COMPLETE" in states and states <= {"COMPLETE", "CACHED"}, (artifact.uri, states)
        assert os.path.exists(artifact.uri), artifact.uri
    found: dict[str, list[str]] = defaultdict(list)
    for execution in sorted(executions.values(), key=lambda e: e.id):
        found[kinds[execution.type_id]].append(mlmd.Execution.State.Name(execution.last_known_state))
    return found


def _check_resumed(folder: Path, result: subprocess.CompletedProcess, reused: list[str]) -> dict:
    """The rerun completed: ``reused`` from the cache, the rest ran, blessed and pushed."""
    assert result.returncode == 0, result.stdout + result.stderr
    summary = _runs(folder)[-1]
    assert _statuses(summary) == {name: "cached" if name in reused else "ran" for name in COMPONENTS}
    for name in reused:
        assert f"│ {name:<16} │ cached │" in result.stdout  # the console's table says so too
    assert summary["blessed"] is True and summary["status"] == "ok"
    assert os.path.isfile(os.path.join(summary["pushed_to"], "saved_model.pb"))
    assert summary["metrics"]["binary_accuracy"] >= 0.5
    return summary


@pytest.mark.reliability("crash point")
def test_sigkill_of_the_main_process_during_transform_then_the_same_command_resumes(crash_project):
    first = Running(crash_project, own_temp=True)
    first.wait_for_transform_work(crash_project)
    os.kill(first.process.pid, signal.SIGKILL)  # the main process alone, as the OOM killer does
    code, out, _ = first.finish()
    assert code == -signal.SIGKILL and "ok Transform" not in out
    assert first.group_gone(), "a process of the killed run is still running"
    killed = _executions(crash_project)
    assert killed["Transform"] == ["RUNNING"]  # never marked complete; none of its outputs is LIVE
    assert "Trainer" not in killed

    result = tfxd("run", "spec.yaml", cwd=crash_project)  # the lock died with the process
    _check_resumed(crash_project, result, reused=BEFORE_TRANSFORM)
    assert "an earlier run of this root ended during Transform without finishing it" in result.stdout
    after = _executions(crash_project)
    assert after["Transform"] == ["CANCELED", "COMPLETE"]  # the killed one, recorded as such by the rerun
    assert after["ExampleGen"] == ["COMPLETE", "CACHED"]


@pytest.mark.reliability("crash point")
def test_sigkill_of_the_whole_run_during_the_trainer_then_the_same_command_resumes(crash_project):
    first = Running(crash_project, own_temp=True)
    first.wait_for("Trainer epoch 3/")
    os.killpg(first.process.pid, signal.SIGKILL)  # `kill -9` of the job: every process of it
    code, out, _ = first.finish()
    assert code == -signal.SIGKILL and "ok Trainer" not in out
    assert first.group_gone()
    assert _executions(crash_project)["Trainer"] == ["RUNNING"]

    result = tfxd("run", "spec.yaml", cwd=crash_project)
    _check_resumed(crash_project, result, reused=BEFORE_TRAINER)
    assert "an earlier run of this root ended during Trainer without finishing it" in result.stdout
    assert "Trainer epoch 1/" not in result.stdout  # it went on from its last backed-up epoch
    after = _executions(crash_project)
    assert after["Trainer"] == ["CANCELED", "COMPLETE"] and after["Pusher"] == ["COMPLETE"]
    # `tfxd history` reads the killed run, which left no summary, from ML Metadata
    resumed, killed = json.loads(tfxd("history", "spec.yaml", "--json", cwd=crash_project).stdout)
    assert resumed["status"] == "ok" and killed["status"] == "interrupted"
    stopped, finished = killed["reason"].removesuffix(" had finished (ML Metadata)").split("; ")
    assert stopped == "killed outright while Trainer ran" and set(finished.split(", ")) >= set(BEFORE_TRAINER)
    assert killed["examples"] == resumed["examples"] and sum(killed["examples"].values()) > 0
    assert killed["seconds"] > 0 and killed["metrics"] == {}


def _pids_of(group: int) -> list[int]:
    """The processes in process group ``group``."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            if int(Path(stat).read_text().rsplit(")", 1)[1].split()[2]) == group:
                found.append(int(Path(stat).parent.name))
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return found


def _local_workers(group: int) -> list[psutil.Process]:
    """The local cluster's training processes in process group ``group``."""
    found = []
    for pid in _pids_of(group):
        with contextlib.suppress(psutil.Error):  # ended meanwhile
            process = psutil.Process(pid)
            if "tfxd.components.trainer.local_worker" in process.cmdline():
                found.append(process)
    return found


def _processes_of(group: int) -> list[str]:
    """The command lines of the processes in process group ``group``."""
    found = []
    for pid in _pids_of(group):
        with contextlib.suppress(OSError):  # ended meanwhile
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


def test_sigkill_of_the_main_process_leaves_no_trainer_worker_behind(crash_project):
    write_spec(crash_project, SPEC + "targets:\n  local: {trainer: {workers: 2}}\n")
    first = Running(crash_project, own_temp=True)
    first.wait_for("> Trainer ...")
    deadline = time.monotonic() + 120
    while sum("local_worker" in cmd for cmd in _processes_of(first.process.pid)) < 2:
        assert time.monotonic() < deadline, _processes_of(first.process.pid)
        time.sleep(0.5)
    time.sleep(3)  # the workers are importing TensorFlow or training
    os.kill(first.process.pid, signal.SIGKILL)
    assert first.finish()[0] == -signal.SIGKILL
    assert first.group_gone(timeout=30), _processes_of(first.process.pid)
    assert _executions(crash_project)["Trainer"] == ["RUNNING"]


@pytest.mark.reliability("crash point")
def test_ctrl_c_stops_cleanly_with_exit_130_and_says_how_to_resume(crash_project):
    first = Running(crash_project)
    first.wait_for("Trainer epoch 2/")
    os.killpg(first.process.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole job
    code, out, err = first.finish()
    assert code == 130, out + err
    assert "interrupted by SIGINT during Trainer" in err and "run the same command again to resume" in err
    assert "Traceback" not in out + err
    assert first.group_gone()
    (summary,) = _runs(crash_project)
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGINT"
    assert _statuses(summary) == {**dict.fromkeys(BEFORE_TRAINER, "ran"), "Trainer": "interrupted",
                                  "Evaluator": "not run", "Pusher": "not run"}
    assert _executions(crash_project)["Trainer"] == ["CANCELED"]

    result = tfxd("run", "spec.yaml", cwd=crash_project)
    _check_resumed(crash_project, result, reused=BEFORE_TRAINER)
    assert "ended during" not in result.stdout  # the interrupted run settled its own books


@pytest.mark.reliability("crash point")
def test_sigterm_during_transform_then_during_training_each_a_stop_with_exit_143_and_the_rerun_resumes(crash_project):
    first = Running(crash_project)
    first.wait_for_transform_work(crash_project)
    os.kill(first.process.pid, signal.SIGTERM)  # the main process alone: Kubernetes evicting the pod, `timeout`
    code, out, err = first.finish()
    assert code == 143, out + err
    assert "interrupted by SIGTERM during Transform" in err and "Traceback" not in out + err
    assert first.group_gone()
    (summary,) = _runs(crash_project)
    assert (summary["status"], summary["signal"], _statuses(summary)["Transform"]) == (
        "interrupted", "SIGTERM", "interrupted")
    assert _executions(crash_project)["Transform"] == ["CANCELED"]  # its outputs abandoned and removed

    second = Running(crash_project)  # Transform again, then stopped in the Trainer
    second.wait_for("Trainer epoch 2/")
    os.kill(second.process.pid, signal.SIGTERM)
    code, out, err = second.finish()
    assert code == 143, out + err
    assert "ended during" not in out  # the stopped run settled its own books
    stopped = re.search(r"Trainer stopped by SIGTERM after step (\d+) of epoch (\d+); its state is backed up", out)
    assert stopped, out
    epoch = int(stopped.group(2))
    assert "interrupted by SIGTERM during Trainer" in err and "the Trainer from its last backed-up step" in err
    executions = _executions(crash_project)
    assert executions["Transform"] == ["CANCELED", "COMPLETE"] and executions["Trainer"] == ["CANCELED"]

    result = tfxd("run", "spec.yaml", cwd=crash_project)
    _check_resumed(crash_project, result, reused=BEFORE_TRAINER)
    assert f"Trainer resumes at epoch {epoch}/10" in result.stdout  # the stopped epoch, from its next step
    assert _runs(crash_project)[-1]["training"]["epochs"] == 10 - epoch + 1


@pytest.mark.reliability("crash point")
def test_a_pipeline_reading_spans_resumes_after_sigterm_in_the_trainer_from_the_cache(crash_project):
    """With spans in data.path the cache key holds the spans and their files (not the run's start time):
    the rerun reuses everything before the Trainer, which goes on from its stopped epoch, and no backup
    folder outlives the training."""
    day = crash_project / "data" / "2026-11-20"
    day.mkdir(parents=True)
    (crash_project / "data.csv").rename(day / "trips.csv")
    write_spec(crash_project, SPEC.replace("path: data.csv", "path: data/{YYYY}-{MM}-{DD}/*.csv"))
    first = Running(crash_project)
    first.wait_for("Trainer epoch 2/")
    os.kill(first.process.pid, signal.SIGTERM)
    code, out, err = first.finish()
    assert code == 143, out + err
    stopped = re.search(r"Trainer stopped by SIGTERM after step (\d+) of epoch (\d+); its state is backed up", out)
    assert stopped, out
    backups = crash_project / "tfxd-runs" / "demo" / "pipeline" / "Trainer" / ".backup"
    assert len(list(backups.iterdir())) == 1

    result = tfxd("run", "spec.yaml", cwd=crash_project)
    summary = _check_resumed(crash_project, result, reused=BEFORE_TRAINER)
    assert summary["examples"]["spans"] == ["2026-11-20"]
    assert f"Trainer resumes at epoch {stopped.group(2)}/10" in result.stdout
    assert not backups.exists()  # the completed training removed its own backup, and any stale one


@pytest.mark.reliability("crash point")
def test_sigterm_during_a_local_cluster_training_stops_every_worker_and_the_rerun_resumes(crash_project):
    # 600 steps: each of a cluster's steps is a collective between two processes, many times a step in one;
    # 10 epochs of 60 still leave nine to stop in once the first is backed up
    write_spec(crash_project, SPEC.replace("steps: 3000", "steps: 600") + "targets:\n  local: {trainer: {workers: 2}}\n")
    first = Running(crash_project)
    first.wait_for("> Trainer ...")
    backup = crash_project / "tfxd-runs" / "demo" / "pipeline" / "Trainer" / ".backup"
    deadline = time.monotonic() + 180
    while not list(backup.glob("*/chief/checkpoint")):  # an epoch backed up: there is something to resume
        assert time.monotonic() < deadline and first.process.poll() is None, _processes_of(first.process.pid)
        time.sleep(0.5)
    workers = _local_workers(first.process.pid)
    assert len(workers) == 2, _processes_of(first.process.pid)
    os.kill(first.process.pid, signal.SIGTERM)
    code, out, err = first.finish()
    assert code == 143, out + err
    # the whole run, its workers included, had ended when tfxd exited: the run ended them, nothing outlived it
    assert not [worker for worker in workers if worker.is_running()], workers
    assert "interrupted by SIGTERM during Trainer" in err
    assert first.group_gone(timeout=30), _processes_of(first.process.pid)
    assert _executions(crash_project)["Trainer"] == ["CANCELED"]

    result = tfxd("run", "spec.yaml", cwd=crash_project)
    _check_resumed(crash_project, result, reused=BEFORE_TRAINER)
    assert _runs(crash_project)[-1]["training"]["epochs"] < 10  # went on from the backed-up epoch


@pytest.mark.reliability("crash point")
def test_sigint_to_the_main_process_stops_the_beam_orchestrator_cleanly_too(crash_project):
    write_spec(crash_project, SPEC + "targets:\n  local: {orchestrator: beam}\n")
    first = Running(crash_project, "--to", "Transform")  # stopped by SIGINT, it leaves no temporary files
    first.wait_for_transform_work(crash_project)
    os.kill(first.process.pid, signal.SIGINT)  # `kill -INT pid`; Beam wraps the KeyboardInterrupt
    code, out, err = first.finish()
    assert code == 130, out + err
    assert "interrupted by SIGINT during Transform" in err and "Traceback" not in out + err
    (summary,) = _runs(crash_project)
    assert summary["status"] == "interrupted" and _statuses(summary)["Transform"] == "interrupted"
    assert _executions(crash_project)["Transform"] == ["CANCELED"]

    result = tfxd("run", "spec.yaml", "--to", "Transform", cwd=crash_project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _statuses(_runs(crash_project)[-1]) == {**dict.fromkeys(BEFORE_TRANSFORM, "cached"), "Transform": "ran"}
    assert _executions(crash_project)["Transform"] == ["CANCELED", "COMPLETE"]


def test_a_second_run_of_the_same_root_is_refused_while_the_first_runs(crash_project):
    first = Running(crash_project, "--to", "Transform")
    first.wait_for("> StatisticsGen ...")
    root = crash_project / "tfxd-runs" / "demo"
    runs_before = sorted(os.listdir(root / "runs"))

    # the first run is held still (SIGSTOP) while the second tries, so it holds the lock for as long as the
    # second takes on a busy machine: the second returning at all shows it did not wait for the lock
    os.kill(first.process.pid, signal.SIGSTOP)
    try:
        second = tfxd("run", "spec.yaml", cwd=crash_project)
        assert first.process.poll() is None
    finally:
        os.kill(first.process.pid, signal.SIGCONT)
    assert second.returncode == 1, second.stdout + second.stderr
    lock = root / "tfxd-run.lock"
    assert (f"another tfxd run (pid {first.process.pid}) is using {root}; wait for it or stop it "
            f"(lock file: {lock})") in " ".join(second.stderr.split())
    assert "Traceback" not in second.stderr and not second.stdout
    assert sorted(os.listdir(root / "runs")) == runs_before  # the refused run wrote nothing

    code, out, err = first.finish()
    assert code == 0, out + err
    assert _statuses(_runs(crash_project)[-1])["Transform"] == "ran"
    with open(lock) as handle:  # released on exit
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _executions(crash_project)
