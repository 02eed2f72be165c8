"""The container entry point of every task tfxd compiles for Kubeflow Pipelines and Vertex AI: TFX's own
(kubeflow_v2_run_executor, which runs the executor and writes its output metadata for the engine), then the
task's record in its run's folder (tfxd/task_record.py), whether it ended ok, failed, was stopped by a
validation gate or by a signal. `tfxd history --target kubeflow|vertex` reads a pipeline's runs back from
those records alone, on the bucket, as no engine's API knows a run's spans, metrics, drift or push.

The compiled command is `python -m tfxd.components.cluster_task --tfxd_pipeline NAME --tfxd_task TASK
<TFX's arguments>` (kubeflow/compile.py). A record that cannot be written is logged and leaves the task's
outcome as it was: the engine's account of the task stands, the history lacks that task.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from absl import app, logging
from tfx.dsl.io import fileio
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entry

from tfxd import keys, stops
from tfxd import task_record as records
from tfxd.files import write_atomic


def _parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.Namespace, list[str]]:
    """tfxd's own arguments, then TFX's parse of the rest (its arguments and the Beam arguments)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(keys.TASK_PIPELINE_ARG, dest="pipeline", required=True)
    parser.add_argument(keys.TASK_NAME_ARG, dest="task", required=True)
    ours, rest = parser.parse_known_args(argv[1:])
    args, beam_args = tfx_entry._parse_flags([argv[0], *rest])  # noqa: SLF001 - TFX's own parser, as its main uses it
    return ours, args, beam_args


def main(parsed: tuple[argparse.Namespace, argparse.Namespace, list[str]]) -> None:
    """TFX's entry point, then the record. A stop (SIGTERM: a pod evicted, a run cancelled) ends the task
    within stops.STOP_SECONDS with the signal's exit status, recorded as interrupted. One that comes earlier,
    while the container starts (the imports), ends it as Python's default does, with no record: the engine's
    account of the task stands, as for a record that cannot be written."""
    ours, args, beam_args = parsed
    executor_input = json.loads(args.json_serialized_invocation_args)
    started = records.now()

    def record(status: str, error: str | None = None, verdict: dict[str, Any] | None = None) -> None:
        _write(ours, executor_input, records.TaskRecord(
            pipeline=ours.pipeline, task=ours.task, status=status, started=started, ended=records.now(),
            error=error, verdict=verdict, artifacts=_produced(executor_input) if status == records.OK else {},
            inputs=_given(executor_input)))

    try:
        with stops.handling(stops.DEADLINE_SECONDS):
            try:
                tfx_entry._run_executor(args, beam_args)  # noqa: SLF001 - what TFX's main runs
            finally:
                signum = stops.requested()  # Beam wraps the stop raised in its work into an error of its own
    except BaseException as exc:
        if signum is not None:
            record(records.INTERRUPTED, f"stopped by {stops.name(signum)}")
            sys.exit(stops.exit_status(signum))
        verdict = getattr(exc, "verdict", None)  # a validation gate's (components/example_validator)
        gate = verdict if isinstance(verdict, dict) else None
        record(records.STOPPED if gate else records.FAILED, f"{type(exc).__name__}: {exc}", gate)
        raise
    record(records.OK)


def _produced(executor_input: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The output artifacts as the executor output hands them to the engine ({uri, metadata}: the custom
    properties the executor set), or as the engine asked for them where that file says nothing of one."""
    asked = executor_input.get("outputs", {}).get("artifacts", {})
    output_file = executor_input.get("outputs", {}).get("outputFile", "")
    told: dict[str, Any] = {}
    if output_file and fileio.exists(output_file):
        with fileio.open(output_file, "r") as handle:
            told = json.loads(handle.read()).get("artifacts", {})
    return _listed({key: told.get(key) or value for key, value in asked.items()})


def _given(executor_input: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The input artifacts as the engine handed them to the task."""
    return _listed(executor_input.get("inputs", {}).get("artifacts", {}))


def _listed(artifacts: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """ExecutorInput's or ExecutorOutput's `{key: {artifacts: [...]}}` as the record keeps it: {uri, metadata}."""
    return {key: [{"uri": item.get("uri", ""), "metadata": item.get("metadata", {})}
                  for item in value.get("artifacts", [])] for key, value in artifacts.items()}


def _write(ours: argparse.Namespace, executor_input: dict[str, Any], record: records.TaskRecord) -> None:
    uris = [item.get("uri", "") for value in executor_input.get("outputs", {}).get("artifacts", {}).values()
            for item in value.get("artifacts", [])]
    folders = [folder for folder in (records.run_folder(uri, ours.task) for uri in uris if uri) if folder]
    if not folders:
        logging.warning("tfxd: task %s has no output artifact in a folder of its own, so no run folder for its "
                        "record", ours.task)
        return
    where = records.path(folders[0], ours.task)
    try:
        write_atomic(where, records.dumps(record))
    except Exception as exc:  # noqa: BLE001 - the task's outcome stands; the history lacks this task
        logging.warning("tfxd: could not write task %s's record %s: %s", ours.task, where, exc)


if __name__ == "__main__":
    app.run(main, flags_parser=_parse)
