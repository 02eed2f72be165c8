"""Beam's DirectRunner as tfxd runs it, wherever a Beam pipeline is made (a run's components, a
component's own pipelines such as the drift statistics, the tests and benches that build executors),
and what tfxd does to Beam's cost per transform it builds and per stage it runs (option_views_remembered,
signatures_remembered, dofn_specs_remembered, state_cache_off, sampler_wakes_often, compressions_remembered,
workers_forked, worker_loss_fails_bundles: patches of tfxd.patches), for a whole local run (beam_mended) and
for each of tfxd's Beam executors wherever it runs (BeamMendedExecutor); how many workers its arguments
give (parallel_workers).

Three flags a user of TFX and Beam 2.74 would otherwise not know to pass:
- TFX builds and stages an sdist of itself for Beam unless one of its dependency flags is set
  (tfx.utils.dependency_utils.make_beam_dependency_flags), for every Beam executor, into a temporary
  folder it never removes. The DirectRunner stages nothing, so the flag only stops that work.
- Beam 2.74's DirectRunner first hands every pipeline to the Prism runner, a Go binary it downloads from
  GitHub: offline a failed download, up to seconds a pipeline and temporary folders left behind; online
  another engine than the one tfxd sizes. It skips Prism for a pipeline pinned to an update compatibility
  version: pinning Beam's own version changes no transform (none is "prior to" it).
- Beam waits for its worker processes to exit one after the other when a pipeline ends, and each spends
  its exit in Python's last garbage collections over everything it imported: a Beam plugin
  (tfxd.quick_exit, imported by each worker at its start) has them skipped.
"""

from __future__ import annotations

import bz2
import collections
import contextlib
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from tfxd import heap, patches, process_table, stops
from tfxd.beam_engines import WORKER_POOL_ENV, runner_named

NO_STAGING = "--sdk_container_image=none-needed-by-the-direct-runner"
QUICK_EXIT = "--beam_plugin=tfxd.quick_exit"  # imported by each worker process Beam starts


def _no_prism() -> str:
    from importlib.metadata import version

    return f"--update_compatibility_version={version('apache-beam')}"


def running_mode(mode: str) -> str:
    """The flag that puts the DirectRunner in ``mode`` (in_memory, multi_threading, multi_processing)."""
    return f"--direct_running_mode={mode}"


def direct_args(mode: str, workers: int) -> list[str]:
    """The DirectRunner in ``mode`` (in_memory, multi_processing) with ``workers`` (0: one per CPU)."""
    return ["--runner=DirectRunner", running_mode(mode), f"--direct_num_workers={workers}",
            NO_STAGING, _no_prism(), QUICK_EXIT]


def parallel_workers(args: list[str]) -> int:
    """How many workers the DirectRunner spreads a stage over with these pipeline arguments: its
    multi_processing processes or multi_threading threads (0: one per CPU), else 1 (in_memory, or a runner
    that is not the DirectRunner, whose parallelism is the engine's own)."""
    import os

    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

    options = PipelineOptions(args)
    runner = runner_named(options.view_as(StandardOptions).runner or "DirectRunner")  # Beam's default
    if runner is None or not runner.in_process:
        return 1
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode not in ("multi_processing", "multi_threading"):
        return 1
    return direct.direct_num_workers or os.cpu_count() or 1


@contextlib.contextmanager
def signatures_remembered() -> Iterator[None]:
    """Beam's in-process runner read each function's signature once instead of thousands of times (patch
    beam.signatures_remembered).

    A function's parameters and their defaults are fixed when it is defined, so the arguments Beam reads
    from them (core.get_function_args_defaults) are remembered per function, and per method for its
    functions; anything else (a class, a partial, a builtin) is asked afresh. Held weakly: a function Beam
    drops is forgotten with it."""
    from apache_beam.transforms import core  # Beam loads lazily: this module is on validate's path

    original = core.get_function_args_defaults
    functions: weakref.WeakKeyDictionary[Any, tuple[list[str], list[Any]]] = weakref.WeakKeyDictionary()
    methods: weakref.WeakKeyDictionary[Any, tuple[list[str], list[Any]]] = weakref.WeakKeyDictionary()

    def remembered(f: Any) -> tuple[list[str], list[Any]]:
        if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
            known, key = methods, f.__func__  # a bound method: its function less the bound first argument
        elif isinstance(f, types.FunctionType):
            known, key = functions, f
        else:
            return original(f)
        if key not in known:
            known[key] = original(f)
        args, defaults = known[key]
        return list(args), list(defaults)

    with patches.applied("beam.signatures_remembered", remembered):
        yield


