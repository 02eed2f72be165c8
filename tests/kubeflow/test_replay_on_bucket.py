"""`tfxd replay` on the buckets a compiled file names: penguin compiled for Kubeflow with its data, pipeline
root and push destination on a Cloud Storage API server (tests/buckets/), replayed with
STORAGE_EMULATOR_HOST set in a network namespace where Google's names lead to it. Every task writes its
artifacts under the pipeline root on the bucket, as on the cluster, through TensorFlow's GCS filesystem and
Beam's GCSIO; nothing maps a bucket to a folder. A second replay finds the first's pushed model, on the
bucket, as its baseline."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.buckets.server import bucket_server
from tests.conftest import REPO

BUCKET = "tfxd-tests"
BASELINE_TASK = "latest_blessed_model_resolver"


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """The bucket server and two replays of penguin's Kubeflow file (the second trains 120 steps, another
    model), with their summaries."""
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    project = tmp_path_factory.mktemp("project")
    spec = (REPO / "examples" / "penguin.yaml").read_text()
    spec = spec.replace("path: data/penguin", f"path: gs://{BUCKET}/data/penguin")
    spec = spec.replace("root: gs://my-bucket/tfxd", f"root: gs://{BUCKET}/kfp")
    (project / "penguin.yaml").write_text(f"push: {{to: gs://{BUCKET}/serving}}\n" + spec)
    compiled = compile_to(load_spec(str(project / "penguin.yaml"), target="kubeflow"), "kubeflow",
                          str(tmp_path_factory.mktemp("compiled") / "penguin.yaml"))
    root = tmp_path_factory.mktemp("replays")
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(BUCKET)
        server.upload_folder(REPO / "examples" / "data" / "penguin", BUCKET, "data/penguin")
        results = []
        for steps in (300, 120):
            result = server.run(tfxd, "replay", compiled, "--project", str(project), "--root", str(root),
                                "--param", f"train_args={json.dumps({'numSteps': steps})}")
            assert result.returncode == 0, result.stdout + result.stderr
            summaries = sorted(root.glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
            results.append(json.loads(summaries[-1].read_text()))
        yield server, root, results


def test_every_artifact_is_on_the_bucket_and_the_model_pushed_there(replays):
    server, root, (first, _) = replays
    assert first["status"] == "ok" and first["blessed"] is True, first
    assert first["buckets"] == {}  # nothing mapped to a folder
    assert not (root / "bucket").exists()
    uris = first["artifacts"].values()
    assert uris and all(uri.startswith(f"gs://{BUCKET}/kfp/") for uri in uris), sorted(uris)
    pushed = first["pushed_destination"]
    assert first["pushed_destination_on_cluster"] == pushed
    assert pushed.startswith(f"gs://{BUCKET}/serving/"), pushed
    version = pushed.removeprefix(f"gs://{BUCKET}/")
    assert f"{version}/saved_model.pb" in server.objects(BUCKET, version)
    trained = first["artifacts"]["Trainer.model"].removeprefix(f"gs://{BUCKET}/")
    assert any(name.endswith("saved_model.pb") for name in server.objects(BUCKET, trained))


def test_a_second_replay_takes_the_first_pushed_model_on_the_bucket_as_baseline(replays):
    server, _, (first, second) = replays
    assert second["status"] == "ok", second
    baseline = second["baseline"]
    assert baseline == second["artifacts"][f"{BASELINE_TASK}.model"] and baseline.startswith(f"gs://{BUCKET}/kfp/")
    pushed = first["pushed_destination"].removeprefix(f"gs://{BUCKET}/")
    copied = baseline.removeprefix(f"gs://{BUCKET}/")
    assert server.read(BUCKET, f"{copied}/Format-Serving/saved_model.pb") == server.read(BUCKET, f"{pushed}/saved_model.pb")
