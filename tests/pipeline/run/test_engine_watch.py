"""The watch on an engine tfxd started (pipeline/run/engine_watch.py), on a real embedded Flink with Beam's
worker pool: a worker that ends before it connects makes Beam's job server wait for ever
(ExternalEnvironmentFactory.createEnvironment loops on "Still waiting for startup of environment"), and the
watch ends that wait; workers the job server stops itself are no fault. And what tfxd started ends with it
when tfxd is killed outright."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.pipeline.run.test_beam_engines import _ours
from tfxd.beam_engines import ENGINES
from tfxd.pipeline.run import beam_engine
from tfxd.pipeline.run.engine_watch import _children, _returncode, refusing_server


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


def _kill_first_worker(pool_pid: int, killed: list[int], done: threading.Event) -> None:
    """SIGKILL to the first SDK worker the pool starts, as soon as it is seen: before it connects (its
    imports alone take seconds)."""
    while not done.is_set():
        for pid, (_, command, _) in _children(pool_pid).items():
            if "SdkHarness" in command:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.01)


def _without_worker_ids(fault: str | None) -> str | None:
    """The fault without the workers' ids: the watch names a worker's id when it saw the worker's command
    line before the kill (engine_watch: "worker id 2-1, pid N"), which on a busy machine it may."""
    return re.sub(r"worker id [^,]+, ", "", fault) if fault is not None else None


def _count_with_the_first_worker_killed(engine: beam_engine.RunningEngine) -> int:
    """_count with its first SDK worker killed before it connects: the job is cancelled; the worker's pid."""
    killed: list[int] = []
    done = threading.Event()
    killer = threading.Thread(target=_kill_first_worker, args=(engine.watch.pool.pid, killed, done))
    killer.start()
    try:
        with pytest.raises(RuntimeError, match="failed in state CANCELLED"):
            _count(engine)
    finally:
        done.set()
        killer.join()
    assert killed
    return killed[0]


@pytest.mark.timeout(600)  # without the watch the second pipeline never ends
@pytest.mark.reliability("environment fault")
def test_a_worker_that_dies_before_it_connects_fails_the_job_instead_of_hanging(tmp_path):
    with beam_engine.running(ENGINES["flink"], None, 2, str(tmp_path)) as engine:
        assert _count(engine) == 100
        assert engine.fault() is None  # the job server stopped its workers: no fault
        killed = _count_with_the_first_worker_killed(engine)
        said = (f"an SDK worker (pid {killed}) was killed by signal 9 (SIGKILL: out of memory, or stopped from "
                "outside); Flink kept waiting for that worker to connect, so tfxd cancelled its job")
        assert _without_worker_ids(engine.fault()) == said
        # a later job's stranded worker is cancelled too (the first stays a zombie of the pool)
        again = _count_with_the_first_worker_killed(engine)
        assert again != killed
        assert _without_worker_ids(engine.fault()) == f"{said}; {said.replace(str(killed), str(again))}"
        log = (tmp_path / "flink-job-server.log").read_text(errors="replace")
        assert "Still waiting for startup of environment" not in log  # Beam's own two-minute wait never came
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
    assert _returncode(9) == -9 and _returncode(3 << 8) == 3  # /proc's exit_code is a wait status


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
        assert any("JobServerDriver" in line for line in running), running
        assert any("worker_pool_main" in line for line in running), running
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 20
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours() == []
