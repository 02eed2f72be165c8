"""The watch on an engine tfxd started (pipeline/run/engine_watch.py), on a real embedded Flink with tfxd's
worker pool: a worker that ends before it connects makes Beam's job server wait for ever
(ExternalEnvironmentFactory.createEnvironment loops on "Still waiting for startup of environment"), and the
watch ends that wait; workers the job server stops itself are no fault. And what tfxd started ends with it
when tfxd is killed outright, and starts without running Python in a forked copy of tfxd."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.pipeline.run.test_beam_engines import _ours
from tfxd.beam_engines import ENGINES
from tfxd.pipeline.run import beam_engine
from tfxd.pipeline.run.engine_watch import refusing_server
from tfxd.process_table import returncode


def _count(engine: beam_engine.RunningEngine) -> int:
    """A small Beam pipeline on the engine, its SDK workers from tfxd's pool: the number of elements."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    options = PipelineOptions(["--runner=PortableRunner", f"--job_endpoint={engine.job_endpoint}",
                               "--environment_type=EXTERNAL", f"--environment_config={engine.worker_pool}",
                               "--parallelism=2"])
    with beam.Pipeline(options=options) as pipeline:
        counted = pipeline | beam.Create(range(100)) | beam.Map(lambda x: x * 2) | beam.combiners.Count.Globally()
        assert_that(counted, equal_to([100]))
    return 100


# tfxd's pool, but the workers named in DOOMED (worker ids) kill themselves (SIGKILL) before they connect:
# a forked worker connects within milliseconds, too soon for a watcher from outside to kill it first
_DOOMED_POOL = textwrap.dedent("""
    import os, signal, sys
    from apache_beam.runners.worker import sdk_worker
    from tfxd.pipeline.run import sdk_worker_pool

    doomed, harness = set(os.environ["DOOMED"].split(",")), sdk_worker.SdkHarness.__init__

    def dying(self, control_address, worker_id=None, **settings):
        if worker_id in doomed:
            os.kill(os.getpid(), signal.SIGKILL)
        harness(self, control_address, worker_id=worker_id, **settings)

    sdk_worker.SdkHarness.__init__ = dying
    sys.exit(sdk_worker_pool.main(sys.argv[1:]))
    """)


def _started(log: Path, worker_id: str) -> int:
    """The pid of the worker the pool's log says it started as ``worker_id``."""
    found = re.search(rf"started worker {re.escape(worker_id)} \(pid (\d+)\)", log.read_text(errors="replace"))
    assert found, log.read_text(errors="replace")
    return int(found.group(1))


@pytest.mark.timeout(600)  # without the watch the second pipeline never ends
@pytest.mark.reliability("environment fault")
def test_a_worker_that_dies_before_it_connects_fails_the_job_instead_of_hanging(tmp_path, monkeypatch):
    monkeypatch.setenv("DOOMED", "2-1,3-1")  # the workers of the second and third jobs
    monkeypatch.setattr(beam_engine, "_worker_pool_command", lambda address: [
        sys.executable, "-c", _DOOMED_POOL, f"--service_port={address.rsplit(':', 1)[1]}"])
    with beam_engine.running(ENGINES["flink"], None, 2, str(tmp_path)) as engine:
        assert _count(engine) == 100
        assert engine.fault() is None  # the job server stopped its workers: no fault
        with pytest.raises(RuntimeError, match="failed in state CANCELLED"):
            _count(engine)
        killed = _started(tmp_path / "sdk-workers.log", "2-1")
        said = (f"an SDK worker (worker id 2-1, pid {killed}) was killed by signal 9 (SIGKILL: out of memory, or "
                "stopped from outside); Flink kept waiting for that worker to connect, so tfxd cancelled its job")
        assert engine.fault() == said
        # a later job's stranded worker is cancelled too (the first stays a zombie of the pool)
        with pytest.raises(RuntimeError, match="failed in state CANCELLED"):
            _count(engine)
        again = _started(tmp_path / "sdk-workers.log", "3-1")
        assert engine.fault() == f"{said}; {said.replace(str(killed), str(again)).replace('2-1', '3-1')}"
        log = (tmp_path / "flink-job-server.log").read_text(errors="replace")
        assert "Still waiting for startup of environment" not in log  # Beam's own two-minute wait never came
        # the cancelled jobs' tasks, waiting for their workers, keep their slots: the embedded cluster (one for
        # the run: engines/flink/src) adds a TaskManager for the next job, as it did for the third
        assert log.count("starting 1 more TaskManager(s)") == 1
    assert _ours() == []


