"""What the verbs share: the `--set` and `--target` options, and the two ways a verb fails (a wrong spec
exits 2 with every problem located, a refused service call exits 1 with the service's words)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from tfxd import console
from tfxd.pipeline.spec.errors import SpecError
from tfxd.pipeline.spec.overrides import OverrideSyntaxError
from tfxd.pipeline.spec.targets import CLUSTER_TARGETS, TARGETS

set_option = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                          help="Override one key, e.g. training.steps=200 (the value is read as YAML).")
target_option = click.option("--target", type=click.Choice(TARGETS), help="Also check the spec against this target.")
cluster_target = click.option("--target", type=click.Choice(CLUSTER_TARGETS), required=True,
                              help="Kubeflow Pipelines (targets.kubeflow) or Vertex AI Pipelines (targets.vertex).")
endpoint_option = click.option("--endpoint", metavar="URL", help="Another API endpoint: a private Vertex AI "
                               "endpoint, or a KFP host instead of targets.kubeflow.host.")
output_option = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")


def fails_well(command: Callable[..., Any]) -> Callable[..., Any]:
    """Spec problems print as file:line:col lines and exit 2, with no traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except OverrideSyntaxError as exc:
            raise click.UsageError(str(exc)) from None
        except SpecError as exc:
            for error in exc.errors:
                console.error(str(error))
            count = len(exc.errors)
            console.err.print(f"{count} problem{'s' if count != 1 else ''} found; nothing was written.")
            sys.exit(2)

    return wrapper


def service_call(call: Callable[[], Any]) -> Any:
    """Kubeflow / Vertex calls: a refusal or a failed run exits 1 with the service's words."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the service's message is the useful part
        console.error(f"{type(exc).__name__}: {exc}")
        sys.exit(1)
