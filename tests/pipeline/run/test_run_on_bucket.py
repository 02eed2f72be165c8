"""`tfxd run` with everything on a bucket: the penguin example with its data, pipeline root and push
destination on a Cloud Storage API server (fake-gcs-server behind tests/buckets/front.py), every process in a
network namespace where Google's names lead there (tests/buckets/server.py). TensorFlow's GCS filesystem
(TFX's fileio), Beam's GCSIO (google-cloud-storage) and tfxd's own file code reach the bucket by their own
code, as on a cluster; nothing is mapped to a folder, and the suite's guard fails a process that hands a bucket
path to a local file function (tests/network_guard). A run refused its uploads fails naming the object and
leaves nothing of the failed component; the next run reuses what was published and rides out a flaky
Cloud Storage (503, 429, a connection cut mid-upload)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
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
    """Three runs of penguin on the bucket: the first fails at Transform, refused its uploads; the second
    reuses what the first published, meets a flaky Cloud Storage, trains, blesses and pushes; the third finds
    it all."""
    folder = tmp_path_factory.mktemp("penguin-on-bucket")
    spec = (REPO / "examples" / "penguin.yaml").read_text().replace("path: data/penguin", f"path: gs://{BUCKET}/data/penguin")
    (folder / "penguin.yaml").write_text(SPEC_HEAD + spec)
    env = {"XDG_STATE_HOME": str(folder / "state")}
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    front = bucket.front
    faults = [
        # the first run: every upload of Transform's graph refused (403, which no client retries)
        lambda: [front.fail("POST", "transform_graph", status=403, count=1000)],
        # the second: TensorFlow's uploads answered 503, its listings 429, an upload's connection cut half-way;
        # it retries within its policy (tsl/platform/cloud/retrying_utils.cc)
        lambda: [front.fail("POST", "uploadType=resumable", status=503, count=2, agent_contains="TSL"),
                 front.fail("GET", f"/storage/v1/b/{BUCKET}/o?", status=429, count=2, agent_contains="TSL"),
                 front.fail("PUT", "upload_id=", cut=True, count=1, agent_contains="TSL")],
        list,
    ]
    runs = []
    for arm in faults:
        seen = len(bucket.front.seen.requests)
        armed = arm()
        runs.append(bucket.run(tfxd, "run", "penguin.yaml", *EXAMPLE_ARGS, cwd=folder, env=env))
        for fault in armed:
            fault.count = len(fault.hits)  # disarmed: what it did stays in hits
        runs[-1].requests, runs[-1].faults = bucket.front.seen.requests[seen:], armed
        runs[-1].transform_files = [name for name in bucket.objects(BUCKET, "runs/pipeline/Transform/")
                                    if not name.endswith("/")]
    return folder, runs


def _summaries(bucket) -> list[dict]:
    names = sorted(n for n in bucket.objects(BUCKET, "runs/runs/") if n.endswith("/summary.json"))
    return [json.loads(bucket.read(BUCKET, name)) for name in names]


def test_a_run_refused_its_uploads_fails_naming_the_object_and_publishes_nothing_of_it(bucket, penguin_on_bucket):
    _, (refused, _, _) = penguin_on_bucket
    assert refused.returncode == 1, refused.stdout + refused.stderr
    [fault] = refused.faults
    assert fault.hits, "Transform uploaded nothing"
    summary = _summaries(bucket)[0]
    assert summary["status"] == "failed"
    ran = statuses(summary)
    assert ran["Transform"] == "failed" and ran["ExampleGen"] == ran["SchemaGen"] == "ran", ran
    assert {ran[name] for name in ("Trainer", "Evaluator", "Pusher")} == {"not run"}, ran
    message = " ".join((refused.stdout + refused.stderr).split())
    assert "Transform failed" in message and "403" in message and "transform_graph" in message, message[-3000:]
    # the failed component left no file on the bucket: nothing half-written is left to read
    assert refused.transform_files == [], refused.transform_files


def test_penguin_runs_blessed_and_pushed_on_the_bucket(bucket, penguin_on_bucket):
    folder, (_, first, _) = penguin_on_bucket
    assert first.returncode == 0, first.stdout + first.stderr
    _, summary, _ = _summaries(bucket)
    # what the refused run published is reused; the rest ran
    assert statuses(summary) == {**dict.fromkeys(("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator"),
                                                 "cached"),
                                 **dict.fromkeys(("Transform", "Trainer", "Evaluator", "Pusher"), "ran")}, (
        statuses(summary))
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
    _, (_, first, _) = penguin_on_bucket
    agents = {agent.split("/")[0] for _, _, agent, _ in first.requests}
    assert "TSL" in agents  # TensorFlow's GCS filesystem (tsl/platform/cloud), under TFX's fileio
    assert any("gccl/" in agent for _, _, agent, _ in first.requests)  # google-cloud-storage, under Beam's GCSIO
    tokens = [path for _, path, _, _ in first.requests if path.startswith("/computeMetadata/v1/instance/service-")]
    assert tokens, "no client asked the metadata server for a token"
    refused = [(method, path, status) for method, path, _, status in first.requests if status in (401, 403)]
    assert not refused, refused


def test_a_run_rides_out_a_flaky_cloud_storage(penguin_on_bucket):
    _, (_, first, _) = penguin_on_bucket
    assert first.returncode == 0, first.stdout + first.stderr
    assert [len(fault.hits) for fault in first.faults] == [2, 2, 1], [fault.hits for fault in first.faults]
    answered = [status for _, _, agent, status in first.requests if agent == "TSL"]
    assert answered.count(503) == 2 and answered.count(429) == 2 and answered.count(0) == 1  # 0: the cut


def test_a_second_run_reuses_what_the_first_published_on_the_bucket(bucket, penguin_on_bucket):
    _, (_, _, second) = penguin_on_bucket
    assert second.returncode == 0, second.stdout + second.stderr
    _, first, again = _summaries(bucket)
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


def test_a_clients_token_refreshed_again_is_given_for_the_account_it_learnt(bucket):
    """google-auth's Compute Engine credentials ask the metadata server for `default` once and for the
    account's email on every later refresh (google/auth/compute_engine/credentials.py, _retrieve_info), as
    Beam's GCSIO does when its token is refreshed mid-run: the front answers both, as GCE's does."""
    code = ("import google.auth.transport.requests as r; from google.auth import compute_engine; "
            "c = compute_engine.Credentials(); c.refresh(r.Request()); c.refresh(r.Request()); "
            "print(c.service_account_email, c.token)")
    result = bucket.run(sys.executable, "-c", code, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["tests@tfxd-tests.iam.gserviceaccount.com", TOKEN]


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


def test_another_machine_is_refused_the_root_before_anything_is_written(bucket, penguin_on_bucket, tmp_path):
    """A second machine (its own state folder, so its own ML Metadata) under the same bucket root would number
    its executions from 1 and write over the first machine's artifacts: refused, naming the owner."""
    folder, _ = penguin_on_bucket
    owner = bucket.read(BUCKET, "runs/.tfxd-store").decode()
    assert str(folder / "state") in owner  # the machine of the runs above claimed the root
    before = bucket.objects(BUCKET)
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    result = bucket.run(tfxd, "run", "penguin.yaml", cwd=folder, timeout=300,
                        env={"XDG_STATE_HOME": str(tmp_path / "elsewhere")})
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert f"gs://{BUCKET}/runs is the root of another machine's runs" in message, message
    assert "would number its artifacts from 1 again and write over that machine's" in message
    assert bucket.objects(BUCKET) == before
    assert not (tmp_path / "elsewhere" / "tfxd" / "gs" / BUCKET / "runs" / "metadata.sqlite").exists()


