"""`tfxd run` with everything on a bucket: the penguin example with its data, pipeline root and push
destination on a Cloud Storage API server (fake-gcs-server behind tests/buckets/front.py), every process in a
network namespace where Google's names lead there (tests/buckets/server.py). TensorFlow's GCS filesystem
(TFX's fileio), Beam's GCSIO (google-cloud-storage) and tfxd's own file code reach the bucket by their own
code, as on a cluster; nothing is mapped to a folder, and the suite's guard fails a process that hands a bucket
path to a local file function (tests/network_guard)."""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.buckets.front import TOKEN
from tests.buckets.server import bucket_server
from tests.conftest import REPO
from tests.pipeline.run.test_run_taxi import EXAMPLE_ARGS, statuses

BUCKET = "tfxd-tests"
SPEC_HEAD = (f"root: gs://{BUCKET}/runs\npush: {{to: gs://{BUCKET}/serving}}\n")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(BUCKET)
        server.upload_folder(REPO / "examples" / "data" / "penguin", BUCKET, "data/penguin")
        yield server


@pytest.fixture(scope="module")
def penguin_on_bucket(bucket, tmp_path_factory):
    """Two runs of penguin on the bucket: the first trains, blesses and pushes; the second finds it all."""
    folder = tmp_path_factory.mktemp("penguin-on-bucket")
    spec = (REPO / "examples" / "penguin.yaml").read_text().replace("path: data/penguin", f"path: gs://{BUCKET}/data/penguin")
    (folder / "penguin.yaml").write_text(SPEC_HEAD + spec)
    env = {"XDG_STATE_HOME": str(folder / "state")}
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    runs = []
    # the first run meets a flaky Cloud Storage: TensorFlow's uploads answered 503, its listings 429, an
    # upload's connection cut half-way; it retries within its policy (tsl/platform/cloud/retrying_utils.cc)
    front = bucket.front
    faults = [front.fail("POST", "uploadType=resumable", status=503, count=2, agent_contains="TSL"),
              front.fail("GET", f"/storage/v1/b/{BUCKET}/o?", status=429, count=2, agent_contains="TSL"),
              front.fail("PUT", "upload_id=", cut=True, count=1, agent_contains="TSL")]
    for _ in range(2):
        seen = len(bucket.front.seen.requests)
        runs.append(bucket.run(tfxd, "run", "penguin.yaml", *EXAMPLE_ARGS, cwd=folder, env=env))
        runs[-1].requests = bucket.front.seen.requests[seen:]
    runs[0].faults = faults
    return folder, runs


def _summaries(bucket) -> list[dict]:
    names = sorted(n for n in bucket.objects(BUCKET, "runs/runs/") if n.endswith("/summary.json"))
    return [json.loads(bucket.read(BUCKET, name)) for name in names]


def test_penguin_runs_blessed_and_pushed_on_the_bucket(bucket, penguin_on_bucket):
    folder, (first, _) = penguin_on_bucket
    assert first.returncode == 0, first.stdout + first.stderr
    summary, _ = _summaries(bucket)
    assert set(statuses(summary).values()) == {"ran"}
    assert summary["blessed"] is True and summary["metrics"]["sparse_categorical_accuracy"] >= 0.9
    pushed = summary["pushed_to"]
    assert pushed.startswith(f"gs://{BUCKET}/serving/"), pushed
    version = pushed.removeprefix(f"gs://{BUCKET}/")
    assert f"{version}/saved_model.pb" in bucket.objects(BUCKET, version)
    assert f"report: gs://{BUCKET}/runs/runs/{summary['run_id']}/report.html" in first.stdout
    assert b"<html" in bucket.read(BUCKET, f"runs/runs/{summary['run_id']}/report.html")[:200].lower()
    assert b"Component Pusher is finished" in bucket.read(BUCKET, f"runs/runs/{summary['run_id']}/logs/run.log")
    # every artifact on the bucket, nothing on the local disk but what must be there (ML Metadata, the log)
    assert summary["artifacts"] and all(uri.startswith(f"gs://{BUCKET}/runs/") for uri in summary["artifacts"].values())
    assert sorted(p.name for p in folder.iterdir()) == ["penguin.yaml", "state"]
    state = folder / "state" / "tfxd" / "gs" / BUCKET / "runs"
    assert (state / "metadata.sqlite").is_file()
    assert (state / "runs" / summary["run_id"] / "logs" / "run.log").is_file()


def test_every_client_reached_the_bucket_by_its_own_code_with_the_clusters_token(penguin_on_bucket):
    _, (first, _) = penguin_on_bucket
    agents = {agent.split("/")[0] for _, _, agent, _ in first.requests}
    assert "TSL" in agents  # TensorFlow's GCS filesystem (tsl/platform/cloud), under TFX's fileio
    assert any("gccl/" in agent for _, _, agent, _ in first.requests)  # google-cloud-storage, under Beam's GCSIO
    tokens = [path for _, path, _, _ in first.requests if path.startswith("/computeMetadata/v1/instance/service-")]
    assert tokens, "no client asked the metadata server for a token"
    refused = [(method, path, status) for method, path, _, status in first.requests if status in (401, 403)]
    assert not refused, refused


