"""The SDK worker pool of an engine tfxd starts here, or of a cluster's engine beside it (a Spark worker's
host, a TaskManager's pod: docs/data.md): Beam's external worker pool service (BeamFnExternalWorkerPool, the
`--environment_config` of `--environment_type=EXTERNAL`), its workers forked from a process that imported
their libraries once.

Beam's own pool (apache_beam.runners.worker.worker_pool_main) starts every SDK worker as a new
`python -c "...SdkHarness(...).run()"`, and the job server asks for new workers for every job: each one
imports Beam and then, unpickling the job's DoFns, TensorFlow, tf.Transform and TFDV, seconds before its
first bundle, on every component of every run (bench/RESULTS.md, "Beam on Flink and Spark"). Here the pool
process imports them once, while the engine's JVM starts, and forks each worker from itself: a worker is
ready in milliseconds and runs the same SdkHarness with the same arguments Beam's pool gives it.

Two processes, because a process with threads must not fork: the pool process (the one tfxd starts and
watches) imports, forks and reaps, on its main thread alone; the gRPC service runs in a child it forks
first, before anything is imported, and hands it each request over a pipe. The workers are the pool's
children, as Beam's are its pool's: one that ends on its own stays a zombie of the pool, its exit status in
/proc, until the job server stops it (pipeline/run/engine_watch.py reads that); each names itself in
/proc/PID/comm (`sdk <worker id>`), since a fork keeps the pool's command line. (A replay's container
tasks are forked from a preloaded process too, kubeflow/replay/forked_tasks.py: one task at a time, each
waited for, where a pool serves a job's workers at once and keeps them until the job server stops them.)
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import signal
import sys
import time
import traceback

from tfxd import direct_runner, heap
from tfxd.process_table import worker_name

# What the SDK workers of tfxd's components load to run their DoFns, imported once by the pool: Beam's
# harness, TensorFlow, the TFX libraries (tf.Transform, TFDV, TFMA, tfx_bsl) and tfxd's own executors.
PRELOADED = ("apache_beam.runners.worker.sdk_worker", "tensorflow", "tensorflow_transform.beam",
             "tensorflow_data_validation", "tensorflow_model_analysis", "tfx_bsl.public.tfxio",
             "tfxd.components.example_gen.executor", "tfxd.components.transform.executor")
# What Beam's pool gives the workers it starts (worker_pool_main.main, BeamFnExternalWorkerPoolServicer.start)
STATE_CACHE_SIZE, DATA_BUFFER_TIME_LIMIT_MS = 0, -1
STOP_SECONDS = 5  # SIGTERM, then SIGKILL (Beam's pool waits 10 s; an SdkHarness ends at SIGTERM)
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15  # linux/prctl.h


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="tfxd's SDK worker pool for an engine on this host or pod")
    parser.add_argument("--service_port", type=int, required=True)
    args = parser.parse_args(argv)
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    server = os.fork()
    if server == 0:  # the gRPC service, forked before anything with threads is loaded
        os.close(requests_read)
        os.close(replies_write)
        end_with_parent()  # with the pool process, however it ends
        _serve(args.service_port, os.fdopen(requests_write, "w"), os.fdopen(replies_read))
        os._exit(1)
    os.close(requests_write)
    os.close(replies_read)
    _preload()
    workers: dict[str, int] = {}
    with os.fdopen(requests_read) as requests, os.fdopen(replies_write, "w") as replies:
        for line in requests:
            request = json.loads(line)
            try:
                if request["verb"] == "start":
                    workers[request["worker_id"]] = _fork_worker(request, (requests_read, replies_write))
                else:
                    _stop(workers.pop(request["worker_id"], None))
                reply = {}
            except Exception:  # said to the job server, which fails the job with it
                reply = {"error": traceback.format_exc()}
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    for pid in workers.values():  # the service ended: so does the pool, its workers first (as Beam's)
        _stop(pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(server, 0)
    return 1


def _preload() -> None:
    """PRELOADED imported, with no collection meanwhile, and settled (tfxd.heap): each forked worker's
    collections skip what it inherits, and leave those pages shared with the pool."""
    started = time.monotonic()
    with heap.imports_uncollected():
        for name in PRELOADED:
            try:
                importlib.import_module(name)
            except ImportError as error:  # a worker that needs it fails with the same error, where it is used
                print(f"tfxd's SDK worker pool: {name} not preloaded: {error}", file=sys.stderr, flush=True)
    print(f"tfxd's SDK worker pool: libraries loaded in {time.monotonic() - started:.1f} s", file=sys.stderr,
          flush=True)


def _fork_worker(request: dict, pipes: tuple[int, int]) -> int:
    """A worker forked from this process: Beam's SdkHarness, as Beam's pool runs it; its pid."""
    sys.stdout.flush()  # what is buffered would be written again by the worker
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        print(f"tfxd's SDK worker pool: started worker {request['worker_id']} (pid {pid})", file=sys.stderr,
              flush=True)
        return pid
    code = 1
    try:
        _prctl(_PR_SET_NAME, worker_name(request["worker_id"]).encode())
        for fd in pipes:
            os.close(fd)
        if "numpy" in sys.modules:  # Python reseeds `random` in a fork; numpy's global generator it cannot
            sys.modules["numpy"].random.seed()
        from apache_beam.runners.worker.sdk_worker import SdkHarness

        # each bundle ends waiting out its state sampler's sleep, as in the in-process runner (what that
        # cost a worker: sampler_wakes_often's docstring)
        with direct_runner.sampler_wakes_often():
            SdkHarness(request["control"], worker_id=request["worker_id"], state_cache_size=STATE_CACHE_SIZE,
                       data_buffer_time_limit_ms=DATA_BUFFER_TIME_LIMIT_MS).run()
        code = 0
    except BaseException:  # the worker's end, whatever it was, in the pool's log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _stop(pid: int | None) -> None:
    """SIGTERM to a worker, SIGKILL if it outlives STOP_SECONDS; reaped either way."""
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    try:
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):  # reaped already
        return


# looked up at import, not in a forked child: a child of a process with threads must not load libraries
_LIBC_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def _prctl(option: int, value: int | bytes) -> None:
    if _LIBC_PRCTL is not None:
        _LIBC_PRCTL(option, value)


# A program run through this asks for the death signal and becomes the program (execv) with it, its pid kept:
# no code runs in a forked copy of tfxd. A child that runs Python after fork() (subprocess's preexec_fn)
# runs the at-fork handlers of what tfxd loaded: gRPC's, once a Beam job has run in the process, aborted
# the child while resetting its poller (SIGABRT, "Epoll1Poller ... epoll_wait error: Bad file descriptor",
# 2026-12-05: the second engine a test process started). A parent already gone by the prctl is not waited
# for: the program is not run.
_EXEC_ENDING_WITH_PARENT = ("import ctypes, os, signal, sys; "
                            f"getattr(ctypes.CDLL(None), 'prctl', lambda *a: 0)({_PR_SET_PDEATHSIG}, signal.SIGKILL); "
                            "os.getppid() == int(sys.argv[1]) or os._exit(1); "
                            "os.execv(sys.argv[2], sys.argv[2:])")


def ending_with_parent(command: list[str]) -> list[str]:
    """``command`` run so that it gets SIGKILL when the thread that started it ends (end_with_parent), as
    the same process (Python, without site, the prctl, then an execv), started from this process."""
    return [sys.executable, "-I", "-S", "-c", _EXEC_ENDING_WITH_PARENT, str(os.getpid()), *command]


def end_with_parent() -> None:
    """In a child (before it runs what it was started for): SIGKILL when the thread that started it ends
    (Linux's PR_SET_PDEATHSIG), so that what tfxd started goes with it even when tfxd is killed outright:
    the engine's processes (pipeline/run/beam_engine.py) and the pool's gRPC service. The SDK workers, the
    pool's children, end on their own once the job server's connection is gone."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _serve(port: int, requests, replies) -> None:
    """Beam's worker pool service on ``port``, each call handed to the pool process."""
    import threading

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
    from apache_beam.utils import thread_pool_executor

    lock = threading.Lock()

    def ask(request: dict) -> str | None:
        with lock:
            requests.write(json.dumps(request) + "\n")
            requests.flush()
            line = replies.readline()
        if not line:
            raise RuntimeError("tfxd's SDK worker pool ended")
        return json.loads(line).get("error")

    class Pool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
        def StartWorker(self, request, context):  # noqa: N802  # gRPC's name
            error = ask({"verb": "start", "worker_id": request.worker_id, "control": request.control_endpoint.url})
            return beam_fn_api_pb2.StartWorkerResponse(error=error or "")

        def StopWorker(self, request, context):  # noqa: N802
            error = ask({"verb": "stop", "worker_id": request.worker_id})
            return beam_fn_api_pb2.StopWorkerResponse(error=error or "")

    server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                         options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)])
    server.add_insecure_port(f"127.0.0.1:{port}")  # the engine on this host (or pod) is its only client
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(Pool(), server)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    sys.exit(main())