CLAIM = """
import os, sys, time
from tfxd.pipeline.run import lock
import google.auth, google.cloud.storage  # loaded before the start, so that the claims meet
open(sys.argv[1] + ".ready", "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
try:
    with lock.hold(sys.argv[2]):
        print("owner")
except lock.RootClaimed as exc:
    print("refused:", exc)
"""


def test_machines_claiming_a_new_root_at_once_leave_it_one_owner(bucket, tmp_path):
    """Four machines (four state folders) start their first run under a new bucket root at the same moment:
    each asks Cloud Storage to create the owner object only if there is none (ifGenerationMatch=0); the server
    creates one and refuses the others 412, which then read the winner's claim and are refused the root."""
    root, ready = f"gs://{BUCKET}/claimed-at-once", []
    seen = len(bucket.front.seen.requests)
    claims = []
    for machine in range(4):
        go = tmp_path / f"go{machine}"
        ready.append(tmp_path / f"go{machine}.ready")
        claims.append((go, subprocess.Popen(
            bucket.command(sys.executable, "-c", CLAIM, str(go), root), text=True, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**bucket.env(), "XDG_STATE_HOME": str(tmp_path / f"machine{machine}")})))
    while not all(path.exists() for path in ready):
        assert all(process.poll() is None for _, process in claims), [p.communicate() for _, p in claims]
        time.sleep(0.01)
    for go, _ in claims:
        go.touch()
    answers = [process.communicate(timeout=120) for _, process in claims]
    said = [out.strip() for out, _ in answers]
    assert sorted(line.split(":")[0] for line in said) == ["owner", "refused", "refused", "refused"], answers
    [winner] = [machine for machine, line in enumerate(said) if line == "owner"]
    owner = bucket.read(BUCKET, "claimed-at-once/.tfxd-store").decode()
    assert str(tmp_path / f"machine{winner}") in owner
    assert all(f"{root} is the root of another machine's runs ({owner.split(maxsplit=1)[1].strip()})" in line
               for line in said if line != "owner"), said
    creates = [status for method, path, _, status in bucket.front.seen.requests[seen:]
               if method == "POST" and "ifGenerationMatch=0" in path]  # the name is in the body
    assert sorted(creates) == [200, 412, 412, 412], creates  # the server decided: one created, three refused