def test_the_first_run_rode_out_a_flaky_cloud_storage(penguin_on_bucket):
    _, (first, _) = penguin_on_bucket
    assert first.returncode == 0, first.stdout + first.stderr
    assert [len(fault.hits) for fault in first.faults] == [2, 2, 1], [fault.hits for fault in first.faults]
    answered = [status for _, _, agent, status in first.requests if agent == "TSL"]
    assert answered.count(503) == 2 and answered.count(429) == 2 and answered.count(0) == 1  # 0: the cut


def test_a_second_run_reuses_what_the_first_published_on_the_bucket(bucket, penguin_on_bucket):
    _, (_, second) = penguin_on_bucket
    assert second.returncode == 0, second.stdout + second.stderr
    first, again = _summaries(bucket)
    assert set(statuses(again).values()) == {"cached"}, statuses(again)
    assert again["pushed_to"] == first["pushed_to"] and again["metrics"] == first["metrics"]


def test_the_front_refuses_what_cloud_storage_refuses_and_takes_what_it_takes(bucket):
    """The stand-in bites: a client without the metadata server's token is refused, as Cloud Storage
    refuses an anonymous caller; and fake-gcs-server alone refuses the upload TensorFlow sends
    (`Transfer-Encoding: identity`, 501), which Cloud Storage takes and the front passes on."""
    listing = f"http://{bucket.host}:{bucket.http_port}/storage/v1/b/{BUCKET}/o?prefix=data/"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(listing, timeout=30)  # noqa: S310 - the test's own host
    assert refused.value.code == 401
    authorized = urllib.request.Request(listing, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(authorized, timeout=30) as answer:  # noqa: S310
        assert json.loads(answer.read())["items"]
    upload = f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=identity.txt"
    headers = {"Transfer-Encoding": "identity", "Content-Length": "2", "Authorization": f"Bearer {TOKEN}"}
    statuses_seen = {}
    for name, (host, port) in {"fake-gcs-server": bucket.backend, "front": (bucket.host, bucket.http_port)}.items():
        connection = http.client.HTTPConnection(host, port, timeout=30)
        connection.request("POST", upload, body=b"ok", headers=headers)
        statuses_seen[name] = connection.getresponse().status
        connection.close()
    assert statuses_seen == {"fake-gcs-server": 501, "front": 200}
    assert bucket.read(BUCKET, "identity.txt") == b"ok"


def test_a_status_query_on_an_upload_holding_nothing_publishes_nothing(bucket):
    """After a dropped connection a client asks how much of its upload arrived (`Content-Range: bytes */N`).
    Cloud Storage answers 308 and keeps waiting; fake-gcs-server alone commits what it holds, an empty
    object, which is what published an empty schema before the front answered such queries itself."""
    answers = {}
    for name, (host, port) in {"fake-gcs-server": bucket.backend, "front": (bucket.host, bucket.http_port)}.items():
        connection = http.client.HTTPConnection(host, port, timeout=30)
        auth = {"Authorization": f"Bearer {TOKEN}", "Content-Length": "0"}
        connection.request("POST", f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=held-{name}.txt",
                           headers=auth)
        answer = connection.getresponse()
        answer.read()
        session = urllib.parse.urlsplit(answer.getheader("Location"))
        connection.request("PUT", f"{session.path}?{session.query}", headers={**auth, "Content-Range": "bytes */5"})
        answer = connection.getresponse()
        answer.read()
        answers[name] = answer.status
        connection.close()
    assert answers == {"fake-gcs-server": 200, "front": 308}
    assert bucket.objects(BUCKET, "held-") == ["held-fake-gcs-server.txt"]  # the empty object only the backend made


def test_an_emulator_tensorflow_cannot_reach_is_refused_before_anything_is_written(bucket, tmp_path):
    """STORAGE_EMULATOR_HOST names an emulator on loopback while Google's names lead to the front: Beam would
    read from one store and TensorFlow write to another, so the run is refused, naming both."""
    spec = (REPO / "examples" / "penguin.yaml").read_text().replace("path: data/penguin", f"path: gs://{BUCKET}/data/penguin")
    (tmp_path / "penguin.yaml").write_text(SPEC_HEAD.replace("/runs", "/refused-runs") + spec)
    before = bucket.objects(BUCKET)
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    result = bucket.run(tfxd, "run", "penguin.yaml", cwd=tmp_path, timeout=300,
                        env={"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9", "XDG_STATE_HOME": str(tmp_path / "state")})
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join((result.stdout + result.stderr).split())
    assert ("STORAGE_EMULATOR_HOST=http://127.0.0.1:9 sends google-cloud-storage and Beam to a Cloud Storage "
            "emulator") in message
    assert f"www.googleapis.com resolves to {bucket.host} here, not to 127.0.0.1" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["penguin.yaml"]
    assert bucket.objects(BUCKET) == before
