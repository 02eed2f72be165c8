"""The ``tfxd`` command line. Heavy modules are imported inside the commands that need them."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from pipeline import tf_env

# pydantic looks up third-party plugins through package metadata on first use (~40 ms of a
# sub-half-second `validate`); tfxd's spec models use none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

EXAMPLES = ("taxi", "penguin", "digits")  # the keys of pipeline.scaffold.EXAMPLES


def _fails_well(command: Callable[..., Any]) -> Callable[..., Any]:
    """Spec problems print as file:line:col lines and exit 2, with no traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from pipeline.errors import SpecError
        from pipeline.overrides import OverrideSyntaxError

        try:
            return command(*args, **kwargs)
        except OverrideSyntaxError as exc:
            raise click.UsageError(str(exc)) from None
        except SpecError as exc:
            from pipeline import console

            for error in exc.errors:
                console.error(str(error))
            count = len(exc.errors)
            console.err.print(f"{count} problem{'s' if count != 1 else ''} found; nothing was written.")
            sys.exit(2)

    return wrapper


def _target_choice() -> click.Choice:
    return click.Choice(["local", "kubeflow", "vertex"])


_set_option = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                           help="Override one key, e.g. training.steps=200 (the value is read as YAML).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tfxd", prog_name="tfxd")
@click.option("-v", "--verbose", is_flag=True, help="Show everything, TensorFlow and Beam logs included.")
def cli(verbose: bool) -> None:
    """tfxd: one YAML file -> a TFX pipeline that runs locally, on Kubeflow and on Vertex AI."""
    if verbose:
        os.environ["TFXD_VERBOSE"] = "1"
        tf_env.configure(verbose=True)


@cli.command()
@click.argument("spec", type=click.Path())
@click.option("--target", type=_target_choice(), help="Also check the spec against this target.")
@_set_option
@_fails_well
def validate(spec: str, target: str | None, sets: tuple[str, ...]) -> None:
    """Check SPEC and report every problem at once (imports no TensorFlow)."""
    from pipeline import console
    from pipeline.load import load_spec

    loaded = load_spec(spec, sets, target=target)
    s = loaded.spec
    parts = [f"pipeline {s.name}",
             f"{len(s.features)} features" if s.features else f"preprocessing_fn {s.preprocessing_fn}",
             f"label {s.label.name} ({s.label.task})", f"model {s.model.type}"]
    if target:
        parts.append(f"target {target}")
    console.success(f"{spec} is valid: {', '.join(parts)}")


@cli.command()
@click.argument("spec", type=click.Path())
@click.option("--target", type=_target_choice(), help="Also check the spec against this target.")
@_set_option
@_fails_well
def render(spec: str, target: str | None, sets: tuple[str, ...]) -> None:
    """Print SPEC resolved, with every default filled in, as YAML."""
    from pipeline import console
    from pipeline.load import load_spec
    from pipeline.render import to_yaml

    console.raw(to_yaml(load_spec(spec, sets, target=target).spec))


@cli.command()
@click.argument("spec", type=click.Path())
@click.option("--to", "to", metavar="COMPONENT", help="Stop after this component.")
@_set_option
@click.pass_context
@_fails_well
def run(ctx: click.Context, spec: str, to: str | None, sets: tuple[str, ...]) -> None:
    """Run SPEC locally (LocalDagRunner, SQLite ML Metadata, Beam); a line per component, then a summary."""
    from pipeline import console
    from pipeline.load import load_spec
    from pipeline.spec import COMPONENTS

    if to is not None and to not in COMPONENTS:
        raise click.BadParameter(f"{to!r} is not a component; choose one of {', '.join(COMPONENTS)}",
                                 param_hint="--to")
    from pipeline import local_run
    from pipeline.run_lock import RunLocked

    try:
        loaded = load_spec(spec, sets, target="local")
        from pipeline.summary import show

        summary = local_run.run(loaded, to, verbose=ctx.find_root().params.get("verbose", False))
        show(summary)
    except (local_run.RunFailed, RunLocked) as exc:
        console.error(str(exc))
        sys.exit(1)
    except local_run.RunInterrupted as exc:
        console.error(str(exc))
        sys.exit(130)
    except KeyboardInterrupt:  # Ctrl-C outside a component (loading, imports, the summary)
        console.error("interrupted: run the same command again to resume (finished components are reused "
                      "from the cache)")
        sys.exit(130)