OWN_FILES = """
import json, sys, threading
from tfxd import files, pushed
root = sys.argv[1]
started = []  # the threads this process starts
start = threading.Thread.start
threading.Thread.start = lambda thread: (started.append(type(thread).__name__), start(thread))[1]
try:
    files.write_atomic(root + "/refused.json", "{}")
except Exception as exc:
    print("refused:", " ".join(str(exc).split()))
files.write_json(root + "/summary.json", {"status": "ok", "rows": list(range(2000))})
print("versions:", json.dumps(pushed.versions(root + "/serving")))
print("record:", json.dumps(pushed.data_record(root + "/serving/100").to_json()))
print("tensorflow:", "tensorflow" in sys.modules)
print("threads:", json.dumps(started))
# the bite: a client as google-cloud-storage's own documentation makes one looks the boundary up in a thread
import google.auth
from google.cloud import storage
credentials, project = google.auth.default()
bucket, name = root.removeprefix("gs://").split("/", 1)
storage.Client(project=project, credentials=credentials).bucket(bucket).blob(name + "/summary.json").download_as_bytes()
print("threads by default:", json.dumps(started))
for thread in threading.enumerate():
    if thread is not threading.main_thread():
        thread.join()  # this process ends with nothing in OpenSSL
"""


def test_tfxds_own_file_code_on_a_flaky_bucket(bucket):
    """tfxd's own writes and reads of bucket objects (a run's summary, the pushed models and their records)
    through google-cloud-storage (tfxd/bucket_objects.py), without TensorFlow, while Cloud Storage answers 503
    and 429 and cuts an upload: retried within google-cloud-storage's policy, each object whole or absent. A
    version Pusher left half-way (no saved_model.pb, which TFX's Pusher writes last) is no pushed model; an
    upload refused (403, which no client retries) fails naming the object and leaves none."""
    root = f"gs://{BUCKET}/own-files"
    bucket.upload(BUCKET, "own-files/serving/100/saved_model.pb", b"model")
    bucket.upload(BUCKET, "own-files/serving/100/assets.extra/tfxd_data.json", b'{"spans": ["2026-11-20"]}')
    bucket.upload(BUCKET, "own-files/serving/200/variables/variables.index", b"half a push")
    front = bucket.front
    upload = "/upload/storage/v1/b/tfxd-tests/o?uploadType=multipart"  # one upload, the name in its body
    # in order: the first upload (refused.json) refused, the next two (summary.json) 503, the next cut
    faults = [front.fail("POST", upload, status=403, count=1, agent_contains="gccl/"),
              front.fail("POST", upload, status=503, count=2, agent_contains="gccl/"),
              front.fail("POST", upload, cut=True, count=1, agent_contains="gccl/"),
              front.fail("GET", "prefix=own-files%2Fserving", status=429, count=2, agent_contains="gccl/"),
              front.fail("GET", "tfxd_data.json", status=503, count=2, agent_contains="gccl/")]
    seen = len(front.seen.requests)
    result = bucket.run(sys.executable, "-c", OWN_FILES, root, timeout=300)
    for fault in faults:
        fault.count = len(fault.hits)
    assert result.returncode == 0, result.stdout + result.stderr
    said = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert [len(fault.hits) for fault in faults] == [1, 2, 1, 2, 2], [f.hits for f in faults]
    assert json.loads(bucket.read(BUCKET, "own-files/summary.json")) == {"status": "ok", "rows": list(range(2000))}
    assert f"{root}/refused.json" in said["refused"] and "403" in said["refused"], said
    assert "own-files/refused.json" not in bucket.objects(BUCKET, "own-files/")
    assert [status for method, path, _, status in front.seen.requests[seen:] if method == "POST"] == [403, 503, 503, 0, 200]
    assert json.loads(said["versions"]) == [f"{root}/serving/100"]  # not the half-pushed 200
    assert json.loads(said["record"]) == {"inputs": {}, "spans": ["2026-11-20"]}
    assert said["tensorflow"] == "False"
    # google-auth's Regional Access Boundary lookup ran in the calling thread (tfxd/bucket_objects.py): no
    # thread of it left running when a process ends (a refused run died of SIGSEGV there)
    boundary = "_RegionalAccessBoundaryRefreshThread"
    assert boundary not in json.loads(said["threads"]), said
    assert json.loads(said["threads by default"]).count(boundary) == 1, said


