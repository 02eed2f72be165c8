"""What the open-source Kubeflow Pipelines 2.x backend refuses, as its source says (kubeflow/pipelines),
for the tests and for the fake KFP server, which refuses the same.

- backend/src/apiserver/template/v2_template.go (NewV2SpecTemplate): the document parses as a
  PipelineSpec (protojson: unknown fields refused); `schemaVersion` is "2.1.0"; `pipelineInfo.name` is
  set and matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`; `root` is set.
- the same file (validatePipelineJobInputs): a root parameter a run does not set is optional or has a
  default, and its `parameterType` is specified.
- backend/src/v2/compiler/visitor.go: an executor is a container or an importer ("non-container and
  non-importer executor not implemented").
- backend/src/v2 (driver, launcher) reads no `lifecycle` hook: no file there mentions preCacheCheck.
- backend/src/apiserver/server/api_converter.go: a recurring run's max concurrency is 1 to 10. Its cron
  is not restated here: robfig/cron v1.2.0's `cron.Parse` itself judges it (tests/conformance/cron_judge.py).
"""

from __future__ import annotations

import re

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def backend_problems(pipeline_spec: dict) -> list[str]:
    """What the backend refuses, or would not run, in a PipelineSpec."""
    problems = []
    try:
        json_format.ParseDict(pipeline_spec, pipeline_spec_pb2.PipelineSpec())
    except json_format.ParseError as exc:
        problems.append(f"not a PipelineSpec: {exc}")
    if pipeline_spec.get("schemaVersion") != "2.1.0":
        problems.append(f"schemaVersion {pipeline_spec.get('schemaVersion')!r} is not 2.1.0")
    name = pipeline_spec.get("pipelineInfo", {}).get("name", "")
    if not name or not NAME.fullmatch(name):
        problems.append(f"pipeline name {name!r} is not a Kubernetes-style name")
    if not pipeline_spec.get("root"):
        problems.append("no root component")
    for key, parameter in pipeline_spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}).items():
        if parameter.get("parameterType", "PARAMETER_TYPE_ENUM_UNSPECIFIED") == "PARAMETER_TYPE_ENUM_UNSPECIFIED":
            problems.append(f"parameter {key} has no parameterType")
        if not parameter.get("isOptional") and "defaultValue" not in parameter:
            problems.append(f"parameter {key} is required and has no default")
    for label, executor in pipeline_spec.get("deploymentSpec", {}).get("executors", {}).items():
        if not {"container", "importer"} & set(executor):
            problems.append(f"executor {label} is {sorted(executor)}, neither a container nor an importer")
        if "lifecycle" in executor.get("container", {}):
            problems.append(f"executor {label} has lifecycle hooks the backend does not run")
    return problems


def same_pipeline_spec(sent: dict, compiled: dict) -> bool:
    """Equal as PipelineSpec messages: the SDKs send protobuf JSON, which leaves out defaults (false)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    return (json_format.ParseDict(sent, pipeline_spec_pb2.PipelineSpec())
            == json_format.ParseDict(compiled, pipeline_spec_pb2.PipelineSpec()))
