"""Load a spec file: YAML -> overrides -> pydantic -> target and file checks.

Every problem found is turned into ``file:line:col: key.path: message`` with a
hint, and all of them are raised together as one SpecError.
"""

from __future__ import annotations

import glob
import os

from pydantic import ValidationError

from tfxd.beam_engines import ENGINES
from tfxd.beam_engines import problems as engine_problems
from tfxd.files import is_uri
from tfxd.pipeline.spec import data_files, overrides, yaml_source
from tfxd.pipeline.spec.document import Beam, Spec
from tfxd.pipeline.spec.errors import Located, Problems, SpecError
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.locate import locate_all
from tfxd.pipeline.spec.placement import Placement
from tfxd.pipeline.spec.targets import (
    TARGET_MODELS,
    TARGETS,
    LocalTarget,
    TrainerCluster,
    VertexTrainer,
)
from tfxd.trainer_module.planner import Strategy, cluster_refusal


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
    _check_schemes(spec, problems)
    if target is not None:
        _check_target(loaded, target, problems)
    if check_files:
        _check_files(loaded, problems)
        if target is None or (target in TARGET_MODELS and not TARGET_MODELS[target].ON_CLUSTER):
            _check_engine(spec.beam, problems)
    if problems.items:
        raise SpecError([doc.locate(p, of_key=not p.path or p.path[-1] == "targets") for p in problems.items])
    return loaded


def _check_schemes(spec: Spec, problems: Problems) -> None:
    """Buckets on Cloud Storage (gs://) are read and written by the code every client runs (docs/targets.md,
    Buckets); no other scheme has a file system in TFX 1.16's stack: TensorFlow 2.16 reads s3:// and hdfs://
    only through tensorflow-io, which TFX does not install, so a run would fail at its first artifact."""
    for key, value in spec.paths().items():
        if value and is_uri(value) and not value.startswith("gs://"):
            scheme = value.split("://", 1)[0]
            problems.add(key, f"{scheme}:// is not a file system tfxd can read or write: TFX 1.16's TensorFlow "
                         "(2.16) has none for it without tensorflow-io, which TFX does not install, and only "
                         "Cloud Storage buckets are tested",
                         "use a gs:// bucket or a local path (on Kubeflow with MinIO as its artifact store, "
                         "give targets.kubeflow.root a gs:// bucket the pods can write)")


def _check_engine(beam: Beam, problems: Problems) -> None:
    """Flink and Spark run here through Beam's job server on Java, unless a job server already runs."""
    if beam.needs_job_server:
        for what, fix in engine_problems(ENGINES[beam.runner]):
            problems.add(("beam", "runner"), what, fix)


def _check_target(loaded: LoadedSpec, target: str, problems: Problems) -> None:
    spec = loaded.spec
    if target not in TARGETS:
        problems.add(("targets",), f"unknown target {target!r}", f"targets are: {', '.join(TARGETS)}")
        return
    section = spec.targets.section(target)
    if section is None:
        problems.add(("targets",), f"the spec has no `targets.{target}` section",
                     f"add targets.{target} with {TARGET_MODELS[target].NEEDS}")
        return
    _check_strategy(spec.training.strategy, section.trainer, target, problems)  # type: ignore[attr-defined]
    if isinstance(section, LocalTarget):
        _check_replica_hosts(spec, section, problems)
    if section.ON_CLUSTER and spec.beam.needs_job_server:
        engine = ENGINES[spec.beam.runner]
        problems.add(("beam", "runner"), f"on {target} each Beam step submits to a Beam {engine.title} job server "
                     "in the cluster, and the spec names none (no Java or engine runs in the pipeline image)",
                     f"run Beam's {engine.title} job server beside {engine.title} (docs/data.md, \"Beam on Flink and "
                     f"Spark\") and set beam.job_endpoint, e.g. beam-{engine.name}-job-server:8099")
    section.check(spec.name, problems)
    Placement(loaded, target).problems(problems)


def _check_strategy(strategy: Strategy, cluster: TrainerCluster | VertexTrainer, target: str,
                    problems: Problems) -> None:
    """An explicit strategy the target's Trainer processes cannot run: the planner's own rule, seen early."""
    refusal = cluster_refusal(strategy, cluster.workers, cluster.parameter_servers, f"targets.{target}.trainer")
    if refusal is not None:
        problems.add(("training", "strategy"), refusal.problem, refusal.fix)


def _check_replica_hosts(spec: Spec, local: LocalTarget, problems: Problems) -> None:
    """Replicas on hosts of their own reach each other and nothing else (components/trainer/replica_hosts.py):
    not a bucket's API."""
    buckets = sorted({value for key, value in spec.paths().items() if value and is_uri(value) and key[0] != "targets"})
    if local.trainer.network == "hosts" and local.trainer.distributed and buckets:
        problems.add(("targets", "local", "trainer", "network"), "replicas on hosts of their own reach only each "
                     f"other, not a bucket: they could not read or write {', '.join(buckets)}",
                     "use network: loopback (the default), or local paths")


def _check_files(loaded: LoadedSpec, problems: Problems) -> None:
    spec = loaded.spec
    data = spec.data
    if data.span_pattern is not None and not is_uri(data.path or ""):
        if loaded.data_files.span_problem:
            problems.add(("data", "path" if data.spans == "latest" else "spans"), loaded.data_files.span_problem,
                         "relative paths are relative to the spec file; a span is a folder or file whose "
                         "name matches data.path")
    elif data.path is not None and not is_uri(data.path):
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