def test_a_dead_job_servers_port_answers_beams_client_with_what_happened():
    """Beam's client for an external job server (ExternalJobServer.start, apache_beam/runners/portability/
    job_server.py) waits `job_server_timeout` (300 s by default) for a port nobody listens on; the watch's
    refusing server on that port fails it at once, with the watch's words."""
    import grpc
    from apache_beam.portability.api import beam_job_api_pb2
    from apache_beam.runners.portability.job_server import ExternalJobServer

    endpoint = f"127.0.0.1:{beam_engine._free_port()}"
    with pytest.raises(grpc.FutureTimeoutError):  # nobody there: Beam waits its whole timeout
        ExternalJobServer(endpoint, timeout=1).start()
    server = refusing_server(endpoint, "Beam's Flink job server was killed by signal 9")
    assert server is not None
    try:
        stub = ExternalJobServer(endpoint, timeout=10).start()
        with pytest.raises(grpc.RpcError) as refused:
            stub.Prepare(beam_job_api_pb2.PrepareJobRequest(job_name="taxi"), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == "Beam's Flink job server was killed by signal 9"
        assert refusing_server(endpoint, "taken") is None  # a port in use is left to its owner
    finally:
        server.stop(grace=None)


def test_an_unreaped_workers_wait_status_reads_as_popens_return_code():
    assert returncode(9) == -9 and returncode(3 << 8) == 3  # /proc's exit_code is a wait status


_HOLDS_AN_ENGINE = textwrap.dedent("""
    import sys, time
    from tfxd.beam_engines import ENGINES
    from tfxd.pipeline.run import beam_engine
    with beam_engine.running(ENGINES["flink"], None, 2, sys.argv[1]):
        print("running", flush=True)
        time.sleep(600)
    """)


@pytest.mark.reliability("environment fault")
def test_an_engine_ends_with_the_tfxd_process_killed_outright(tmp_path):
    """SIGKILL leaves tfxd no `finally` to stop its engine: the kernel ends the job server and the worker
    pool with it (PR_SET_PDEATHSIG), and nothing is left."""
    killed_tmp = tmp_path / "tmp"  # what it cannot remove, killed: the engine's scratch folder
    killed_tmp.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDS_AN_ENGINE, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "TMPDIR": str(killed_tmp)})
    try:
        assert holder.stdout is not None and "running\n" in iter(holder.stdout.readline, "")
        running = _ours()
        assert any(ENGINES["flink"].main in line for line in running), running
        assert any("tfxd.pipeline.run.sdk_worker_pool" in line for line in running), running
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 20
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours() == []


def _started_runs_at_fork_handlers(tmp_path, start) -> tuple[bool, int]:
    """Whether ``start`` (a command -> its Popen) runs the at-fork handlers of this process in the child,
    as it would gRPC's once a Beam job has run here (what aborted a job server as it started), and how the
    command ended (where an earlier test of this process ran a Beam job, gRPC's own handler may abort it)."""
    marker = tmp_path / "forked"
    marker.unlink(missing_ok=True)
    ran = []

    def after_in_child() -> None:
        if not ran:  # os.register_at_fork keeps every handler for the process's life: this test's only
            marker.write_text(str(os.getpid()))

    os.register_at_fork(after_in_child=after_in_child)
    try:
        code = start(["/bin/true"]).wait()
        return marker.exists(), code
    finally:
        ran.append(True)


def test_an_engines_processes_start_without_running_python_in_a_forked_copy_of_tfxd(tmp_path):
    """The job server and the pool start through a Python of their own that asks for the death signal and
    becomes the command (sdk_worker_pool.ending_with_parent): no at-fork handler of tfxd's runs. A preexec_fn
    (the same death signal asked in the forked child) runs them all: the bite."""
    from tfxd.pipeline.run.sdk_worker_pool import end_with_parent

    processes = beam_engine._Processes()
    log = str(tmp_path / "log")
    assert _started_runs_at_fork_handlers(tmp_path, lambda command: processes.start("true", command, log,
                                                                                    dict(os.environ))) == (False, 0)
    forked, _ = _started_runs_at_fork_handlers(tmp_path, lambda command: subprocess.Popen(
        command, preexec_fn=end_with_parent, start_new_session=True))
    assert forked  # ended 0, or aborted by gRPC's handler where this process had run a Beam job


def test_a_program_whose_starter_is_gone_by_its_death_signal_is_not_run():
    """The death signal asked once the starter has ended would never come: the program is not run (the
    starter's pid stands in for one that ended: the child's parent is then another)."""
    from tfxd.pipeline.run.sdk_worker_pool import ending_with_parent

    command = ending_with_parent(["/bin/echo", "ran"])
    assert subprocess.run(command, capture_output=True, text=True).stdout == "ran\n"
    gone = [*command[:5], str(os.getpid() + 1_000_000), *command[6:]]  # no process has that pid
    run = subprocess.run(gone, capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (1, "")
