"""The verbs for Kubeflow Pipelines and Vertex AI: compile, submit, schedule, replay (a compiled file run
here as the cluster would run it), and kubeflow-manifest (what a cluster admin applies once for the Trainer's
operator jobs).

The spec is imported at the top; TFX and the services' SDKs load inside the verbs that need them.
"""

from __future__ import annotations

import datetime
import os
import sys
import tempfile
from typing import Any

import click

from tfxd import console, keys, stops
from tfxd.cli.options import (
    CLUSTER_TARGETS,
    cluster_target,
    endpoint_option,
    fails_well,
    output_option,
    service_call,
    set_option,
)
from tfxd.pipeline.spec.load import load_spec
from tfxd.pipeline.spec.loaded import LoadedSpec

SCHEDULE_ACTIONS = ("apply", "pause", "resume", "delete", "list")
# what `tfxd kubeflow-manifest NAME` prints: the files under kubeflow/ the wheel ships (tfxd.kubeflow)
MANIFESTS = {"trainjob-runtime": "trainjob-runtime.yaml", "trainjob-rbac": "trainjob-rbac.yaml",
             "tfjob-rbac": "tfjob-rbac.yaml"}


@click.command(name="compile")
@click.argument("spec", type=click.Path())
@click.option("--target", type=click.Choice(CLUSTER_TARGETS), required=True,
              help="kubeflow: a KFP v2 PipelineSpec (YAML); vertex: a Vertex PipelineJob (JSON).")
@output_option
@set_option
@fails_well
def compile_(spec: str, target: str, output: str | None, sets: tuple[str, ...]) -> None:
    """Compile SPEC for Kubeflow Pipelines or Vertex AI Pipelines (offline; writes only the output)."""
    loaded = load_spec(spec, sets, target=target)
    # start-up: TFX loads only for the verbs that compile
    from tfxd.kubeflow import compile as compiler

    if output:
        compiler.compile_to(loaded, target, output)
        console.success(f"wrote {output} ({target}, image {getattr(loaded.spec.targets, target).image})")
    else:
        console.raw(compiler.render(loaded, target))


@click.command()
@click.argument("spec", type=click.Path())
@cluster_target
@click.option("--wait", is_flag=True, help="Follow the run to its end, a line per state change.")
@endpoint_option
@set_option
@fails_well
def submit(spec: str, target: str, wait: bool, endpoint: str | None, sets: tuple[str, ...]) -> None:
    """Compile SPEC and start one run on Kubeflow Pipelines or Vertex AI Pipelines."""
    loaded = load_spec(spec, sets, target=target)
    from tfxd.kubeflow import targets  # start-up: as compile, and the service's SDK

    def state(name: str) -> None:
        console.step(f"{loaded.spec.name}: {name}")

    with tempfile.TemporaryDirectory(prefix="tfxd-submit-") as scratch:
        path = _compiled(loaded, target, scratch)
        done = service_call(lambda: targets.cluster_target(target).submit(loaded.spec, path, wait=wait,
                                                                          on_state=state, endpoint=endpoint))
    console.success(done)


@click.command()
@click.argument("action", type=click.Choice(SCHEDULE_ACTIONS))
@click.argument("spec", type=click.Path())
@cluster_target
@endpoint_option
@set_option
@fails_well
def schedule(action: str, spec: str, target: str, endpoint: str | None, sets: tuple[str, ...]) -> None:
    """Keep SPEC's retraining schedule (targets.T.schedule): apply creates or updates it, idempotently."""
    loaded = load_spec(spec, sets, target=target)
    if action != "list" and getattr(loaded.spec.targets, target).schedule is None:
        console.error(f"the spec has no targets.{target}.schedule; add e.g. schedule: {{cron: '0 3 * * 1'}}")
        sys.exit(2)
    from tfxd.kubeflow import schedules  # start-up: as submit

    if action == "list":
        rows = service_call(lambda: schedules.list_(loaded.spec, target, endpoint=endpoint))
        for row in rows:
            console.info(f"{row['display_name']}  {row['state']}  cron {row['cron']}  next {row['next_run_time']}  "
                         f"({row['name']})")
        if not rows:
            console.info(f"no schedule named {loaded.spec.name} on {target}")
        return
    if action == "apply":
        with tempfile.TemporaryDirectory(prefix="tfxd-schedule-") as scratch:
            path = _compiled(loaded, target, scratch)
            done = service_call(lambda: schedules.apply(loaded.spec, target, path, endpoint=endpoint))
    else:
        done = service_call(lambda: getattr(schedules, action)(loaded.spec, target, endpoint=endpoint))
    console.success(done)


