"""The verbs that work here: init, validate, render, schema, graph, plan, run, history.

Only the spec (pydantic, no TensorFlow) is imported at the top: `tfxd validate` and `--help` answer in
well under a second. TFX, TensorFlow and Beam load inside the verbs that run them.
"""

from __future__ import annotations

import json
import os
import sys

import click

from tfxd import console, stops
from tfxd.buckets import BucketsSplit
from tfxd.cli import scaffold
from tfxd.cli.options import (
    endpoint_option,
    fails_well,
    output_option,
    service_call,
    set_option,
    target_option,
)
from tfxd.files import write_atomic
from tfxd.pipeline.report.terminal import show_history
from tfxd.pipeline.run.history import no_runs_yet, runs_of, write_page
from tfxd.pipeline.spec.base import COMPONENTS
from tfxd.pipeline.spec.load import load_spec
from tfxd.pipeline.spec.render import json_schema, to_yaml
from tfxd.pipeline.spec.targets import CLUSTER_TARGETS, TARGETS
from tfxd.pipeline.spec.training import Training


@click.command()
@click.argument("spec", type=click.Path())
@target_option
@set_option
@fails_well
def validate(spec: str, target: str | None, sets: tuple[str, ...]) -> None:
    """Check SPEC and report every problem at once (imports no TensorFlow)."""
    s = load_spec(spec, sets, target=target).spec
    parts = [f"pipeline {s.name}",
             f"{len(s.features)} features" if s.features else f"preprocessing_fn {s.preprocessing_fn}",
             f"label {s.label.name} ({s.label.task})", f"model {s.model.type}"]
    if target:
        parts.append(f"target {target}")
    console.success(f"{spec} is valid: {', '.join(parts)}")


@click.command()
@click.argument("spec", type=click.Path())
@target_option
@set_option
@fails_well
def render(spec: str, target: str | None, sets: tuple[str, ...]) -> None:
    """Print SPEC resolved, with every default filled in, as YAML."""
    console.raw(to_yaml(load_spec(spec, sets, target=target).spec))


@click.command()
@output_option
def schema(output: str | None) -> None:
    """Print the JSON Schema of the spec (for editors: '# yaml-language-server: $schema=FILE')."""
    _emit(json_schema(), output)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--example", type=click.Choice(tuple(scaffold.EXAMPLES)), default="taxi", show_default=True,
              help="Which example to start from.")
@click.option("--data-only", is_flag=True, help="Write only the example's data under DIRECTORY/data.")
@click.option("--force", is_flag=True, help="Write into a directory that is not empty.")
def init(directory: str, example: str, data_only: bool, force: bool) -> None:
    """Scaffold a project in DIRECTORY: a spec, its data, a README and the JSON Schema."""
    try:
        written = scaffold.init(directory, example, data_only=data_only, force=force)
    except scaffold.ScaffoldError as exc:
        console.error(str(exc))
        sys.exit(2)
    for path in written:
        console.step(f"wrote {path}")
    if not data_only:
        console.success(f"next: tfxd validate {os.path.join(directory, f'{example}.yaml')}")


@click.command()
@click.argument("spec", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot", "svg", "png"]), default="mermaid",
              show_default=True, help="Mermaid or DOT text; SVG or PNG through graphviz.")
@output_option
@set_option
@fails_well
def graph(spec: str, fmt: str, output: str | None, sets: tuple[str, ...]) -> None:
    """Print the pipeline's DAG: its components and the artifacts between them."""
    if fmt == "png" and not output:
        raise click.UsageError("--format png writes binary data; name a file with -o FILE")
    loaded = load_spec(spec, sets)
    # start-up: TFX loads only for the verbs that build pipelines
    from tfxd.pipeline.assembly import dag
    from tfxd.pipeline.report import graph as graphs

    try:
        content = graphs.render(loaded.spec.name, dag.nodes(loaded), fmt)
    except graphs.GraphError as exc:
        console.error(str(exc))
        sys.exit(2)
    _emit(content, output)


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@set_option
@fails_well
def plan(spec: str | None, as_json: bool, sets: tuple[str, ...]) -> None:
    """The hardware found here and the distribution strategy it gets (SPEC's training section, if given)."""
    training = load_spec(spec, sets).spec.training if spec else Training()
    # start-up: TensorFlow loads only for the verbs that look at devices or train
    from tfxd.trainer_module.planner import PlanError
    from tfxd.trainer_module.run_fn import make_plan

    try:
        result, _ = make_plan({"training": training.model_dump(mode="json")}, None)
    except PlanError as exc:
        console.error(str(exc))
        sys.exit(2)
    data = result.to_json()
    if as_json:
        console.raw(json.dumps(data, indent=2))
        return
    console.info(f"strategy: {data['strategy']} ({data['reason']})")
    console.info(f"replicas: {data['replicas']}, global batch {data['global_batch_size']}, "
                 f"precision {data['precision']}, shard policy {data['shard_policy']}")
    console.info(f"steps per call of the compiled step: {data['steps_per_execution']} ({data['execution_reason']})")
    console.info(f"task: {data['task']['type'] or 'single process'} {data['task']['index']}, "
                 f"chief: {data['is_chief']}")
    console.info(f"devices: {data['devices']['gpus']} GPU(s), {data['devices']['cpu_devices']} CPU device(s), "
                 f"TPU: {data['devices']['tpu'] or 'none'}")


