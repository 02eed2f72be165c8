"""Load a spec file: YAML -> overrides -> pydantic -> target and file checks.

Every problem found is turned into ``file:line:col: key.path: message`` with a
hint, and all of them are raised together as one SpecError.
"""

from __future__ import annotations

import glob
import os
import re

from pydantic import ValidationError

from tfxd.files import is_uri
from tfxd.pipeline.spec import cron, data_files, overrides, yaml_source
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.errors import Located, Problems, SpecError
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.locate import locate_all
from tfxd.pipeline.spec.placement import Placement
from tfxd.pipeline.spec.targets import KFP_PIPELINE_NAME, TARGETS


def load_spec(path: str, sets: list[str] | tuple[str, ...] = (), target: str | None = None,
              check_files: bool = True) -> LoadedSpec:
    """Load and check a spec; raise SpecError with every problem found."""
    doc = yaml_source.load(path)
    if doc.data is None:
        raise SpecError([Located(path, 1, 1, "(top level)", "the spec is empty",
                                 "start from `tfxd init DIR --example taxi`")])
    if not isinstance(doc.data, dict):
        raise SpecError([Located(path, 1, 1, "(top level)", "the spec must be a mapping of keys",
                                 "start with `tfxd: 1` and `name: ...`")])
    overrides.apply(doc, list(sets))
    try:
        spec = Spec.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError(locate_all(exc, doc)) from None
    loaded = LoadedSpec(spec, path)
    problems = Problems()
    if target is not None:
        _check_target(loaded, target, problems)
    if check_files:
        _check_files(loaded, problems)
    if problems.items:
        raise SpecError([doc.locate(p, of_key=not p.path or p.path[-1] == "targets") for p in problems.items])
    return loaded


def _check_target(loaded: LoadedSpec, target: str, problems: Problems) -> None:
    spec = loaded.spec
    if target not in TARGETS:
        problems.add(("targets",), f"unknown target {target!r}", f"targets are: {', '.join(TARGETS)}")
        return
    cluster = spec.targets.local.trainer if target == "local" else None
    if target != "local" and getattr(spec.targets, target) is None:
        needs = {"kubeflow": "image", "vertex": "project, region, image and root"}[target]
        problems.add(("targets",), f"the spec has no `targets.{target}` section",
                     f"add targets.{target} with {needs}")
        return
    if target == "vertex":
        cluster = spec.targets.vertex.trainer  # type: ignore[union-attr]
    if spec.training.strategy == "parameter_server" and cluster is not None and cluster.parameter_servers == 0:
        problems.add(("training", "strategy"),
                     f"parameter_server needs parameter servers, and targets.{target}.trainer has none",
                     f"set targets.{target}.trainer.parameter_servers to 1 or more, or use strategy auto")
    if target == "kubeflow":
        _check_kubeflow(spec, problems)
    Placement(loaded, target).problems(problems)


def _check_kubeflow(spec: Spec, problems: Problems) -> None:
    """What the Kubeflow target cannot honour, refused rather than dropped."""
    kubeflow = spec.targets.kubeflow
    assert kubeflow is not None
    if not re.match(KFP_PIPELINE_NAME, spec.name):
        problems.add(("name",), f"Kubeflow Pipelines takes a pipeline name that starts and ends with a letter or "
                     f"digit, and {spec.name!r} does not", "drop the trailing '-' from name")
    if spec.training.strategy in ("multi_worker_mirrored", "parameter_server"):
        problems.add(("training", "strategy"), f"{spec.training.strategy} needs several Trainer processes, and "
                     "multi-worker training on Kubeflow (a TFJob through the Training Operator) is not built in "
                     "this version of tfxd", "use targets.vertex (trainer.workers / parameter_servers), or "
                     "strategy auto / mirrored (one pod, several GPUs)")
    if kubeflow.schedule and kubeflow.schedule.timezone not in cron.KFP_TIMEZONES:
        problems.add(("targets", "kubeflow", "schedule", "timezone"), "Kubeflow recurring runs have no time zone: "
                     "their cron is read in the cluster's time (UTC)", "use timezone: UTC and write the cron in UTC")
    for component, resources in kubeflow.resources.items():
        if resources.memory and resources.memory.endswith("m"):
            problems.add(("targets", "kubeflow", "resources", component, "memory"),
                         f"memory {resources.memory!r} is in thousandths of a byte", "use Mi or Gi, e.g. 512Mi")


def _check_files(loaded: LoadedSpec, problems: Problems) -> None:
    spec = loaded.spec
    data = spec.data
    if data.path is not None and not is_uri(data.path):
        base = loaded.resolve(data.path)
        if glob.has_magic(base):
            if not glob.glob(base):
                problems.add(("data", "path"), f"no file matches {data.path!r} (looked in {base})",
                             "check the glob; relative paths are relative to the spec file")
        elif not os.path.exists(base):
            problems.add(("data", "path"), f"{data.path!r} does not exist (looked for {base})",
                         "check the path; relative paths are relative to the spec file. "
                         "For the examples: tfxd init DIR --example NAME")
        elif os.path.isdir(base):
            for split, pattern in data.patterns.items():
                if not glob.glob(os.path.join(base, pattern)):
                    problems.add(("data", "splits", split), f"no file under {data.path!r} matches {pattern!r}",
                                 "patterns are globs relative to data.path")
    if not problems.items:
        data_files.check_columns(spec, loaded.data_files, problems)
    schema = spec.validation.schema_
    if schema != "infer" and not is_uri(schema) and not os.path.isfile(loaded.resolve(schema)):
        problems.add(("validation", "schema"), f"schema file {schema!r} does not exist",
                     "give the path of a schema.pbtxt, or `infer`")