READ_ONE_FILE = """
import os, sys
import tfxd  # noqa: F401 - what every tfxd process does first (tfxd.tf_env)
import tensorflow as tf
def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20
path = sys.argv[1]
assert tf.io.gfile.exists(path)  # the filesystem, its token and its connections set up before the count
before = resident_mb()
with tf.io.gfile.GFile(path, "rb") as handle:
    data = handle.read()
    print(len(data), resident_mb() - before)  # the file still open: its buffer still held
"""


@pytest.mark.parametrize("block_mb, grows", [(None, lambda mb: mb < 24), ("64", lambda mb: mb >= 60)])
def test_tensorflow_reads_a_small_file_of_a_bucket_through_a_small_buffer(bucket, block_mb, grows):
    """TensorFlow's GCS filesystem fills a buffer of GCS_READ_CACHE_BLOCK_SIZE_MB to read a file, whatever
    its size (tsl/platform/cloud/gcs_file_system.cc, BufferedGcsRandomAccessFile::FillBuffer); tfxd sets
    8 MB where the user set nothing (tfxd/tf_env.py). Judged by the process's resident memory with a 2 kB
    object open and read: TensorFlow's 64 MB default, set by the user and kept, costs its 64 MB (the bite)."""
    content = b"feature { name: 'x' type: FLOAT }\n" * 60
    bucket.upload(BUCKET, "small/schema.pbtxt", content)
    env = {} if block_mb is None else {"GCS_READ_CACHE_BLOCK_SIZE_MB": block_mb}
    result = bucket.run(sys.executable, "-c", READ_ONE_FILE, f"gs://{BUCKET}/small/schema.pbtxt", env=env,
                        timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    size, grown_mb = map(int, result.stdout.split()[-2:])
    assert size == len(content) and grows(grown_mb), (size, grown_mb)
