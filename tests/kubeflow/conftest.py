"""Fixtures for the Kubeflow/Vertex verbs: local fake services, specs with both targets, compiled files.

- `fake_vertex`: a FakeVertex on 127.0.0.1 (its `.url` is the `api_endpoint` to pass); Cloud Storage
  calls go to it too (STORAGE_EMULATOR_HOST) and the project-number lookup of `PipelineJob.submit`'s
  bucket-ownership check is answered in-process, so nothing leaves the machine.
- `fake_kfp`: a FakeKfp on 127.0.0.1 (its `.url` is the `host` to pass).
- `credentials`: anonymous Google credentials (aiplatform asks for some before any call).
- `make_spec(*sets)`: the spec below with `--set`-style overrides, as pipeline.spec.Spec.
- `make_compiled(target, variant="a")`: a small valid compiled file for a target; another variant
  gives other bytes (a changed pipeline). Swap its body for tfxd's compiler once it lands.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BASE_SPEC
from tests.kubeflow.fake_kfp import FakeKfp
from tests.kubeflow.fake_vertex import PROJECT_NUMBER, FakeVertex
from tfxd.kubeflow.submit import vertex_sdk
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.load import load_spec

TARGETS = """\
targets:
  kubeflow:
    image: registry.example.com/demo:1.0
    host: http://kfp.invalid:8080
    schedule: {cron: "0 3 * * 1", timezone: UTC, max_concurrent_runs: 2}
  vertex:
    project: demo-project
    region: europe-west4
    image: europe-docker.pkg.dev/demo-project/ml/demo:1.0
    root: gs://demo-bucket/pipelines
    service_account: runner@demo-project.iam.gserviceaccount.com
    schedule: {cron: "0 3 * * *", timezone: Europe/Berlin, max_concurrent_runs: 2}
"""
SPEC_TEXT = BASE_SPEC + TARGETS


@pytest.fixture
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing may leave the machine: no proxy for 127.0.0.1, no ambient KFP endpoint."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("KF_PIPELINES_ENDPOINT", "KF_PIPELINES_UI_ENDPOINT", "KF_PIPELINES_DEFAULT_EXPERIMENT_NAME",
                 "KF_PIPELINES_OVERRIDE_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_vertex(monkeypatch: pytest.MonkeyPatch, _local_only: None) -> Iterator[FakeVertex]:
    with warnings.catch_warnings():  # aiplatform's import nags about google-cloud-storage < 3
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud.aiplatform.utils import resource_manager_utils

    server = FakeVertex().start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    # Resource Manager is gRPC only in the SDK (no endpoint to redirect): answer in-process.
    monkeypatch.setattr(resource_manager_utils, "get_project_number", lambda *args, **kwargs: PROJECT_NUMBER)
    try:
        yield server
    finally:
        server.stop()
        vertex_sdk()  # aiplatform's endpoint is process-wide: do not leave it on a stopped server


@pytest.fixture
def fake_kfp(_local_only: None) -> Iterator[FakeKfp]:
    server = FakeKfp().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def credentials() -> Any:
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., Spec]:
    path = tmp_path / "demo.yaml"
    path.write_text(SPEC_TEXT, encoding="utf-8")

    def make(*sets: str) -> Spec:
        return load_spec(str(path), sets=list(sets), check_files=False).spec

    return make


def compile_kfp_package(path: Path, variant: str = "a") -> Path:
    """A tiny but valid KFP v2 PipelineSpec YAML, compiled by kfp itself."""
    from kfp import compiler, dsl

    # No annotations on these two: with `from __future__ import annotations` kfp would see strings.
    @dsl.container_component
    def say():
        return dsl.ContainerSpec(image="alpine:3.19", command=["echo", f"variant {variant}"])

    @dsl.pipeline(name="demo")
    def demo():
        say()

    compiler.Compiler().compile(demo, str(path))
    return path


def vertex_job_file(path: Path, package: Path, root: str = "gs://demo-bucket/pipelines/demo/pipeline") -> Path:
    """A PipelineJob JSON around a compiled PipelineSpec, the shape `tfxd compile --target vertex` writes
    (its root is <targets.vertex.root>/<name>/pipeline, as pipeline.placement puts it)."""
    import yaml

    pipeline_spec = yaml.safe_load(package.read_text(encoding="utf-8"))
    job = {"displayName": "demo", "pipelineSpec": pipeline_spec,
           "runtimeConfig": {"gcsOutputDirectory": root, "parameterValues": {}},
           "labels": {"compiled-by": "tests"}}
    path.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return path


@pytest.fixture
def make_compiled(tmp_path: Path) -> Callable[..., Path]:
    def make(target: str, variant: str = "a") -> Path:
        """target: kubeflow (PipelineSpec YAML) or vertex (PipelineJob JSON)."""
        package = compile_kfp_package(tmp_path / f"demo-{variant}.yaml", variant)
        if target == "kubeflow":
            return package
        return vertex_job_file(tmp_path / f"demo-{variant}.json", package)

    return make