@click.command()
@click.argument("compiled_file", type=click.Path(dir_okay=False))
@click.option("--project", "project_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help=f"The folder the spec was compiled from: it stands for the image's {keys.IMAGE_PROJECT_DIR}.")
@click.option("--root", type=click.Path(file_okay=False),
              help="Where artifacts and logs go (default PROJECT/tfxd-runs/<pipeline>/replay).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help='A pipeline parameter, e.g. train_args=\'{"numSteps": 100}\'.')
@click.option("--beam-as-compiled", is_flag=True,
              help="Keep the compiled Beam flags (default: in-memory direct runner, data here is small).")
@click.option("--schedule-time", metavar="RFC3339",
              help="Replay a run a schedule started at this time, e.g. 2026-11-24T03:00:00Z (default: a run "
                   "started by hand, whose schedule time the engine leaves unfilled).")
def replay(compiled_file: str, project_dir: str, root: str | None, params: tuple[str, ...],
           beam_as_compiled: bool, schedule_time: str | None) -> None:
    """Execute a compiled Kubeflow/Vertex file here, task by task, as the KFP v2 launcher would."""
    if schedule_time is not None:
        try:
            datetime.datetime.fromisoformat(schedule_time.replace("Z", "+00:00"))
        except ValueError:
            raise click.BadParameter(f"{schedule_time!r} is not an RFC 3339 time (e.g. 2026-11-24T03:00:00Z)",
                                     param_hint="--schedule-time") from None
    parameters = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--param")
        parameters[name] = value
    # start-up: TFX loads only for the verbs that run pipelines
    from tfxd.kubeflow.replay import ir, launcher, runner

    try:
        compiled = ir.load_compiled(compiled_file)
        root = root or os.path.join(project_dir, "tfxd-runs", compiled.name, "replay")
        with stops.handling():
            summary = runner.replay(compiled_file, project_dir=project_dir, root=root, parameters=parameters,
                                    on_task=_show_task, beam_in_memory=not beam_as_compiled,
                                    schedule_time=schedule_time)
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the running task was stopped, its outputs removed
        signum = getattr(exc, "signum", None)
        console.error(f"replay interrupted by {stops.name(signum)}; the stopped task's outputs were removed")
        sys.exit(stops.exit_status(signum))
    except ir.ReplayError as exc:
        console.error(str(exc))
        sys.exit(2)
    except launcher.TaskFailed as exc:
        console.error(str(exc))
        _history_page(exc.summary)
        sys.exit(1)
    console.info(f"replay {summary['run_id']} of {summary['pipeline']}: {summary['run_dir']}")
    if summary["status"] == "skipped":
        console.info(f"{summary['reason']}; the tasks after ExampleGen were skipped by their condition, and the "
                     "run succeeds (on the cluster too)")
    elif summary.get("blessed"):
        console.success(f"blessed; pushed to {summary['pushed_destination']} (on the cluster: "
                        f"{summary.get('pushed_destination_on_cluster')})" if summary.get("pushed")
                        else "blessed")
    else:
        console.warn("not blessed, so not pushed")
    _history_page(summary)


def _history_page(summary: dict[str, Any]) -> None:
    """history.html in the replay's root, from the records every replay of the pipeline left (a page that
    cannot be drawn does not fail the replay)."""
    from tfxd.pipeline.run.history import replay_page  # start-up: as the replay itself

    try:
        page = replay_page(summary)
    except Exception as exc:  # noqa: BLE001 - the replay's outcome stands
        console.warn(f"could not write the history page: {type(exc).__name__}: {exc}")
        return
    if page:
        console.info(f"history: {page}")


@click.command(name="kubeflow-manifest")
@click.argument("name", type=click.Choice(list(MANIFESTS)))
def kubeflow_manifest(name: str) -> None:
    """Print a manifest to pipe to `kubectl apply -f -`: trainjob-runtime, the TensorFlow runtime a TrainJob
    needs (Kubeflow Trainer v2 ships none; once per cluster); trainjob-rbac or tfjob-rbac, the Role the
    pipeline's pods need to launch the Trainer's job (once per namespace)."""
    from importlib import resources  # start-up: only this verb reads the shipped files

    click.echo(resources.files("tfxd.kubeflow").joinpath(MANIFESTS[name]).read_text(encoding="utf-8"), nl=False)


def _show_task(name: str, event: dict[str, Any]) -> None:
    if event["event"] == "start":
        console.step(f"{name} ...")
    elif event["status"] == "failed":
        console.error(f"{name} failed ({event['seconds']:.1f} s)")
    elif event["status"] == "skipped":
        console.info(f"- {name} skipped: {event['why']}")
    else:
        console.success(f"{name} {event['status']} ({event['seconds']:.1f} s)")


def _compiled(loaded: LoadedSpec, target: str, scratch: str) -> str:
    from tfxd.kubeflow import compile as compiler  # start-up: as compile
    from tfxd.kubeflow import targets  # start-up: as compile

    extension = targets.cluster_target(target).EXTENSION
    return compiler.compile_to(loaded, target, os.path.join(scratch, loaded.spec.name + extension))
