"""`tfxd run`: the spec's pipeline on LocalDagRunner with SQLite ML Metadata, a line per component,
TensorFlow/Beam/absl chatter in a log file, and summary.json at the end."""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import pkgutil
import sys
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import absl.logging

from tfxd import buckets, console, direct_runner, heap, keys, patches, stops, tf_env
from tfxd.beam_engines import RUNNERS
from tfxd.files import join, local_state, write_json
from tfxd.pipeline.assembly.beam_args import pipeline_beam_args
from tfxd.pipeline.report import html as report
from tfxd.pipeline.run import beam_engine, history, lock, metadata, unfinished
from tfxd.pipeline.run.outcome import (
    GateStop,
    RunFailed,
    RunInterrupted,
    disk_full,
    gate_stop,
    new_run_id,
    root_cause,
    shortened,
    with_gate_stop,
)
from tfxd.pipeline.spec.base import COMPONENTS
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.run_summary import SKIPPED, LocalRun, run_status

# what LocalDagRunner and BeamDagRunner log around each node, and TFX's launcher for a node whose condition
# is false (with spans and nothing new, every component after ExampleGen: pipeline/assembly/dag.py)
_RUNNING = ("Component %s is running.", "node %s is running.")
_FINISHED = ("Component %s is finished.", "node %s is finished.")
_SKIPPING = "Skipping execution for %s"


@dataclass
class RunPaths:
    root: str
    run_id: str

    @property
    def run_dir(self) -> str:
        return join(self.root, "runs", self.run_id)

    @property
    def log(self) -> str:
        """Written line by line as the run goes, so on a local disk: in the root's runs/, or a bucket root's
        local state folder (tfxd.files.local_state), whence it is published beside the summary at the end."""
        return os.path.join(local_state(self.root), "runs", self.run_id, "logs", "run.log")

    @property
    def published_log(self) -> str:
        return join(self.run_dir, "logs", "run.log")

    @property
    def summary(self) -> str:
        return join(self.run_dir, "summary.json")

    @property
    def report(self) -> str:
        return join(self.run_dir, "report.html")

    def publish_log(self) -> None:
        """A bucket root's copy of the log, as it stands when the run ends (a local root's is the log)."""
        if self.published_log == self.log:
            return
        from tfx.dsl.io import fileio

        try:
            fileio.copy(self.log, self.published_log, overwrite=True)
        except Exception:  # noqa: BLE001 - the run's own outcome matters more; the local log stays
            logging.exception("the log could not be copied to %s", self.published_log)
            console.warn(f"the log could not be copied to {self.published_log}; it is at {self.log}")


class _Progress(logging.Handler):
    """Turns the runner's 'X is running/finished' log lines into console lines."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.started: dict[str, float] = {}
        self.current: str | None = None
        self.skipped: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg not in (*_RUNNING, *_FINISHED, _SKIPPING) or not isinstance(record.args, tuple) or not record.args:
            return  # TFX logs the component's id as the first of its arguments
        name = str(record.args[0])
        if name not in COMPONENTS:
            return  # the baseline resolver is bookkeeping, not a step the user asked for
        if record.msg in _RUNNING:
            self.current = name
            self.started[name] = time.monotonic()
        elif record.msg == _SKIPPING:
            self.skipped.add(name)
        elif name in self.skipped:
            console.info(f"- {name} skipped: no new data")
            self.current = None
        else:
            console.success(f"{name} ({time.monotonic() - self.started.get(name, time.monotonic()):.1f} s)")
            self.current = None
        if record.msg in _RUNNING:
            console.step(f"{name} ...")


def _importable(folder: str) -> None:
    """The user's own code beside the spec (preprocessing_fn, model builders, callbacks) imports by
    dotted path, here and in Beam's worker processes."""
    if folder not in sys.path:
        sys.path.insert(0, folder)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *paths])


# What a run imports once its engine or worker pool is starting (TFX, TensorFlow, Beam, tfxd's components),
# so that the two overlap: the engine's JVM, or the pool's imports, on the other core (bench/RESULTS.md);
# the orchestrator's runner alone (TFX's BeamDagRunner imports its legacy Docker launcher too): its class,
# module:name, is what _runner makes
_LIBRARIES = ("tfxd.pipeline.assembly.dag", "tfxd.pipeline.run.records")
_RUNNERS = {"local": "tfx.orchestration.local.local_dag_runner:LocalDagRunner",
            "beam": "tfx.orchestration.beam.beam_dag_runner:BeamDagRunner"}


