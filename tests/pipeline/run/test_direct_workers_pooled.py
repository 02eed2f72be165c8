"""The DirectRunner's worker processes forked from tfxd's SDK worker pool in a local run
(pipeline/run/beam_engine.py, direct_workers_pooled; tfxd/direct_runner.py, workers_forked).

The judge is Beam's own in-process runner in multi_processing mode, which asks the pool for its workers
through its external environment (fn_api_runner/worker_handlers.py, ExternalWorkerHandler.start_worker)
and hands them the pipeline's bundles. The negative case: the same pipeline without a pool, whose workers
are the new Pythons Beam starts (`python -m apache_beam.runners.worker.sdk_worker_main`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline.run.test_sdk_worker_pool import _listening
from tfxd.beam_engines import WORKER_POOL_ENV
from tfxd.direct_runner import WorkerLost, direct_args, worker_loss_fails_bundles, workers_forked
from tfxd.pipeline.run.beam_engine import _group_gone, direct_workers_pooled, forks_workers
from tfxd.process_table import running_in_group, stat

ARGS = [*direct_args("multi_processing", 2), "--no_pipeline_type_check"]


def _run(folder) -> list[list]:
    """An 8-element pipeline on the DirectRunner with 2 worker processes: for each element, what its worker
    was (pid, parent, name, TensorFlow loaded before the job), from a file the worker wrote in ``folder``."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    folder.mkdir()
    where = str(folder)

    def where_it_ran(element):  # a closure: pickled by value, the workers need not import the tests
        with open("/proc/self/comm") as comm:
            name = comm.read().strip()
        loaded = "tensorflow" in sys.modules
        with open(os.path.join(where, str(element)), "w") as out:
            json.dump([os.getpid(), os.getppid(), name, loaded], out)
        return element * element

    with beam.Pipeline(options=PipelineOptions(ARGS)) as pipeline:
        squares = pipeline | beam.Create(range(8)) | beam.Reshuffle() | beam.Map(where_it_ran)
        assert_that(squares, equal_to([n * n for n in range(8)]))
    return [json.loads((folder / str(n)).read_text()) for n in range(8)]


@pytest.mark.timeout(300)
def test_a_runs_direct_workers_are_forked_from_its_pool(tmp_path):
    logs = tmp_path / "logs"
    with direct_workers_pooled(ARGS, str(logs)) as pool, workers_forked():
        assert pool and os.environ[WORKER_POOL_ENV] == pool
        ran = _run(tmp_path / "pooled")
    assert all(name.startswith("sdk worker_") and loaded for _, _, name, loaded in ran)  # forked, libraries in
    assert len({parent for _, parent, _, _ in ran}) == 1 and ran[0][1] != os.getpid()  # all the pool's children
    assert 1 <= len({pid for pid, _, _, _ in ran}) <= 2  # the runner's two workers
    said = (logs / "sdk-workers.log").read_text(errors="replace")
    assert "libraries loaded in" in said and said.count("started worker") == 2
    assert WORKER_POOL_ENV not in os.environ and not _listening(int(pool.rsplit(":", 1)[1]))  # ended with the block
    assert not os.path.exists(f"/proc/{ran[0][1]}")

    with workers_forked():  # no pool: Beam's own worker processes, each a new Python
        ran = _run(tmp_path / "beams")
    assert all(name == "python" and not loaded for _, _, name, loaded in ran)  # started through /bin/sh