@contextlib.contextmanager
def dofn_specs_remembered() -> Iterator[None]:
    """Beam's state and timer specs of a DoFn read once per DoFn, not at every ask (patch
    beam.dofn_specs_remembered).

    Beam reads them (userstate.get_dofn_specs: every method of the DoFn wrapped and its parameters read) as
    a ParDo is made, as it is turned into its proto, and three times more as a stage builds its DoFn's
    signature (apache_beam/runners/common.py, DoFnSignature): a taxi run asked 3,544 times about 775 DoFns,
    0.75 s. An answer is kept for the DoFn it was given for (by identity, held weakly) while its class and
    its attributes are what they were then (the same objects, by identity: nothing of them is held, so a
    DoFn and what it holds are freed as before); a DoFn without attributes of its own, or that cannot be
    held weakly, is asked afresh, as is one whose reading fails."""
    # Beam loads lazily: this module is on validate's path
    from apache_beam.transforms import userstate

    original = userstate.get_dofn_specs
    known: dict[int, tuple[Any, type, tuple[tuple[str, int], ...], tuple[Any, Any]]] = {}

    def remembered(dofn: Any) -> tuple[set[Any], set[Any]]:
        attributes = getattr(dofn, "__dict__", None)
        if not isinstance(attributes, dict):
            return original(dofn)
        identity = tuple((name, id(value)) for name, value in attributes.items())
        key = id(dofn)
        found = known.get(key)
        if not (found and found[0]() is dofn and found[1] is type(dofn) and found[2] == identity):
            try:
                held = weakref.ref(dofn, lambda _: known.pop(key, None))
            except TypeError:
                return original(dofn)
            found = known[key] = (held, type(dofn), identity, original(dofn))
        states, timers = found[3]
        return set(states), set(timers)

    with patches.applied("beam.dofn_specs_remembered", remembered):
        yield


@contextlib.contextmanager
def option_views_remembered() -> Iterator[None]:
    """Beam's views of a pipeline's options made once per options object and view class, not at every ask
    (patch beam.option_views_remembered).

    A view holds no values of its own: it reads and writes the options object's shared dictionary
    (view._all_options), initialized from the arguments the first time a view of that class is made, so a
    view made again is the same as the one remembered. Remembered while the options object keeps that
    dictionary and those arguments (held weakly: options Beam drops are forgotten)."""
    # Beam loads lazily: this module is on validate's path
    from apache_beam.options import pipeline_options

    original = pipeline_options.PipelineOptions.view_as
    views: weakref.WeakKeyDictionary[Any, dict[type, Any]] = weakref.WeakKeyDictionary()

    def view_as(options: Any, cls: type) -> Any:
        known = views.setdefault(options, {})
        view = known.get(cls)
        if view is None or view._all_options is not options._all_options or view._flags is not options._flags:
            view = known[cls] = original(options, cls)
        return view

    with patches.applied("beam.option_views_remembered", view_as):
        yield


@contextlib.contextmanager
def state_cache_off(args: list[Any]) -> Iterator[None]:
    """For a run whose pipelines run in memory (``args``, the pipeline's Beam arguments): Beam's in-process
    runner keeps no state cache (patch beam.state_cache_off; Beam's own tests run without it). Worker
    processes (multi_processing) keep theirs."""
    if not any(isinstance(arg, str) and arg == running_mode("in_memory") for arg in args):  # str ==: a TFX
        yield  # placeholder's == is a predicate, not a comparison
        return
    with patches.applied("beam.state_cache_off", 0):
        yield