@click.command()
@click.argument("spec", type=click.Path())
@click.option("--to", "to", metavar="COMPONENT", help="Stop after this component.")
@set_option
@click.pass_context
@fails_well
def run(ctx: click.Context, spec: str, to: str | None, sets: tuple[str, ...]) -> None:
    """Run SPEC locally (LocalDagRunner, SQLite ML Metadata, Beam); a line per component, then a summary."""
    if to is not None and to not in COMPONENTS:
        raise click.BadParameter(f"{to!r} is not a component; choose one of {', '.join(COMPONENTS)}",
                                 param_hint="--to")
    try:
        loaded = load_spec(spec, sets, target="local")
        # start-up: the run's own modules; TFX, TensorFlow and Beam load once its engine or worker pool is
        # starting (local_run._libraries_imported), the collector held off then
        from tfxd.pipeline.report import terminal
        from tfxd.pipeline.run import local_run
        from tfxd.pipeline.run.lock import RootClaimed, RunLocked
        from tfxd.pipeline.run.metadata import StoreUnreadable
        from tfxd.pipeline.run.outcome import RunFailed, RunInterrupted

        try:
            summary = local_run.run(loaded, to, verbose=ctx.find_root().params.get("verbose", False))
        except (RunFailed, RunLocked, RootClaimed, StoreUnreadable, BucketsSplit) as exc:
            console.error(str(exc))
            sys.exit(1)
        except RunInterrupted as exc:
            console.error(str(exc))
            sys.exit(exc.exit_status)
        terminal.show(summary)
    except KeyboardInterrupt as exc:  # Ctrl-C outside a component (loading, imports, the summary)
        console.error("interrupted: run the same command again to resume (finished components are reused "
                      "from the cache)")
        sys.exit(stops.exit_status(getattr(exc, "signum", None)))


@click.command()
@click.argument("spec", type=click.Path())
@click.option("--target", type=click.Choice(TARGETS), default="local", show_default=True,
              help="Whose runs: tfxd run's under the spec's root; a Kubeflow or Vertex pipeline's, from the records "
                   "its tasks leave in its pipeline root (read with the bucket's own client).")
@click.option("--root", metavar="PATH", help="Read the runs under PATH instead: a `tfxd replay --root` folder, "
              "another pipeline root.")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help="Only the N newest runs.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the runs instead of the table.")
@click.option("--html", metavar="PATH", help="Also write the history page (history.html) to PATH, a file or a "
              "bucket path.")
@click.option("--ask-engine", is_flag=True, help="Also ask Kubeflow Pipelines (targets.kubeflow.host) or Vertex AI "
              "(targets.vertex.project) for each run's state: a run no task recorded the end of, or none of whose "
              "tasks began.")
@endpoint_option
@set_option
@fails_well
def history(spec: str, target: str, root: str | None, last: int | None, as_json: bool, html: str | None,
            ask_engine: bool, endpoint: str | None, sets: tuple[str, ...]) -> None:
    """SPEC's runs, newest first: when, status, spans, examples, strategy, metrics, blessed, pushed, drift
    and skew, seconds."""
    if ask_engine and target not in CLUSTER_TARGETS:
        raise click.UsageError("--ask-engine asks Kubeflow Pipelines or Vertex AI: give --target "
                               + " or ".join(CLUSTER_TARGETS))
    loaded = load_spec(spec, sets, target=target)
    where, found = runs_of(loaded, target, loaded.resolve(root) if root else None)
    if ask_engine:
        # start-up: the services' SDKs load only when asked
        from tfxd.kubeflow.targets import cluster_target
        from tfxd.pipeline.run.cluster_history import with_engine

        service = cluster_target(target)
        states = service_call(lambda: service.run_states(loaded.spec, endpoint=endpoint))
        found = with_engine(found, states, service.TITLE)
    lines = [line for line, _ in found][:last] if last else [line for line, _ in found]
    if html:
        thresholds = {name: value.model_dump() for name, value in loaded.spec.evaluation.thresholds.items()}
        write_page(where, loaded.spec.name, thresholds, found, loaded.resolve(html))
    if as_json:
        click.echo(json.dumps([line.to_json() for line in lines], indent=2))
    elif not lines:
        console.info(no_runs_yet(loaded, target, where, spec))
    else:
        show_history(loaded.spec.name, lines)
    if html and not as_json:  # stdout is the JSON alone
        console.info(f"history: {loaded.resolve(html)}")


def _emit(content: str | bytes, output: str | None) -> None:
    """Write to ``output`` (atomically), or print to stdout."""
    if output:
        write_atomic(output, content)
        console.success(f"wrote {output}")
    elif isinstance(content, bytes):
        sys.stdout.write(content.decode())
    else:
        console.raw(content)
