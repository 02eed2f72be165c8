"""Fixtures for the Kubeflow/Vertex verbs: local fake services, specs with both targets, compiled files.

- `fake_vertex`: a FakeVertex on 127.0.0.1 (its `.url` is the `api_endpoint` to pass); Cloud Storage
  calls go to it too (STORAGE_EMULATOR_HOST) and the project-number lookup of `PipelineJob.submit`'s
  bucket-ownership check is answered in-process, so nothing leaves the machine.
- `fake_kfp`: a FakeKfp on 127.0.0.1 (its `.url` is the `host` to pass).
- `credentials`: anonymous Google credentials (aiplatform asks for some before any call).
- `make_spec(*sets)`: the spec below with `--set`-style overrides, as pipeline.spec.Spec (its file:
  `make_spec.path`).
- `make_compiled(target, variant="a")`: the demo spec compiled by tfxd for a target; another variant
  is another pipeline (other bytes).
- `compiled`: the three examples compiled by tfxd for both targets, once per test session.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BASE_SPEC, REPO
from tests.kubeflow.fake_kfp import FakeKfp
from tests.kubeflow.fake_vertex import PROJECT_NUMBER, FakeVertex
from tests.pipeline.run.test_run_taxi import tfxd
from tfxd.kubeflow.clients import vertex_sdk
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

    make.path = str(path)  # type: ignore[attr-defined]  # for load_spec with a target
    return make


# the two compiled pipelines tests submit and schedule: "b" is another pipeline (its default length)
VARIANTS = {"a": (), "b": ("training.steps=20",)}


@pytest.fixture(scope="session")
def _compiled_demo(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """The demo spec compiled by tfxd for both targets, each variant, once per session."""
    from tfxd.kubeflow.compile import compile_to

    folder = tmp_path_factory.mktemp("demo-compiled")
    (folder / "data.csv").write_text("x,city,target\n1.0,a,1\n2.0,b,0\n", encoding="utf-8")
    (folder / "demo.yaml").write_text(SPEC_TEXT, encoding="utf-8")
    files = {}
    for variant, sets in VARIANTS.items():
        for target, ext in (("kubeflow", "yaml"), ("vertex", "json")):
            loaded = load_spec(str(folder / "demo.yaml"), (*sets, "targets.kubeflow.root=gs://demo-bucket/kfp"),
                               target=target)
            files[(target, variant)] = Path(compile_to(loaded, target, str(folder / f"demo-{variant}.{ext}")))
    return files


@pytest.fixture
def make_compiled(tmp_path: Path, _compiled_demo: dict[tuple[str, str], Path]) -> Callable[..., Path]:
    def make(target: str, variant: str = "a") -> Path:
        """target: kubeflow (PipelineSpec YAML) or vertex (PipelineJob JSON), as tfxd compiles the demo
        spec; another variant is another pipeline (other bytes)."""
        source = _compiled_demo[(target, variant)]
        copy = tmp_path / source.name
        copy.write_bytes(source.read_bytes())
        return copy

    return make


EXAMPLES = ("taxi", "penguin", "digits")


@pytest.fixture(scope="session")
def compiled(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every example compiled for both targets into a folder that holds nothing else: taxi through the
    CLI, the others in-process (the same function the CLI calls; one TensorFlow import)."""
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    out = tmp_path_factory.mktemp("compiled")
    files = {}
    for example in EXAMPLES:
        for target, ext in (("kubeflow", "yaml"), ("vertex", "json")):
            path = out / f"{example}.{ext}"
            spec = str(REPO / "examples" / f"{example}.yaml")
            if example == "taxi":
                result = tfxd("compile", spec, "--target", target, "-o", str(path), cwd=out)
                assert result.returncode == 0, result.stdout + result.stderr
                assert result.stderr == ""  # no warnings or library chatter
            else:
                compile_to(load_spec(spec, target=target), target, str(path))
            files[(example, target)] = path
    return files