class _Remembered:
    """The answers of ``work`` (a function of its bytes alone) remembered per bytes asked about, those used
    last kept while the bytes held (asked and answered) stay within ``limit``; an answer whose bytes would
    take more than a tenth of it is not kept (a pickled DoFn holding a large object is compressed each
    time, as before, and not held on to). Locked: Beam's multi_threading mode pickles on several threads."""

    def __init__(self, work: Callable[[bytes], bytes], limit: int) -> None:
        self._work, self._limit, self.held = work, limit, 0
        self._known: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> bytes:
        with self._lock:
            answer = self._known.get(data)
            if answer is not None:
                self._known.move_to_end(data)
                return answer
        answer = self._work(data)
        size = len(data) + len(answer)
        if size <= self._limit // 10:
            with self._lock:
                if data not in self._known:
                    self._known[data], self.held = answer, self.held + size
                while self.held > self._limit:
                    old, old_answer = self._known.popitem(last=False)
                    self.held -= len(old) + len(old_answer)
        return answer


class _Bz2Remembered:
    """bz2 as Beam's pickler calls it (compress at its level 9, decompress), each answer remembered."""

    def __init__(self, limit: int) -> None:
        self._compressed = _Remembered(lambda data: bz2.compress(data, 9), limit)
        self.decompress = _Remembered(bz2.decompress, limit)

    def compress(self, data: bytes, compresslevel: int = 9) -> bytes:
        return self._compressed(data) if compresslevel == 9 else bz2.compress(data, compresslevel)


# the bytes remembered of each kind: a taxi run's pipelines compress 513 distinct payloads in 1,184 calls,
# 1.6 MB in all
REMEMBERED_BYTES = 64 << 20


@contextlib.contextmanager
def compressions_remembered() -> Iterator[None]:
    """Beam's pickler compresses and decompresses each payload once (patch beam.compressions_remembered).

    Every function, DoFn and coder Beam puts in a pipeline is pickled and compressed with bz2 at its
    strongest (apache_beam/internal/cloudpickle_pickler.py, dumps and loads), as each pipeline is turned
    into its protos and again as the runner builds the stages that run it: a taxi run compressed the same
    bytes again 671 times of 1,184 and decompressed the same 1,402 times of 1,835, 0.5-0.6 s of bz2. The
    payloads are the same bytes bz2 gives; only the work done again is skipped."""
    with patches.applied("beam.compressions_remembered", _Bz2Remembered(REMEMBERED_BYTES)):
        yield


# The longest sleep of the thread that samples a bundle's state (Beam's default: 200 ms)
SAMPLER_PERIOD_MS = 5


@contextlib.contextmanager
def sampler_wakes_often() -> Iterator[None]:
    """The state samplers of the bundles the in-process runner runs, and those of the SDK workers tfxd's
    pool forks (pipeline/run/sdk_worker_pool.py: the DirectRunner's worker processes, a local Flink's or
    Spark's), sleep at most SAMPLER_PERIOD_MS (patch beam.sampler_wakes_often).

    Each bundle starts a thread that samples which transform is running, sleeping 2 ms, then 1.2 times
    longer each time up to 200 ms; the bundle ends by joining it, so it waits out the sleep under way,
    on average a tenth of the bundle's time (apache_beam/runners/worker/statesampler_fast.pyx, run and
    stop). Measured on a local taxi run's 124 bundles: 0.57 s in those joins, 0.11 s with 5 ms; on a run to
    Transform of 500,000 rows, its SDK workers' 182 bundles (DirectRunner, 2 workers) 1.6 s, and 190 on
    Flink 3.2 s (0.6 s with 5 ms). The samples are the same kind, taken more often, and counted as before
    (ScopedState's time)."""
    # start-up: Beam loads lazily, and this module is on validate's path
    from apache_beam.runners.worker import statesampler

    original = statesampler.StateSampler.__init__

    def sampling_often(sampler: Any, prefix: str, counter_factory: Any,
                       sampling_period_ms: int = SAMPLER_PERIOD_MS) -> None:
        original(sampler, prefix, counter_factory, sampling_period_ms)

    with patches.applied("beam.sampler_wakes_often", sampling_often):
        yield


# The command Beam's in-process runner starts each of its worker processes with (multi_processing mode:
# apache_beam/runners/portability/fn_api_runner/fn_runner.py, FnApiRunner.run_pipeline)
SDK_WORKER_COMMAND = "{python} -m apache_beam.runners.worker.sdk_worker_main"


