"""A watch on the engine tfxd started for a run, while the run uses it: what Beam itself does not notice, or
does not say in a user's words.

- An SDK worker that ends before it connects leaves Beam's job server waiting for it for ever: Beam's
  ExternalEnvironmentFactory.createEnvironment (runners/java-fn-execution) asks the worker pool for a worker,
  then takes the worker's control client in a loop that only logs "Still waiting for startup of
  environment" every two minutes. tfxd's worker pool (pipeline/run/sdk_worker_pool.py), as Beam's
  (apache_beam.runners.worker.worker_pool_main), reaps a worker only when the job server stops it
  (StopWorker), so a worker that ended on its own stays a zombie child of the pool, its exit status and its
  name (`sdk <worker id>`) readable in /proc. Still there after STRANDED_SECONDS, with a job running, the
  watch cancels the engine's running jobs through Beam's job service; the component's Beam pipeline then
  fails ("failed in state CANCELLED") instead of hanging.
- The job server or the worker pool ending during the run (killed, out of memory): the watch says which and
  how. Without it the component fails with a gRPC error about an unavailable endpoint, or, when the job
  server ended between two jobs, waits for it to come back (Beam's ExternalJobServer waits
  `job_server_timeout`, 5 minutes by default, for the endpoint to be ready). So on the dead job server's
  port the watch answers every call itself with what happened (a gRPC server that only refuses): the
  component waiting there, and any after it, fails at once.

What it saw (``fault``) is the run's account of the failure.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from tfxd import stops
from tfxd.process_table import WORKER_NAME, children, returncode

POLL_SECONDS = 0.2  # a dead worker is seen before the job server, failing its job, stops it (and it is reaped)
# A worker ended by SIGTERM, as StopWorker ends one, or with exit code 0, as one does once the job server
# closed its control stream (Beam's RemoteEnvironment.close, just before StopWorker), that the pool has not
# reaped this long after was not stopped by the job server (StopWorker reaps at once): it ended on its own.
# Any other end is seen at once.
UNREAPED_SECONDS = 2.0
# Then a job still running this long after: Beam did not notice (it fails a job whose connected worker dies
# within seconds), so it waits for a worker that will never connect.
STRANDED_SECONDS = 10.0
_LIVE_JOB_STATES = ("STARTING", "RUNNING", "STOPPED")  # beam_job_api_pb2.JobState's names


def cancel_running_jobs(endpoint: str, saying: Callable[[], None] | None = None) -> list[str]:
    """Cancel every job of the job server at ``endpoint`` that has not ended; their ids. ``saying`` runs
    before the first is cancelled: the job's client, seeing CANCELLED at once, reads what was said."""
    from apache_beam.portability.api import (  # start-up: Beam, once asked
        beam_job_api_pb2,
        beam_job_api_pb2_grpc,
    )

    cancelled: list[str] = []
    with grpc.insecure_channel(endpoint) as channel:
        stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
        for job in stub.GetJobs(beam_job_api_pb2.GetJobsRequest(), timeout=10).job_info:
            if beam_job_api_pb2.JobState.Enum.Name(job.state) in _LIVE_JOB_STATES:
                if saying is not None and not cancelled:
                    saying()
                stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=job.job_id), timeout=10)
                cancelled.append(job.job_id)
    return cancelled


def refusing_server(endpoint: str, why: str) -> grpc.Server | None:
    """A gRPC server at ``endpoint`` (a port whose server ended) that fails every call with ``why``; None
    when the port is taken again."""

    def refuse(request: bytes, context: grpc.ServicerContext) -> None:
        context.abort(grpc.StatusCode.UNAVAILABLE, why)

    class Refuse(grpc.GenericRpcHandler):
        def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(refuse)

    # never beside another server on the port (gRPC's default SO_REUSEPORT would allow that)
    server = grpc.server(ThreadPoolExecutor(max_workers=2), handlers=[Refuse()], options=[("grpc.so_reuseport", 0)])
    try:
        if not server.add_insecure_port(endpoint):
            return None
    except RuntimeError:  # grpc raises where it cannot bind, in its newer releases
        return None
    server.start()
    return server


class EngineWatch:
    """Watches ``processes`` (name, process: the job server, and the worker pool when tfxd started one) and
    the pool's SDK workers from a thread of its own, from start() to stop()."""

    def __init__(self, title: str, processes: list[tuple[str, subprocess.Popen]], pool: subprocess.Popen | None,
                 job_endpoint: str) -> None:
        self.title = title
        self.processes = processes
        self.pool = pool
        self.job_endpoint = job_endpoint
        self._faults: list[str] = []
        self._unreaped: dict[int, float] = {}  # pid of an ended worker -> when the watch saw it ended
        self._ended: set[str] = set()  # the processes (by name) whose end was said
        self._reported: set[int] = set()  # the ended workers (by pid) said
        self._stranded: set[int] = set()  # the ended workers (by pid) whose jobs were cancelled
        self._refuser: grpc.Server | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"tfxd-{title.lower()}-watch", daemon=True)

    @property
    def fault(self) -> str | None:
        """What went wrong with the engine, in a user's words; None while nothing did."""
        return "; ".join(self._faults) or None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (before the engine is stopped: its processes ending then is no fault); one last look
        first, so that what ended just before the run failed is said."""
        if self._thread.is_alive():
            self._stopping.set()
            self._thread.join()
        self._look(time.monotonic())
        if self._refuser is not None:
            self._refuser.stop(grace=None)

    def _loop(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            self._look(time.monotonic())

    def _look(self, now: float) -> None:
        with contextlib.suppress(Exception):  # a watch never fails the run it watches
            self._look_at_processes()
            if self.pool is not None:
                self._look_at_workers(now)

    def _look_at_processes(self) -> None:
        for name, process in self.processes:
            if process.poll() is not None and name not in self._ended:
                self._ended.add(name)
                self._faults.append(f"{name} {stops.ended(process.returncode)} while the run used it")
                if process is self.pool:
                    cancel_running_jobs(self.job_endpoint)  # the job server cannot get new workers: end its jobs now
                else:
                    self._refuser = refusing_server(self.job_endpoint, self._faults[-1])

    def _look_at_workers(self, now: float) -> None:
        assert self.pool is not None
        for pid, (state, name, status) in children(self.pool.pid).items():
            if state != "Z" or not name.startswith(WORKER_NAME):  # not the pool's gRPC service, reaped by the pool
                continue
            ended = self._unreaped.setdefault(pid, now)
            stopped = returncode(status) in (0, -signal.SIGTERM)  # as a job's end ends a worker, before StopWorker
            if pid not in self._reported and (not stopped or now - ended >= UNREAPED_SECONDS):
                self._reported.add(pid)
                worker_id = name[len(WORKER_NAME):]
                self._faults.append(f"an SDK worker (worker id {worker_id}, pid {pid}) "
                                    f"{stops.ended(returncode(status))}")
            # once per worker: it stays a zombie of the pool, and later jobs are not its
            if now - ended >= STRANDED_SECONDS and pid not in self._stranded:
                self._stranded.add(pid)
                cancel_running_jobs(self.job_endpoint, lambda: self._faults.append(
                    f"{self.title} kept waiting for that worker to connect, so tfxd cancelled its job"))