def test_a_stopped_group_is_waited_for_until_none_of_it_runs():
    """The pool's forked workers hold its listening socket and close it only once they have exited, after
    the pool that was waited for (the check above once found the port still listening): a stop returns
    when no process of the group runs (a zombie's files are closed), or at its deadline, not before."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"], start_new_session=True)
    try:
        _group_gone(process.pid, time.monotonic() - 1)  # the deadline passed: back at once
        assert stat(process.pid)[0] in "RSD"  # it still runs: what the wait is for
        _group_gone(process.pid, time.monotonic() + 60)
        assert stat(process.pid)[0] == "Z"  # exited, not yet reaped by its parent (this process)
    finally:
        process.kill()
        process.wait()


LEADER_GONE_FIRST = """
import ctypes, socket, threading, time
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(); print(server.getsockname()[1], flush=True)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone ends (exit_group would end them all)
"""


def test_a_group_whose_leader_thread_ended_first_runs_until_its_last_thread_has():
    """Linux shows a process whose main thread exited as a zombie while its other threads run, the files
    they share still open (the pool's gRPC service, killed with its threads, listened a moment longer: the
    check above once found its port open): such a process still runs, and the stop waits for it."""
    process = subprocess.Popen([sys.executable, "-c", LEADER_GONE_FIRST], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        port = int(process.stdout.readline())
        deadline = time.monotonic() + 60
        while stat(process.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stat(process.pid)[0] == "Z" and _listening(port)  # the leader a zombie, its socket open
        assert running_in_group(process.pid) == [process.pid]
        os.killpg(process.pid, signal.SIGKILL)
        _group_gone(process.pid, time.monotonic() + 60)
        assert running_in_group(process.pid) == [] and not _listening(port)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.parametrize(("args", "pooled"), [
    (direct_args("multi_processing", 2), True),
    (direct_args("multi_processing", 1), False),  # one worker process: Beam's, as before
    (direct_args("in_memory", 1), False),
    ([*direct_args("multi_processing", 2), "--direct_running_mode=multi_threading"], False),  # the last flag
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", object()], False),  # an engine's, a placeholder
])
def test_a_pool_is_started_only_for_the_direct_runners_worker_processes(args, pooled):
    assert forks_workers(args) is pooled


@pytest.mark.timeout(600)
def test_a_local_run_with_worker_processes_forks_them_from_its_pool(tmp_path_factory):
    """`tfxd run` with beam.workers: 2: StatisticsGen's two workers come from the run's pool (its log in the
    run's logs), and TFDV reads the statistics they computed, every row of the taxi CSV counted."""
    import glob

    import tensorflow_data_validation as tfdv

    from tests.pipeline.run.test_run_taxi import example_project, statuses, summaries, tfxd

    folder = example_project(tmp_path_factory, "taxi")
    result = tfxd("run", "taxi.yaml", "--to", "StatisticsGen", "--set", "beam.workers=2", cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    [summary] = summaries(folder)
    assert statuses(summary) == {"ExampleGen": "ran", "StatisticsGen": "ran"}
    [log] = glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "runs" / "*" / "logs" / "sdk-workers.log"))
    said = Path(log).read_text(errors="replace")
    assert "libraries loaded in" in said and said.count("started worker") == 2, said[-2000:]
    rows = len((folder / "data" / "taxi" / "data.csv").read_text().splitlines()) - 1
    counted = 0
    for path in glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "pipeline" / "StatisticsGen" / "statistics"
                              / "*" / "Split-*" / "FeatureStats.pb")):
        counted += tfdv.load_stats_binary(path).datasets[0].num_examples
    assert counted == rows


def _dies_at(element: int, marker: str):
    """A Map over 8 elements whose worker process exits with code 3 at ``element`` (as one the kernel kills
    or a native crash ends: no Python exception, nothing answered); ``marker`` keeps it from doing so twice."""
    import apache_beam as beam

    def dies(value):
        if value == element and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
        return value

    return beam.Create(range(8)) | beam.Reshuffle() | beam.Map(dies)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("pooled", [True, False])
def test_a_worker_that_dies_mid_bundle_fails_the_pipeline_naming_it(tmp_path, pooled):
    """Beam's in-process runner, its workers forked from the pool or its own new Pythons: the pipeline fails
    with WorkerLost, which says which worker ended (and, for the pool's, its pid and exit code), where Beam
    alone waits for ever (the next test)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    pool = direct_workers_pooled(ARGS, str(tmp_path / "logs")) if pooled else contextlib.nullcontext()
    with pool, workers_forked(), worker_loss_fails_bundles(), pytest.raises(WorkerLost) as lost, \
            beam.Pipeline(options=PipelineOptions(ARGS)) as pipeline:
        _ = pipeline | _dies_at(5, str(tmp_path / "died"))
    said = str(lost.value)
    assert said.startswith("Beam's SDK worker worker_") and "while the DirectRunner waited on it" in said
    if pooled:
        assert "forked by tfxd's worker pool" in said and "exited with code 3" in said, said
    else:
        assert " ended while" in said, said


# Beam's reading thread ends with the stream's error, which Python reports for the thread
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_beam_alone_leaves_the_runner_waiting_on_a_worker_whose_stream_broke():
    """The judge is Beam's own control servicer and connection (fn_api_runner/worker_handlers.py): a request
    pushed to a worker whose response stream then raises, as gRPC's does once the worker is gone. Beam's
    reading thread ends and the request's future stays unanswered (the hang); mended, it raises WorkerLost,
    and so does a request pushed to that worker later."""
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    class Context:
        def invocation_metadata(self):
            return [("worker_id", "worker_7")]

    def broken():
        raise grpc.RpcError()
        yield  # a generator: it raises at the first read, in Beam's reading thread

    def asked(mended: bool):
        servicer = worker_handlers.BeamFnControlServicer(None)
        with worker_loss_fails_bundles() if mended else contextlib.nullcontext():
            requests = servicer.Control(broken(), Context())
            connection = servicer.get_conn_by_worker_id("worker_7")
            first = connection.push(beam_fn_api_pb2.InstructionRequest())
            assert next(requests).instruction_id == first.instruction_id  # handed on; the reading thread started
            connection._read_thread.join(30)
            assert not connection._read_thread.is_alive()
            return first, connection.push(beam_fn_api_pb2.InstructionRequest())

    first, later = asked(mended=False)
    assert not first.is_done() and first._exception is None and later._exception is None  # waited on for ever
    first, later = asked(mended=True)
    for future in (first, later):
        with pytest.raises(WorkerLost, match="^Beam's SDK worker worker_7 ended while the DirectRunner waited on it$"):
            future.get(timeout=0)