@contextlib.contextmanager
def workers_forked() -> Iterator[None]:
    """Where a run has started tfxd's SDK worker pool (its address in WORKER_POOL_ENV), the in-process
    runner's worker processes are the pool's, forked with their libraries loaded, instead of new Pythons
    (patch beam.direct_workers_forked).

    In multi_processing mode the runner starts every worker of every pipeline as
    `python -m apache_beam.runners.worker.sdk_worker_main`, which imports Beam and then, unpickling the
    stage's DoFns, TensorFlow and TFDV, tf.Transform or TFMA: seconds of imports per component before its
    first bundle, on both of a 2-core machine's cores (200,000 taxi rows, 2 workers: StatisticsGen 9.4 s,
    Transform 12.5 s; forked from the pool, 3.8 s and 7.0 s). The runner's own external environment
    (worker_handlers.ExternalWorkerHandler) asks the pool for each worker instead, as Flink's and Spark's
    job servers do; the workers, the bundles and the runner are otherwise Beam's. Without a pool, Beam's."""
    import os
    import sys

    # start-up: Beam loads lazily, and this module is on validate's path
    from apache_beam.transforms import environments

    original = environments.SubprocessSDKEnvironment.from_command_string

    def from_command_string(cls: Any, command_string: str) -> Any:
        pool = os.environ.get(WORKER_POOL_ENV)
        if pool and command_string == SDK_WORKER_COMMAND.format(python=sys.executable):
            return environments.ExternalEnvironment(pool, capabilities=environments.python_sdk_capabilities())
        return original(command_string)

    with patches.applied("beam.direct_workers_forked", classmethod(from_command_string)):
        yield


# How long the exit status of a worker whose control stream broke is looked for: a process's sockets close as
# it exits, moments before /proc shows it ended
LOST_WORKER_SECONDS = 1.0


class WorkerLost(RuntimeError):
    """An SDK worker of the in-process runner ended while the runner waited on it."""


@contextlib.contextmanager
def worker_loss_fails_bundles() -> Iterator[None]:
    """A worker process that ends while the in-process runner waits on it (a bundle, a progress request)
    fails what it waited for, saying which worker ended and how (patch beam.worker_loss_fails_bundles).

    In multi_processing mode the runner hands each worker its requests over the worker's control stream and
    waits for each response on a future; a thread reads the responses
    (fn_api_runner/worker_handlers.py, ControlConnection._read). A worker that dies (out of memory, a
    crash in native code, os._exit) breaks that stream: the thread ends with gRPC's error and no future is
    ever answered, so the run waits for ever, Beam's own workers' and the pool's alike. Here the responses
    are read through a watch that, once the stream broke or ended with requests unanswered, fails those
    requests and any later one to that worker with WorkerLost (Beam's own ControlFuture.abort, which
    raises it where the runner waits), and a bundle that failed on the worker's broken data stream fails
    with it too: the bundle, then the pipeline and the component fail with it."""
    # start-up: Beam loads lazily, and this module is on validate's path
    from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers

    watch = _WorkerWatch(worker_handlers.BeamFnControlServicer.Control, worker_handlers.ControlConnection.push,
                         fn_runner.BundleManager.process_bundle)
    # functions, as Beam's are, so that each is bound to the servicer, connection or manager it is read from
    with patches.applied("beam.worker_loss_fails_bundles", lambda *call: watch.control(*call), "Control"), \
            patches.applied("beam.worker_loss_fails_bundles", lambda *call: watch.push(*call), "push"), \
            patches.applied("beam.worker_loss_fails_bundles", lambda *call, **named: watch.process_bundle(
                *call, **named), "process_bundle"):
        yield


