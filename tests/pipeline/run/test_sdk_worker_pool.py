"""tfxd's SDK worker pool (pipeline/run/sdk_worker_pool.py): Beam's external worker pool service, its
workers forked from a process that loaded their libraries once.

The pool's client here is Beam's own: its portable runner with the embedded Python job service
(`--job_endpoint=embed`), which asks an EXTERNAL environment's pool for a worker per job
(worker_handlers.ExternalWorkerHandler.start_worker) and hands it the job's bundles; the same pipeline
through Beam's own pool (worker_pool_main) is the negative case. The Flink job server as the client, and a
worker killed before it connects: tests/pipeline/run/test_engine_watch.py and test_beam_engines.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from unittest import mock

import grpc
import pytest

from tfxd import heap
from tfxd.direct_runner import SAMPLER_PERIOD_MS
from tfxd.pipeline.run.beam_engine import _free_port
from tfxd.process_table import children, stat


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _named(pool: int, name: str, seconds: float = 10) -> list[int]:
    """The pool's children called ``name``: a forked worker names itself just after the fork, and the pool
    answers StartWorker once it has forked, so on a busy machine the name can come a moment after the answer."""
    deadline = time.monotonic() + seconds
    while True:
        named = [pid for pid, (_, comm, _) in children(pool).items() if comm == name]
        if named or time.monotonic() > deadline:
            return named
        time.sleep(0.05)


@contextlib.contextmanager
def _pool(module: str, log):
    """A worker pool (``module``'s main) on a free port, stopped with its process group at the end."""
    port = _free_port()
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # Beam's: `python`
    process = subprocess.Popen([sys.executable, "-m", module, f"--service_port={port}"], stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "the pool did not listen"
            time.sleep(0.1)
        yield process, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _run_on(port: int, folder) -> list[tuple[int, int, str, bool, int, int, int, int]]:
    """A one-element pipeline on the pool: what its SDK worker was (pid, parent, name, TensorFlow loaded
    before the job, a draw of numpy's, the objects its collector skips, its youngest generation's
    threshold and the longest sleep of the bundle's state sampler), from a file the worker wrote in
    ``folder``."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    folder.mkdir()
    where = str(folder)

    def where_it_ran(_):  # a closure: pickled by value, the workers need not import the tests
        import gc
        import json
        import uuid

        import numpy as np
        from apache_beam.runners.worker import statesampler

        with open("/proc/self/comm") as comm:
            name = comm.read().strip()
        seen = [os.getpid(), os.getppid(), name, "tensorflow" in sys.modules, int(np.random.randint(1 << 30)),
                gc.get_freeze_count(), gc.get_threshold()[0], statesampler.get_current_tracker().sampling_period_ms]
        with open(os.path.join(where, uuid.uuid4().hex), "w") as out:
            json.dump(seen, out)

    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
                               f"--environment_config=127.0.0.1:{port}"])
    # Beam leaves a folder for every environment it submits to a portable runner: in one of the test's own
    with tempfile.TemporaryDirectory() as temp, mock.patch.object(tempfile, "tempdir", temp), \
            beam.Pipeline(options=options) as pipeline:
        _ = pipeline | beam.Create([0]) | beam.Map(where_it_ran)
    return [tuple(json.loads(path.read_text())) for path in folder.iterdir()]


@pytest.mark.timeout(300)
def test_workers_are_forked_from_the_pool_with_their_libraries_loaded(tmp_path):
    from apache_beam.runners.worker import statesampler

    log_path = tmp_path / "pool.log"
    with open(log_path, "wb") as log, _pool("tfxd.pipeline.run.sdk_worker_pool", log) as (pool, port):
        ran = [*_run_on(port, tmp_path / "first"), *_run_on(port, tmp_path / "second")]  # a worker a job
        assert len(ran) == 2, log_path.read_text(errors="replace")
        (first, parent, name, loaded, draw, frozen, young, period), (second, parent_2, name_2, loaded_2, draw_2,
                                                                      *_) = ran
        assert parent == parent_2 == pool.pid and first != second  # children of the pool, a new one a job
        assert name.startswith("sdk worker_") and name_2.startswith("sdk worker_") and name != name_2
        assert loaded and loaded_2  # TensorFlow was there before the job's DoFns were
        assert draw != draw_2  # numpy reseeded in each fork (copies of one generator would draw alike)
        assert frozen > 500_000 and young == heap.YOUNG_OBJECTS  # the pool's imports settled (tfxd.heap)
        assert period == SAMPLER_PERIOD_MS  # a bundle waits out no 200 ms sleep (tfxd.direct_runner)
    said = log_path.read_text(errors="replace")
    assert "libraries loaded in" in said and "started worker worker_" in said

    beams = tmp_path / "beams-pool.log"  # the negative case: Beam's pool starts a fresh Python a worker
    with open(beams, "wb") as log, _pool("apache_beam.runners.worker.worker_pool_main", log) as (pool, port):
        [(_, parent, name, loaded, _, frozen, young, period)] = _run_on(port, tmp_path / "beams")
        assert parent == pool.pid and name == "python" and not loaded and frozen == 0 and young == 700
        assert period == statesampler.DEFAULT_SAMPLING_PERIOD_MS


@pytest.mark.timeout(120)
def test_a_stopped_worker_is_reaped_and_the_service_ends_with_the_pool(tmp_path):
    """Through Beam's own stub, as the job server calls the pool: a worker started (its control endpoint
    nobody's), then stopped: reaped, nothing of it left. Then the pool killed outright: its gRPC service
    goes with it (nothing listens on the port)."""
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc, endpoints_pb2

    with open(tmp_path / "pool.log", "wb") as log, _pool("tfxd.pipeline.run.sdk_worker_pool", log) as (pool, port):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)
            control = endpoints_pb2.ApiServiceDescriptor(url=f"127.0.0.1:{_free_port()}")
            started = stub.StartWorker(beam_fn_api_pb2.StartWorkerRequest(worker_id="w-1", control_endpoint=control),
                                       timeout=60)
            assert started.error == ""
            workers = _named(pool.pid, "sdk w-1")
            assert len(workers) == 1
            stopped = stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id="w-1"), timeout=60)
            assert stopped.error == ""
            assert workers[0] not in children(pool.pid)  # ended and reaped, not a zombie
        [service] = list(children(pool.pid))  # the gRPC service, the pool's one child left
        pool.kill()
        pool.wait()
        deadline = time.monotonic() + 10
        while _listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _listening(port)
        seen = stat(service)
        assert seen is None or seen[0] == "Z"  # ended (a zombie until whoever adopted it reaps it)
