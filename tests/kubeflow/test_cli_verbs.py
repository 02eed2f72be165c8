"""`tfxd submit` and `tfxd schedule` from the command line: they compile the spec with tfxd's compiler and
talk to local fakes of Vertex AI and Kubeflow Pipelines (in-process, so the fakes' patches apply)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli, write_spec
from tests.kubeflow.conftest import SPEC_TEXT

KUBEFLOW_ROOT = "    host: http://kfp.invalid:8080\n"


@pytest.fixture
def spec(project, monkeypatch):
    """The demo spec with both targets (and a bucket for kubeflow), beside its data; default Google
    credentials are anonymous ones."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (AnonymousCredentials(), "demo-project"))
    text = SPEC_TEXT.replace(KUBEFLOW_ROOT, KUBEFLOW_ROOT + "    root: gs://demo-bucket/kfp\n")
    return str(write_spec(project, text, "demo.yaml"))


def test_submit_to_vertex_sends_tfxds_compiled_pipeline(spec, fake_vertex):
    result = run_cli("submit", spec, "--target", "vertex", "--endpoint", fake_vertex.url)
    assert result.exit_code == 0, result.output
    [request] = fake_vertex.calls("POST", "/pipelineJobs")
    body = request.body
    executors = body["pipelineSpec"]["deploymentSpec"]["executors"]
    assert executors["Trainer_executor"]["container"]["image"] == "europe-docker.pkg.dev/demo-project/ml/demo:1.0"
    assert body["runtimeConfig"]["gcsOutputDirectory"] == "gs://demo-bucket/pipelines/demo/pipeline"
    assert set(body["labels"]) >= {"tfxd-spec", "tfxd-compiled", "tfxd-pipeline"}
    assert "console.cloud.google.com/vertex-ai/locations/europe-west4/pipelines/runs/" in result.output


def test_schedule_apply_is_idempotent_from_the_cli(spec, fake_vertex):
    first = run_cli("schedule", "apply", spec, "--target", "vertex", "--endpoint", fake_vertex.url)
    assert first.exit_code == 0, first.output
    assert "created" in first.output
    [create] = fake_vertex.calls("POST", "/schedules")
    assert create.body["cron"] == "TZ=Europe/Berlin 0 3 * * *"
    fake_vertex.clear()
    second = run_cli("schedule", "apply", spec, "--target", "vertex", "--endpoint", fake_vertex.url)
    assert second.exit_code == 0, second.output
    assert "unchanged" in second.output and fake_vertex.writes() == []
    listed = run_cli("schedule", "list", spec, "--target", "vertex", "--endpoint", fake_vertex.url)
    assert "demo" in listed.output and "TZ=Europe/Berlin 0 3 * * *" in listed.output


def test_submit_and_schedule_on_kubeflow(spec, fake_kfp):
    result = run_cli("submit", spec, "--target", "kubeflow", "--endpoint", fake_kfp.url)
    assert result.exit_code == 0, result.output
    assert "submitted run" in result.output
    applied = run_cli("schedule", "apply", spec, "--target", "kubeflow", "--endpoint", fake_kfp.url)
    assert applied.exit_code == 0 and "created" in applied.output
    paused = run_cli("schedule", "pause", spec, "--target", "kubeflow", "--endpoint", fake_kfp.url)
    assert paused.exit_code == 0 and "paused" in paused.output


def test_a_service_refusal_exits_1_with_its_words(spec, fake_vertex):
    result = run_cli("schedule", "pause", spec, "--target", "vertex", "--endpoint", fake_vertex.url)
    assert result.exit_code == 1
    assert "no Vertex AI schedule named 'demo'" in result.output