class _WorkerWatch:
    """Beam's control servicer's Control, its connections' push and its bundle manager's process_bundle
    (given as Beam has them), each watching for a worker whose stream ended."""

    def __init__(self, control: Any, push: Any, process_bundle: Any) -> None:
        self._control, self._push, self._process_bundle = control, push, process_bundle
        # a connection whose stream ended -> (its worker, gRPC's error); what it says once asked
        self._ended: weakref.WeakKeyDictionary[Any, tuple[str, Exception | None]] = weakref.WeakKeyDictionary()
        self._said: weakref.WeakKeyDictionary[Any, WorkerLost] = weakref.WeakKeyDictionary()

    def _lost(self, connection: Any) -> WorkerLost:
        if connection not in self._said:
            self._said[connection] = WorkerLost(_lost_worker(*self._ended[connection]))
        return self._said[connection]

    def _watched(self, responses: Any, worker_id: str, connection: Any) -> Iterator[Any]:
        broke: Exception | None = None
        try:
            yield from responses
        except Exception as error:  # gRPC's, for a stream whose worker is gone (or that the runner closed)
            broke = error
        self._ended[connection] = (worker_id, broke)
        if connection._futures_by_id:  # noqa: SLF001 - requests unanswered: the worker is gone
            connection.abort(self._lost(connection))  # Beam's own: every request waited on raises it

    def control(self, servicer: Any, responses: Any, context: Any) -> Any:
        worker_id = dict(context.invocation_metadata()).get("worker_id")
        if worker_id:
            responses = self._watched(responses, worker_id, servicer.get_conn_by_worker_id(worker_id))
        return self._control(servicer, responses, context)

    def push(self, connection: Any, request: Any) -> Any:
        future = self._push(connection, request)
        if future is not None and connection in self._ended:  # to a worker whose stream ended: failed at once
            connection.abort(self._lost(connection))
        return future

    def process_bundle(self, manager: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._process_bundle(manager, *args, **kwargs)
        except Exception as error:
            connection = getattr(manager._worker_handler, "control_conn", None)  # noqa: SLF001 - the bundle's worker
            # the runner reads a bundle's outputs on the worker's data stream, which can break first (Beam's
            # data_plane.py, input_elements: "Channel closed prematurely."); its control stream's end follows
            closed = isinstance(error, RuntimeError) and "Channel closed prematurely" in str(error)
            deadline = time.monotonic() + (LOST_WORKER_SECONDS if closed else 0)
            while connection not in self._ended and time.monotonic() < deadline:
                time.sleep(0.05)
            if isinstance(error, WorkerLost) or connection not in self._ended:
                raise
            raise self._lost(connection) from error


def _lost_worker(worker_id: str, broke: Exception | None) -> str:
    """What a WorkerLost says: the worker, how it ended (where it is a worker of tfxd's pool, which keeps
    it unreaped), and what its control stream said."""
    ended = process_table.ended_worker(worker_id, LOST_WORKER_SECONDS)
    if ended is not None:
        how = f"(pid {ended[0]}, forked by tfxd's worker pool: the run's logs/sdk-workers.log) {stops.ended(ended[1])}"
    else:  # Beam's own worker process, a child of its shell: its stream broke, or closed with requests unanswered
        how = "ended"
    said = str(broke or "").strip()
    return f"Beam's SDK worker {worker_id} {how} while the DirectRunner waited on it" + (f": {said}" if said else "")


@contextlib.contextmanager
def beam_mended(args: list[Any]) -> Iterator[None]:
    """Beam's cost per transform and per stage mended in the block, for pipelines made with ``args``:
    signatures read once, a DoFn's specs read once, option views made once, no state cache in memory,
    bundles that end without waiting out their state sampler's sleep, payloads compressed once, worker
    processes forked from tfxd's pool where a run started one, a worker process that ends while the runner
    waits on it failing what the runner waited for."""
    with signatures_remembered(), dofn_specs_remembered(), option_views_remembered(), state_cache_off(args), \
            sampler_wakes_often(), compressions_remembered(), workers_forked(), worker_loss_fails_bundles():
        yield


class BeamMendedExecutor:
    """A TFX Beam executor mixin (first in the bases): Beam mended (beam_mended, with the executor's own
    Beam arguments) while the executor runs, and the process's imports settled (tfxd.heap). A local run
    mends Beam for all of its components already; a Kubeflow or Vertex task runs TFX's own entrypoint,
    which does not, and neither does anything else that calls an executor's Do."""

    _beam_pipeline_args: list[Any]  # tfx's BaseBeamExecutor sets them

    def Do(self, input_dict: Any, output_dict: Any, exec_properties: Any) -> Any:  # noqa: N802 - TFX's name
        heap.settle()  # what the task imported, kept out of full collections (tfxd.heap)
        with beam_mended(self._beam_pipeline_args):
            return super().Do(input_dict, output_dict, exec_properties)  # type: ignore[misc]
