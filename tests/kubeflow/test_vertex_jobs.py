"""Vertex's JobService on this machine (kubeflow/replay/vertex_jobs.py) ends, restarts and retries a custom
job's replicas as Vertex's documentation says Vertex does (https://cloud.google.com/vertex-ai/docs/training/
understanding-training-service: "Restart workers during the training job", "Handle common errors").
Jobs are sent by aiplatform's own v1 JobServiceClient, as TFX's VertexJobClient sends them; the replicas
are small Python processes, so the rules are seen without a training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from google.cloud.aiplatform_v1.types import JobState

from tfxd.kubeflow.replay.vertex_jobs import VertexJobs

# a replica: says it started (its pool, its attempt), then ends as its pool's line in the job's plan says
REPLICA = """\
import json, os, signal, sys, time
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
folder, plan = sys.argv[1], json.loads(sys.argv[2])
print("started", task["type"], flush=True)
how = plan[task["type"]]
if how == "serve":
    time.sleep(600)
elif how == "until-done":
    while not os.path.exists(os.path.join(folder, "done")):
        time.sleep(0.05)
elif how == "segfault":
    os.kill(os.getpid(), signal.SIGSEGV)
sys.exit(int(how) if how.isdigit() else 0)
"""

SEND = """\
import sys
from google.cloud import aiplatform_v1
client = aiplatform_v1.JobServiceClient(client_options={"api_endpoint": "europe-west4-aiplatform.googleapis.com"})
pools = [{"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"},
          "container_spec": {"image_uri": "tfxd:test", "args": sys.argv[1:]}} for _ in range(int(sys.argv[1]))]
job = client.create_custom_job(parent="projects/tfxd-tests/locations/europe-west4",
                               custom_job={"display_name": "rules", "job_spec": {"worker_pool_specs": pools}})
print(job.name)
"""

GET = """\
import sys
from google.cloud import aiplatform_v1
client = aiplatform_v1.JobServiceClient(client_options={"api_endpoint": "europe-west4-aiplatform.googleapis.com"})
job = client.get_custom_job(name=sys.argv[1])
print(type(job).to_json(job, use_integers_for_enums=False))
"""


def _replica_argv(folder: Path):
    def argv_for(container: dict) -> list[str]:
        return [sys.executable, "-c", REPLICA, str(folder), container["args"][1]]
    return argv_for


def _client(jobs: VertexJobs, script: str, *args: str) -> str:
    """What aiplatform's client ``script`` printed, run as a task reaches the service."""
    env = {**os.environ, **jobs.environment({})}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def _send(jobs: VertexJobs, plan: dict[str, str]) -> str:
    """A job of one replica per pool in ``plan`` ({workerpoolN: how it ends}), sent by aiplatform's client."""
    return _client(jobs, SEND, str(len(plan)), json.dumps(plan))


def _until(check, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_worker_killed_from_outside_is_restarted_with_the_same_environment_and_the_job_goes_on(tmp_path):
    """A parameter-server job (primary, worker, ps): its worker SIGKILLed, as a VM lost to preemption, is
    started again with the same CLUSTER_SPEC and its log goes on; the job succeeds when the primary exits 0
    and the parameter server, which serves until stopped, is stopped."""
    plan = {"workerpool0": "until-done", "workerpool1": "serve", "workerpool2": "serve"}
    with VertexJobs(str(tmp_path / "logs"), _replica_argv(tmp_path)) as jobs:
        job = jobs.jobs[_send(jobs, plan)]
        log = Path(job.logs["workerpool1-0"])
        _until(lambda: "started workerpool1" in log.read_text(), "the worker starts")
        first = job.processes["workerpool1-0"]
        given = dict(job.launches["workerpool1-0"][1])
        first.send_signal(signal.SIGKILL)
        _until(lambda: log.read_text().count("started workerpool1") == 2, "the worker starts again")
        assert job.processes["workerpool1-0"] is not first and job.launches["workerpool1-0"][1] == given
        assert job.state == JobState.JOB_STATE_RUNNING and job.restarts == {"workerpool1-0": 1}
        (tmp_path / "done").touch()
        _until(lambda: job.state == JobState.JOB_STATE_SUCCEEDED, "the job succeeds")
        assert job.processes["workerpool2-0"].poll() is not None  # the ps stopped with the job
    assert "---- replay: The replica workerpool1-0 exited with a non-zero status of 137. Vertex restarts it " \
           "with the same hostname (restart 1 of 5) ----" in log.read_text()


def test_an_error_exit_fails_the_job_naming_the_replica_and_a_segfault_runs_the_whole_job_again(tmp_path):
    """A replica exiting 1 is a user code exception, which Vertex does not retry: the job fails at once with
    Vertex's message and code. One ending by SIGSEGV runs the whole job again, 3 times, then fails it."""
    with VertexJobs(str(tmp_path / "logs"), _replica_argv(tmp_path)) as jobs:
        failed = jobs.jobs[_send(jobs, {"workerpool0": "until-done", "workerpool1": "1"})]
        _until(lambda: failed.state == JobState.JOB_STATE_FAILED, "the job fails")
        view = json.loads(_client(jobs, GET, failed.name))  # as TFX's VertexJobClient reads it
        assert view["state"] == "JOB_STATE_FAILED" and view["error"]["code"] == 3 and view["error"]["message"] == (
            "The replica workerpool1-0 exited with a non-zero status of 1. Termination reason: Error. Its log (the "
            f"replay's): {failed.logs['workerpool1-0']}")
        assert failed.restarts == {} and failed.retries == 0
        crashed = jobs.jobs[_send(jobs, {"workerpool0": "segfault"})]
        _until(lambda: crashed.state == JobState.JOB_STATE_FAILED, "the job fails after its retries")
        log = Path(crashed.logs["workerpool0-0"]).read_text()
    assert crashed.retries == 3 and log.count("started workerpool0") == 4
    assert "The replica workerpool0-0 exited with a non-zero status of 139. Vertex runs the job again (retry 3 of " \
           "3)" in log
    assert crashed.error.startswith("The replica workerpool0-0 exited with a non-zero status of 139. Termination")