@cli.command(name="compile")
@click.argument("spec", type=click.Path())
@click.option("--target", type=click.Choice(["kubeflow", "vertex"]), required=True,
              help="kubeflow: a KFP v2 PipelineSpec (YAML); vertex: a Vertex PipelineJob (JSON).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@_set_option
@_fails_well
def compile_(spec: str, target: str, output: str | None, sets: tuple[str, ...]) -> None:
    """Compile SPEC for Kubeflow Pipelines or Vertex AI Pipelines (offline; writes only the output)."""
    from pipeline import console
    from pipeline.load import load_spec

    loaded = load_spec(spec, sets, target=target)
    from kubeflow import compile as compiler

    if output:
        compiler.compile_to(loaded, target, output)
        console.success(f"wrote {output} ({target}, image {getattr(loaded.spec.targets, target).image})")
    else:
        console.raw(compiler.render(loaded, target))


_cluster_target = click.option("--target", type=click.Choice(["kubeflow", "vertex"]), required=True,
                               help="Kubeflow Pipelines (targets.kubeflow) or Vertex AI Pipelines (targets.vertex).")
_endpoint_option = click.option("--endpoint", metavar="URL", help="Another API endpoint: a private Vertex AI "
                                "endpoint, or a KFP host instead of targets.kubeflow.host.")


def _compiled(loaded, target: str, scratch: str) -> str:
    from kubeflow import compile as compiler

    return compiler.compile_to(loaded, target, os.path.join(scratch, loaded.spec.name + compiler.EXTENSIONS[target]))


def _service_call(call: Callable[[], Any]) -> Any:
    """Kubeflow / Vertex calls: a refusal or a failed run exits 1 with the service's words."""
    from pipeline import console

    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the service's message is the useful part
        console.error(f"{type(exc).__name__}: {exc}")
        sys.exit(1)


@cli.command()
@click.argument("compiled_file", type=click.Path(dir_okay=False))
@click.option("--project", "project_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="The folder the spec was compiled from: it stands for the image's /tfxd/project.")
@click.option("--root", type=click.Path(file_okay=False),
              help="Where artifacts and logs go (default PROJECT/tfxd-runs/<pipeline>/replay).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help='A pipeline parameter, e.g. train_args=\'{"numSteps": 100}\'.')
@click.option("--beam-as-compiled", is_flag=True,
              help="Keep the compiled Beam flags (default: in-memory direct runner, data here is small).")
def replay(compiled_file: str, project_dir: str, root: str | None, params: tuple[str, ...],
           beam_as_compiled: bool) -> None:
    """Execute a compiled Kubeflow/Vertex file here, task by task, as the KFP v2 launcher would."""
    from pipeline import console

    parameters = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--param")
        parameters[name] = value
    from kubeflow import replay as replayer

    def on_task(name: str, event: dict[str, Any]) -> None:
        if event["event"] == "start":
            console.step(f"{name} ...")
        elif event["status"] == "failed":
            console.error(f"{name} failed ({event['seconds']:.1f} s)")
        else:
            console.success(f"{name} {event['status']} ({event['seconds']:.1f} s)")

    try:
        compiled = replayer.load_compiled(compiled_file)
        root = root or os.path.join(project_dir, "tfxd-runs", compiled.name, "replay")
        summary = replayer.replay(compiled_file, project_dir=project_dir, root=root, parameters=parameters,
                                  on_task=on_task, beam_in_memory=not beam_as_compiled)
    except replayer.ReplayError as exc:
        console.error(str(exc))
        sys.exit(2)
    except replayer.TaskFailed as exc:
        console.error(str(exc))
        sys.exit(1)
    console.info(f"replay {summary['run_id']} of {summary['pipeline']}: {summary['run_dir']}")
    if summary.get("blessed"):
        console.success(f"blessed; pushed to {summary['pushed_destination']} (on the cluster: "
                        f"{summary.get('pushed_destination_on_cluster')})" if summary.get("pushed")
                        else "blessed")
    else:
        console.warn("not blessed, so not pushed")


@cli.command()
@click.argument("spec", type=click.Path())
@_cluster_target
@click.option("--wait", is_flag=True, help="Follow the run to its end, a line per state change.")
@_endpoint_option
@_set_option
@_fails_well
def submit(spec: str, target: str, wait: bool, endpoint: str | None, sets: tuple[str, ...]) -> None:
    """Compile SPEC and start one run on Kubeflow Pipelines or Vertex AI Pipelines."""
    import tempfile

    from pipeline import console
    from pipeline.load import load_spec

    loaded = load_spec(spec, sets, target=target)
    from kubeflow import submit as submitter

    def state(name: str) -> None:
        console.step(f"{loaded.spec.name}: {name}")

    with tempfile.TemporaryDirectory(prefix="tfxd-submit-") as scratch:
        path = _compiled(loaded, target, scratch)
        if target == "vertex":
            result = _service_call(lambda: submitter.submit_vertex(loaded.spec, path, wait=wait, on_state=state,
                                                                   api_endpoint=endpoint))
            console.success(f"submitted {result['name']} ({result['state']}): {result['console_url']}")
        else:
            result = _service_call(lambda: submitter.submit_kubeflow(loaded.spec, path, wait=wait, on_state=state,
                                                                     host=endpoint))
            console.success(f"submitted run {result['run_id']} ({result['state']})"
                            + (f": {result['url']}" if result.get("url") else ""))


@cli.command()
@click.argument("action", type=click.Choice(["apply", "pause", "resume", "delete", "list"]))
@click.argument("spec", type=click.Path())
@_cluster_target
@_endpoint_option
@_set_option
@_fails_well
def schedule(action: str, spec: str, target: str, endpoint: str | None, sets: tuple[str, ...]) -> None:
    """Keep SPEC's retraining schedule (targets.T.schedule): apply creates or updates it, idempotently."""
    import tempfile

    from pipeline import console
    from pipeline.load import load_spec

    loaded = load_spec(spec, sets, target=target)
    if action != "list" and getattr(loaded.spec.targets, target).schedule is None:
        console.error(f"the spec has no targets.{target}.schedule; add e.g. schedule: {{cron: '0 3 * * 1'}}")
        sys.exit(2)
    from kubeflow import schedules

    where = {"api_endpoint": endpoint} if target == "vertex" else {"host": endpoint}
    if action == "list":
        rows = _service_call(lambda: schedules.list_(loaded.spec, target, **where))
        for row in rows:
            console.info(f"{row['display_name']}  {row['state']}  cron {row['cron']}  next {row['next_run_time']}  "
                         f"({row['name']})")
        if not rows:
            console.info(f"no schedule named {loaded.spec.name} on {target}")
        return
    if action == "apply":
        with tempfile.TemporaryDirectory(prefix="tfxd-schedule-") as scratch:
            path = _compiled(loaded, target, scratch)
            done = _service_call(lambda: schedules.apply(loaded.spec, target, path, **where))
    else:
        done = _service_call(lambda: getattr(schedules, action)(loaded.spec, target, **where))
    console.success(done)


@cli.command()
@click.argument("spec", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot", "svg", "png"]), default="mermaid",
              show_default=True, help="Mermaid or DOT text; SVG or PNG through graphviz.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@_set_option
@_fails_well
def graph(spec: str, fmt: str, output: str | None, sets: tuple[str, ...]) -> None:
    """Print the pipeline's DAG: its components and the artifacts between them."""
    from pipeline import console
    from pipeline import graph as graphs
    from pipeline.load import load_spec

    if fmt == "png" and not output:
        raise click.UsageError("--format png writes binary data; name a file with -o FILE")
    loaded = load_spec(spec, sets)
    from pipeline.assemble import components

    try:
        content = graphs.render(loaded.spec.name, components(loaded), fmt)
    except graphs.GraphError as exc:
        console.error(str(exc))
        sys.exit(2)
    if output:
        from pipeline.files import write_atomic

        write_atomic(output, content)
        console.success(f"wrote {output}")
    else:
        sys.stdout.write(content.decode())


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_set_option
@_fails_well
def plan(spec: str | None, as_json: bool, sets: tuple[str, ...]) -> None:
    """The hardware found here and the distribution strategy it gets (SPEC's training section, if given)."""
    import json

    from pipeline import console
    from pipeline.load import load_spec
    from pipeline.spec import Training

    training = load_spec(spec, sets).spec.training if spec else Training()
    from trainer_module.planner import PlanError
    from trainer_module.run_fn import make_plan

    try:
        result, _ = make_plan({"training": training.model_dump(mode="json")}, None)
    except PlanError as exc:
        console.error(str(exc))
        sys.exit(2)
    if as_json:
        console.raw(json.dumps(result.to_json(), indent=2))
        return
    data = result.to_json()
    console.info(f"strategy: {data['strategy']} ({data['reason']})")
    console.info(f"replicas: {data['replicas']}, global batch {data['global_batch_size']}, "
                 f"precision {data['precision']}, shard policy {data['shard_policy']}")
    console.info(f"task: {data['task']['type'] or 'single process'} {data['task']['index']}, "
                 f"chief: {data['is_chief']}")
    console.info(f"devices: {data['devices']['gpus']} GPU(s), {data['devices']['cpu_devices']} CPU device(s), "
                 f"TPU: {data['devices']['tpu'] or 'none'}")


@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of the spec (for editors: '# yaml-language-server: $schema=FILE')."""
    from pipeline import console
    from pipeline.render import json_schema

    text = json_schema()
    if output:
        from pipeline.files import write_atomic

        write_atomic(output, text)
        console.success(f"wrote {output}")
    else:
        console.raw(text)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--example", type=click.Choice(EXAMPLES), default="taxi", show_default=True,
              help="Which example to start from.")
@click.option("--data-only", is_flag=True, help="Write only the example's data under DIRECTORY/data.")
@click.option("--force", is_flag=True, help="Write into a directory that is not empty.")
def init(directory: str, example: str, data_only: bool, force: bool) -> None:
    """Scaffold a project in DIRECTORY: a spec, its data, a README and the JSON Schema."""
    from pipeline import console, scaffold

    try:
        written = scaffold.init(directory, example, data_only=data_only, force=force)
    except scaffold.ScaffoldError as exc:
        console.error(str(exc))
        sys.exit(2)
    for path in written:
        console.step(f"wrote {path}")
    if not data_only:
        spec = os.path.join(directory, f"{example}.yaml")
        console.success(f"next: tfxd validate {spec}")


def main() -> None:
    cli(prog_name="tfxd")


if __name__ == "__main__":
    main()
