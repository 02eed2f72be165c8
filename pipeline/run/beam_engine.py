"""The engine a run's Beam steps execute on, started for the run and stopped with it: Beam's Flink or Spark
job server (a JVM: an embedded Flink or Spark, or the submitter to the spec's `beam.master`) and, for an
embedded engine, an external SDK worker pool (pipeline/run/sdk_worker_pool.py), so that the Python SDK
workers run as separate processes, as they do beside a cluster's TaskManagers.

Both run in their own process groups and are stopped as groups when the run ends however it ends (the
pool's workers, the JVM's threads and its temporary folders go with them), so that a run, a failure or
Ctrl-C leaves no JVM, no worker pool and no port held; the kernel ends both when the process that started
them is killed outright (SIGKILL leaves it no `finally`). While the run uses them a watch
(pipeline/run/engine_watch.py) says what ended, and cancels the job Beam would wait on for ever. The
components find both through the environment (tfxd.beam_engines: JOB_ENDPOINT_ENV, WORKER_POOL_ENV), which
the Beam arguments read as TFX placeholders.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tfxd import console, process_table
from tfxd.beam_engines import (
    ENGINES,
    JOB_ENDPOINT_ENV,
    JVM_OPENS,
    WORKER_POOL_ENV,
    Engine,
    class_path,
    home,
    java,
)
from tfxd.direct_runner import parallel_workers
from tfxd.pipeline.assembly.beam_args import engine_workers
from tfxd.pipeline.run import class_archive, sdk_worker_pool
from tfxd.pipeline.run.engine_watch import EngineWatch
from tfxd.pipeline.run.outcome import root_cause, shortened
from tfxd.pipeline.spec.document import Spec

START_SECONDS = 90  # a JVM on a loaded 2-core machine, Flink's mini cluster or Spark's context included
STOP_SECONDS = 10  # SIGTERM, then SIGKILL


class EngineFailed(RuntimeError):
    """The engine did not start (the message says why, with its log's last lines and where the log is)."""


@dataclass(frozen=True)
class RunningEngine:
    engine: Engine
    job_endpoint: str
    worker_pool: str | None  # host:port of tfxd's SDK worker pool; None when the cluster's pools serve
    job_server_log: str
    worker_log: str | None
    watch: EngineWatch

    def fault(self) -> str | None:
        """What ended or was cancelled on the engine while the run used it (the watch's account)."""
        return self.watch.fault

    def where_logs_are(self) -> str:
        logs = [f"the {self.engine.title} job server's log: {self.job_server_log}"]
        if self.worker_log:
            logs.append(f"the SDK workers': {self.worker_log}")
        return "; ".join(logs)


_JAVA_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")
_CAUSED_BY = re.compile(r"^\s*Caused by: (.*)$")


def engine_reason(text: str) -> str | None:
    """A job's failure on the engine in a user's words: the Python exception an SDK worker raised (its
    traceback's last error), else the deepest Java cause without its stack frames; None when ``text``
    is not an engine's account (then the usual root cause applies)."""
    if "failed in state FAILED" not in text and "Traceback (most recent call last)" not in text:
        return None
    if "Traceback (most recent call last)" in text:
        python = root_cause(text.rsplit("Traceback (most recent call last)", 1)[1])
        if python:
            return f"an SDK worker raised {python}"
    lines = [line for line in text.splitlines() if not _JAVA_FRAME.match(line)]
    causes = [match.group(1) for line in lines if (match := _CAUSED_BY.match(line))]
    head = lines[0].strip() if lines else ""
    return shortened(f"{head} (caused by {causes[-1]})" if causes else head)


@contextlib.contextmanager
def started(spec: Spec, log_dir: str, meanwhile: Callable[[], None] = lambda: None) -> Iterator[RunningEngine | None]:
    """The spec's engine, running for the body (None when the runner needs none here); logs in ``log_dir``.
    ``meanwhile`` (what the run does before it needs the engine: its imports) runs while the engine starts."""
    if not spec.beam.needs_job_server:
        meanwhile()
        yield None
        return
    with running(ENGINES[spec.beam.runner], spec.beam.master, engine_workers(spec), log_dir, meanwhile) as engine:
        yield engine


@contextlib.contextmanager
def running(engine: Engine, master: str | None, workers: int, log_dir: str,
            meanwhile: Callable[[], None] = lambda: None) -> Iterator[RunningEngine]:
    """``engine``'s job server, submitting to ``master`` or, None, an embedded engine with ``workers``
    slots and SDK worker processes; the endpoints in the environment for the body. ``meanwhile`` runs
    once the job server's JVM is started, before it listens (seconds: the JVM and the engine starting).

    The body's temporary files, this process's and the SDK workers', go to a folder removed at the end:
    Beam makes a folder for every environment it submits to a portable runner and leaves it, with the
    `pip freeze` of the submitting Python in it (apache_beam/transforms/environments.py,
    python_sdk_dependencies), several a pipeline, and the SDK workers a killed engine stops leave theirs."""
    embedded = master is None
    os.makedirs(log_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f"tfxd-{engine.name}-")
    group = _Processes()
    saved = {key: os.environ.get(key) for key in (JOB_ENDPOINT_ENV, WORKER_POOL_ENV, "TMPDIR")}
    saved_tempdir = tempfile.tempdir
    watch = archive = jvm = None
    try:
        os.environ["TMPDIR"] = tempfile.tempdir = os.path.join(scratch, "tmp")
        os.makedirs(tempfile.tempdir)
        job_log = os.path.join(log_dir, f"{engine.name}-job-server.log")
        # the job service's, the artifact service's, the expansion service's, the pool's: taken at once, none
        # the same, since the JVM binds its own only once it has started
        ports = _free_ports(4)
        endpoint = f"127.0.0.1:{ports[0]}"
        archive = class_archive.for_job_server(engine, java() or "java", class_path(engine))
        command = _job_server_command(engine, ports[:3], master or engine.embedded_master(workers), scratch,
                                      workers if embedded else None, archive.flags)
        # the JVM first, the longest to start; the SDK worker pool while it starts
        jvm = group.start(f"Beam's {engine.title} job server", command, job_log, _jvm_env(engine, scratch),
                          archive.stop_seconds)
        worker_log = pool = pool_process = None
        if embedded:
            pool, pool_process, worker_log = _pool_started(group, log_dir, ports[3])
        meanwhile()
        _wait_listening(endpoint, group, f"Beam's {engine.title} job server", job_log)
        os.environ[JOB_ENDPOINT_ENV] = endpoint
        if pool:
            os.environ[WORKER_POOL_ENV] = pool
        watch = EngineWatch(engine.title, list(group.running), pool_process, endpoint)
        watch.start()
        where = f"embedded, {workers} SDK worker processes" if embedded else f"submitting to {master}"
        console.info(f"{engine.title} {engine.version} through Beam's job server ({where}); log: {job_log}")
        yield RunningEngine(engine, endpoint, pool, job_log, worker_log, watch)
    finally:
        if watch is not None:
            watch.stop()
        group.stop()
        if archive is not None and jvm is not None:
            archive.kept(jvm.returncode)
        tempfile.tempdir = saved_tempdir
        shutil.rmtree(scratch, ignore_errors=True)
        _environ_put_back(saved)


@contextlib.contextmanager
def direct_workers_pooled(args: list, log_dir: str) -> Iterator[str | None]:
    """tfxd's SDK worker pool for the body, its address in the environment, where ``args`` (a pipeline's
    Beam arguments) start the DirectRunner's worker processes (multi_processing): the runner then forks its
    workers from the pool (tfxd.direct_runner.workers_forked) instead of starting a Python for each, every
    pipeline. The pool loads the workers' libraries while the run's first components run. The log of the
    pool and its workers is in ``log_dir``; the address (None: no pool)."""
    if not forks_workers(args):
        yield None
        return
    group = _Processes()
    saved = {WORKER_POOL_ENV: os.environ.get(WORKER_POOL_ENV)}
    try:
        pool, _, _ = _pool_started(group, log_dir)
        os.environ[WORKER_POOL_ENV] = pool
        yield pool
    finally:
        group.stop()
        _environ_put_back(saved)


def _environ_put_back(saved: dict[str, str | None]) -> None:
    """The environment's variables as ``saved`` has them (None: unset)."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def forks_workers(args: list) -> bool:
    """Whether ``args`` run Beam's in-process runner with worker processes (multi_processing)."""
    # start-up: Beam loads lazily (a replay imports this module)
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

    given = [arg for arg in args if isinstance(arg, str)]  # an engine's are TFX placeholders too
    mode = PipelineOptions(given).view_as(DirectOptions).direct_running_mode
    return mode == "multi_processing" and parallel_workers(given) > 1


def _pool_started(group: _Processes, log_dir: str, port: int | None = None) -> tuple[str, subprocess.Popen, str]:
    """tfxd's SDK worker pool, started in ``group`` and listening on ``port`` (None: a free one): its
    address, process and log."""
    os.makedirs(log_dir, exist_ok=True)
    worker_log = os.path.join(log_dir, "sdk-workers.log")
    pool = f"127.0.0.1:{port or _free_port()}"
    pool_process = group.start("the SDK worker pool", _worker_pool_command(pool), worker_log,
                               dict(os.environ))  # the run's: TF_USE_LEGACY_KERAS, the user's PYTHONPATH
    _wait_listening(pool, group, "the SDK worker pool", worker_log)
    return pool, pool_process, worker_log


def _worker_pool_command(address: str) -> list[str]:
    return [sys.executable, "-m", sdk_worker_pool.__name__, f"--service_port={address.rsplit(':', 1)[1]}"]


def _job_server_command(engine: Engine, ports: list[int], master: str, scratch: str,
                        embedded_workers: int | None, archive_flags: tuple[str, ...] = ()) -> list[str]:
    """The job server's command line; ``embedded_workers``: the slots of an engine embedded here (None: the
    job server submits to a cluster's master); ``archive_flags``: its class archive's (class_archive)."""
    executable = java()
    assert executable is not None  # validate refuses the spec without Java (tfxd.beam_engines.problems)
    job, artifact, expansion = ports
    properties = () if embedded_workers is None else engine.embedded_jvm_properties(embedded_workers)
    return [executable, *JVM_OPENS, *_SHORT_LIVED, *archive_flags, *properties, f"-Djava.io.tmpdir={scratch}", *_QUIETER,
            "-cp", class_path(engine), engine.main, "--job-host=127.0.0.1", f"--job-port={job}",
            f"--artifact-port={artifact}", f"--expansion-port={expansion}", f"--artifacts-dir={os.path.join(scratch, 'artifacts')}",
            f"{engine.master_flag}={master}"]


# The engine tfxd embeds lives for one run on the user's own cores, beside the SDK workers that do the
# Python work: HotSpot's optimizing compiler (C2, compiling Flink's, Spark's, Beam's and gRPC's code anew in
# every run) and G1's concurrent threads took those cores for longer than their code ran faster. C1 alone
# and the serial collector (bench/RESULTS.md has the figures).
_SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

# The Flink job server logs through SLF4J's simple logger: with times, and without the per-task chatter of
# Flink's task executors and Beam's control clients; job and task states stay.
_QUIETER = ("-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
            *(f"-Dorg.slf4j.simpleLogger.log.{name}=warn" for name in (
                "org.apache.flink.runtime.taskmanager.Task", "org.apache.flink.runtime.taskexecutor",
                "org.apache.flink.runtime.io.network", "org.apache.beam.runners.fnexecution.control")))


def _jvm_env(engine: Engine, scratch: str) -> dict[str, str]:
    env = dict(os.environ, TMPDIR=scratch)
    env.update({name: value.format(home=home(engine)) for name, value in engine.env})
    return env


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(count: int) -> list[int]:
    """``count`` different ports free on loopback now. Every probe is held until all are chosen: a port
    probed and let go is free again, and the kernel may hand it to the next probe (the job server's
    artifact and expansion services were once given one port, and it failed to start: Address already in
    use)."""
    with contextlib.ExitStack() as held:
        probes = [held.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


class _Processes:
    """Processes started in their own process groups, stopped together, last started first."""

    def __init__(self) -> None:
        self.running: list[tuple[str, subprocess.Popen]] = []
        self._logs: dict[int, str] = {}  # by pid
        self._stop_seconds: dict[int, float] = {}  # by pid, where not STOP_SECONDS

    def start(self, name: str, command: list[str], log: str, env: dict[str, str],
              stop_seconds: float | None = None) -> subprocess.Popen:
        """``command`` started; ``stop_seconds``: how long it may take to stop (default STOP_SECONDS)."""
        with open(log, "ab") as out:
            process = subprocess.Popen(sdk_worker_pool.ending_with_parent(command), stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.running.append((name, process))
        self._logs[process.pid] = log
        if stop_seconds is not None:
            self._stop_seconds[process.pid] = stop_seconds
        return process

    def exited(self) -> tuple[str, int, str] | None:
        """The first process that ended: its name, exit code and log."""
        for name, process in self.running:
            if process.poll() is not None:
                return name, process.returncode, self._logs[process.pid]
        return None

    def stop(self) -> None:
        for _, process in reversed(self.running):
            _signal_group(process, signal.SIGTERM)
        asked = time.monotonic()
        for _, process in reversed(self.running):
            deadline = asked + self._stop_seconds.get(process.pid, STOP_SECONDS)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            _signal_group(process, signal.SIGKILL)  # the group: SDK workers outlive a stopped pool
            process.wait()
            _group_gone(process.pid, deadline + STOP_SECONDS)
        self.running.clear()


def _group_gone(group: int, deadline: float) -> None:
    """Back once no process of ``group`` runs any more (a zombie has closed its files) or at ``deadline``.
    The SDK workers a pool forked hold its listening socket: killed with the group, they close it only as
    they finish exiting, after the pool that was waited for."""
    while time.monotonic() < deadline and process_table.running_in_group(group):
        time.sleep(0.02)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _wait_listening(address: str, group: _Processes, name: str, log: str) -> None:
    """Back once ``name`` listens on ``address``; EngineFailed when it or another process of ``group`` (the
    job server's JVM, starting beside the pool) ends first, with the end of that process's own log."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        ended = group.exited()
        if ended:
            what, code, ended_log = ended
            raise EngineFailed(f"{what} ended with exit code {code} while starting: {_tail(ended_log)}; "
                               f"log: {ended_log}")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
            return
        time.sleep(0.2)
    raise EngineFailed(f"{name} did not listen on {address} within {START_SECONDS} s; log: {log}")


def _tail(log: str, lines: int = 5) -> str:
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            kept = [line.strip() for line in handle if line.strip() and "SLF4J" not in line]
    except OSError:
        return "no log"
    return " / ".join(kept[-lines:]) or "nothing logged"