def _libraries_imported(orchestrator: str) -> None:
    """_LIBRARIES and the ``orchestrator``'s runner imported (beam_engine.started's ``meanwhile``)."""
    for name in (_RUNNERS[orchestrator].partition(":")[0], *_LIBRARIES):
        importlib.import_module(name)


def _runner(orchestrator: str):
    """LocalDagRunner runs the nodes one after the other; BeamDagRunner runs them as a Beam pipeline,
    so that independent branches (e.g. ExampleValidator beside Transform when the gate is off) can run
    side by side."""
    return pkgutil.resolve_name(_RUNNERS[orchestrator])()  # imported by _libraries_imported


@contextlib.contextmanager
def _orchestrator_pinned(orchestrator: str) -> Iterator[None]:
    """For the run, TFX's BeamDagRunner's ``beam`` is Beam with its pipelines made with tfxd's DirectRunner
    flags (tfxd.direct_runner), in memory as Beam's default (patch tfx.orchestrator_pinned); the
    components' own pipelines, made in their modules, are theirs."""
    if orchestrator != "beam":
        yield
        return
    import apache_beam
    from apache_beam.options.pipeline_options import PipelineOptions

    class PinnedBeam(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            return getattr(apache_beam, name)

        @staticmethod
        def Pipeline(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - Beam's name
            options = PipelineOptions(direct_runner.direct_args("in_memory", 1))
            return apache_beam.Pipeline(*args, **{"options": options, **kwargs})

    with patches.applied("tfx.orchestrator_pinned", PinnedBeam("apache_beam")):
        yield


@contextlib.contextmanager
def _command_line_for_tfx():
    """TFX's Beam executors see the program's name alone on its command line, not tfxd's arguments (patch
    tfx.command_line)."""
    with patches.applied("tfx.command_line", sys.argv[:1]):
        yield


@contextlib.contextmanager
def libraries_mended(tfx: Any, orchestrator: str) -> Iterator[None]:
    """What a run mends in TFX and Beam while its pipeline ``tfx`` runs on ``orchestrator``, and puts back
    after (tfxd.patches): Beam's cost per transform and per stage in this process's pipelines, the command
    line TFX's executors read, the orchestrator's own pipeline."""
    with (direct_runner.beam_mended(tfx.beam_pipeline_args), _command_line_for_tfx(),
          _orchestrator_pinned(orchestrator)):
        yield


def _route_logs(paths: RunPaths, verbose: bool, progress: logging.Handler) -> None:
    """Everything TensorFlow, Beam and absl say goes to the run's log (and to the terminal with -v)."""
    os.makedirs(os.path.dirname(paths.log), exist_ok=True)
    console.keep_terminal()
    log_file = open(paths.log, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    if not verbose:
        os.dup2(log_file.fileno(), 2)  # C++ logs and worker processes write to fd 2 directly
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    file_handler = logging.StreamHandler(log_file)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    if verbose:
        root.addHandler(logging.StreamHandler(console.err.file))
    root.addHandler(progress)
    root.setLevel(logging.INFO)
    absl.logging.set_verbosity(absl.logging.INFO)
    absl_handler = absl.logging.get_absl_handler()
    if absl_handler in root.handlers:
        root.removeHandler(absl_handler)


def run(loaded: LoadedSpec, to: str | None = None, verbose: bool = False) -> LocalRun:
    """Run the pipeline, holding the root's run lock; return the summary (also written to summary.json).
    Raises RunFailed, RunInterrupted (SIGINT or SIGTERM: tfxd.stops), lock.RunLocked (another run uses
    the root), lock.RootClaimed (another machine's store numbers the bucket root's artifacts),
    metadata.StoreUnreadable, or buckets.BucketsSplit (nothing written)."""
    root = loaded.resolve(loaded.spec.root or "")
    buckets.check_emulator([root, loaded.spec.data.path, loaded.spec.push.to])
    with lock.hold(root), stops.handling():
        metadata.check(root)  # before anything is written: a damaged store is left as it is
        return _run_locked(loaded, root, to, verbose)


def _run_locked(loaded: LoadedSpec, root: str, to: str | None, verbose: bool) -> LocalRun:
    """The run under the root's lock: logs routed, the pipeline built and run; a failure or a stop is
    caught here, so that _outcome can still record what the run did before it says why it ended."""
    _importable(loaded.base_dir)
    paths = RunPaths(root, new_run_id())
    progress = _Progress()
    _route_logs(paths, verbose, progress)
    console.step(f"run {paths.run_id} of {loaded.spec.name}; log: {paths.log}")
    if paths.log != paths.published_log:
        console.info(f"the root is a bucket: ML Metadata and the log are kept on this machine in "
                     f"{local_state(root)}; the log is copied to {paths.published_log} when the run ends")
    os.environ[keys.LOG_DIR_ENV] = os.path.dirname(paths.log)

    started = time.time()
    failure: BaseException | None = None
    tfx = engine = None
    try:
        # the DirectRunner's worker pool, where its arguments start worker processes, and the engine, where
        # the runner has one, start before the run's libraries are imported: their imports, the pool's and
        # the engine's JVM run side by side (the pool's arguments are the pipeline's: pipeline_beam_args;
        # reading them imports Beam, which an engine's run does not wait for: its JVM starts first).
        # The collector is held off meanwhile, and what was imported settled after (tfxd.heap)
        log_dir = os.path.dirname(paths.log)
        imported = functools.partial(_libraries_imported, loaded.spec.targets.local.orchestrator)
        with contextlib.ExitStack() as running:
            with heap.imports_uncollected():
                if RUNNERS[loaded.spec.beam.runner].in_process:
                    running.enter_context(beam_engine.direct_workers_pooled(pipeline_beam_args(loaded), log_dir))
                engine = running.enter_context(beam_engine.started(loaded.spec, log_dir, meanwhile=imported))
            # start-up: imported by _libraries_imported while the engine or the pool started
            from tfxd.pipeline.assembly.dag import tfx_pipeline

            tfx = tfx_pipeline(loaded, to=to, metadata=metadata.connection_config(root))
            tf_env.leave_graph_libraries_to_themselves()  # for the Evaluator's Keras metrics too, also when the Trainer is cached
            stopped = unfinished.settle(root)
            if stopped:
                console.info(f"an earlier run of this root ended during {', '.join(stopped)} without finishing "
                             "it; its unfinished outputs were removed and are recorded as abandoned in ML Metadata")
            with libraries_mended(tfx, loaded.spec.targets.local.orchestrator):
                _runner(loaded.spec.targets.local.orchestrator).run(tfx)
    except (KeyboardInterrupt, Exception) as exc:  # any failure ends here and is reported with the log
        failure = exc
    try:
        return _outcome(loaded, paths, root, progress, started, tfx, engine, failure)
    finally:
        paths.publish_log()


def _outcome(loaded: LoadedSpec, paths: RunPaths, root: str, progress: _Progress, started: float, tfx: Any,
             engine: beam_engine.RunningEngine | None, failure: BaseException | None) -> LocalRun:
    """What the run came to, once it ended however it ended: the summary (summary.json and report.html
    written, even for a run that failed or was stopped, so that its components' statuses are on record),
    or RunFailed / RunInterrupted naming where and why, with the log. ``tfx`` is None when the run ended
    before its pipeline was built, ``engine`` when no Beam engine was started."""
    # a signal asked to stop (Beam, the `beam` orchestrator, wraps the KeyboardInterrupt in an error of its own)
    signum = stops.requested() if failure is not None else None
    interrupted = signum is not None or isinstance(failure, KeyboardInterrupt)
    if interrupted:  # the component's outputs stay unpublished
        logging.error("run interrupted (%s) during %s:\n%s", stops.name(signum), progress.current or "no component",
                      "".join(traceback.format_exception(failure)))
        unfinished.settle(root)
    elif failure is not None:
        logging.error("run failed:\n%s", "".join(traceback.format_exception(failure)))
    if tfx is None:
        if interrupted:
            raise RunInterrupted(None, False, paths.log, signum)
        where = f"the {loaded.spec.beam.runner} engine" if isinstance(failure, beam_engine.EngineFailed) else "tfxd"
        raise RunFailed(where, _reason(failure, root), paths.log)
    stopped = gate_stop(paths.log) if failure is not None and not interrupted else None
    summary = _summary(loaded, paths, tfx, started, interrupted=interrupted, failed=failure is not None,
                       signal=stops.name(signum) if interrupted else None, stopped=stopped)
    if summary.status == SKIPPED:  # data.on_no_new_data: skip - the run did what it was asked: nothing
        console.info(f"{summary.reason}; the components after ExampleGen were skipped")
    summary = replace(summary, report=_write_report(summary, paths), history=join(root, keys.HISTORY_PAGE))
    try:
        write_json(paths.summary, summary.to_json())
    except OSError as exc:  # a full disk: the run's own message below matters more
        console.warn(f"summary.json could not be written ({exc.strerror}): {paths.summary}")
    _write_history(loaded, root, paths)
    if interrupted:
        raise RunInterrupted(progress.current, progress.current == "Trainer"
                             and loaded.spec.training.callbacks.backup_and_restore, paths.log, signum)
    if failure is not None:
        failed = [c["name"] for c in summary.components if c["status"] == "failed"]
        component = failed[0] if failed else progress.current or "the pipeline"
        # the engine's own account: what ended or was cancelled there, a job that failed there, an SDK
        # worker's traceback
        reason = (engine and (engine.fault() or beam_engine.engine_reason(str(failure)))) or _reason(failure, root)
        if engine is not None:
            reason = f"{reason}\n    {engine.where_logs_are()}"
        raise RunFailed(component, reason, paths.log) from None
    return summary


def _reason(failure: BaseException | None, root: str) -> str:
    """The root cause in one message (the whole message when it names no error of its own)."""
    text = str(failure).strip() if failure is not None else ""
    return disk_full(text, root) or root_cause(text) or shortened(text) or type(failure).__name__


def _summary(loaded: LoadedSpec, paths: RunPaths, tfx: Any, started: float, *, interrupted: bool, failed: bool,
             signal: str | None, stopped: GateStop | None) -> LocalRun:
    """The run's summary from its records; a run ``stopped`` by a gate carries that gate's verdict."""
    # start-up: imported with the run's libraries (_libraries_imported), or here where the run failed first
    from tfxd.pipeline.run import records

    run = records.RunRecords(paths.root, loaded.spec.name, started)
    skipped = None if interrupted or failed else records.no_new_data(run)
    components = []
    for name in (c.id for c in tfx.components if c.id in COMPONENTS):
        component = run.status(name)
        if interrupted and component["status"] == "failed":  # the execution Ctrl-C left RUNNING
            component["status"] = "interrupted"
        if skipped is not None and component["status"] == "not run":  # by the pipeline's condition
            component["status"] = "skipped"
        components.append(component)
    training = records.training_report(run)
    evaluation = records.evaluation_report(run)
    overall: dict[str, Any] = next((s["metrics"] for s in evaluation.get("slices", []) if s["slice"] == keys.OVERALL_SLICE), {})
    gates = with_gate_stop({"drift": records.drift_report(run), "skew": records.skew_report(run)}, stopped)
    return LocalRun(
        pipeline=loaded.spec.name, run_id=paths.run_id,
        status=run_status(interrupted=interrupted, failed=failed, skipped=skipped is not None,
                          stopped=stopped is not None),
        reason=stopped.message if stopped else skipped, signal=signal,
        stopped_by=stopped.gate if stopped else None, components=components, examples=records.examples_report(run),
        strategy=training.plan.to_json() if training else None, metrics=overall,
        training=training.for_summary() if training else {}, evaluation=evaluation,
        anomalies=records.anomalies_report(run), drift=gates["drift"], skew=gates["skew"],
        blessed=bool(evaluation.get("blessed")), pushed_to=records.pushed_to(run),
        artifacts=records.artifact_uris(run), seconds=round(time.time() - started, 1))


def _write_history(loaded: LoadedSpec, root: str, paths: RunPaths) -> None:
    """history.html in the root, with this run; a page that cannot be drawn does not fail the run."""
    thresholds = {name: threshold.model_dump() for name, threshold in loaded.spec.evaluation.thresholds.items()}
    try:
        history.write_page(root, loaded.spec.name, thresholds)
    except Exception:  # noqa: BLE001 - the run's results stand; the log has the traceback
        logging.exception("history.html could not be written")
        console.warn(f"history.html could not be written; see {paths.log}")


def _write_report(summary: LocalRun, paths: RunPaths) -> str | None:
    """report.html beside summary.json; a report that cannot be drawn does not fail the run."""
    try:
        return report.write(summary, paths.report)
    except Exception:  # noqa: BLE001 - the run's results stand; the log has the traceback
        logging.exception("report.html could not be written")
        console.warn(f"report.html could not be written; see {paths.log}")
        return None
