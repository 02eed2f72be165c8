"""The TFJob Trainer against a loopback Kubernetes API (kubeflow/replay/kube_api.py, which refuses what a
cluster with the Training Operator refuses), its controller scripted by each test: the exact TFJob body,
success, a failed replica named with its reason, a replica that cannot pull its image, the operator's
deadline and the step's own, a cancel (SIGTERM) that deletes the job, and a retried step that finds its
own job by name. The RBAC Role in kubeflow/tfjob-rbac.yaml allows every call made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from tfx.types import standard_artifacts

from tests.conftest import REPO
from tests.kubeflow.conftest import SPEC_TEXT
from tfxd import keys, trainer_config
from tfxd.components.trainer import job_launch, operator_job, tfjob
from tfxd.components.trainer import tfjob_manifest as manifest
from tfxd.kubeflow.replay import training_operator
from tfxd.kubeflow.replay.kube_api import KubeApi
from tfxd.pipeline.assembly.configs import operator_settings
from tfxd.pipeline.spec.load import load_spec
from tfxd.trainer_config import OperatorSettings, TrainerCustomConfig

NAMESPACE = "team-a"
TRAINER = {"workers": 2, "parameter_servers": 1, "namespace": NAMESPACE,
           "resources": {"worker": {"cpu": 4, "memory": "16Gi", "gpu": 1}, "ps": {"cpu": "500m", "memory": "2Gi"}},
           "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
           "service_account": "trainer", "timeout": "2h"}


def settings(tmp_path: Path, **trainer: Any) -> OperatorSettings:
    """targets.kubeflow.trainer as the assembly hands it to the launcher, from a spec."""
    path = tmp_path / "demo.yaml"
    path.write_text(SPEC_TEXT)
    loaded = load_spec(str(path), [f"targets.kubeflow.trainer={json.dumps({**TRAINER, **trainer})}",
                                   "targets.kubeflow.root=gs://b/kfp"], target="kubeflow", check_files=False)
    return operator_settings(loaded.spec.name, loaded.spec.targets.kubeflow)


def test_tfjob_body_for_two_workers_one_ps_and_a_gpu_each(tmp_path):
    body = manifest.body("demo-trainer-0123456789", NAMESPACE, settings(tmp_path), ["ARGS"],
                         owner={"name": "demo-trainer-pod", "uid": "u-1"})
    gpu_worker = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi",
                                                                         "nvidia.com/gpu": "1"}}

    def replicas(count: int, resources: dict[str, Any], restart: str = "Never") -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": restart, "template": {
            "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
            "spec": {"serviceAccountName": "trainer", "terminationGracePeriodSeconds": 30,
                     "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "tensorflow", "image": "registry.example.com/demo:1.0",
                                     "command": ["python", "-m", "tfxd.components.trainer.operator_replica"],
                                     "args": ["ARGS"], "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
                                     "resources": resources}]}}}

    assert body == {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": "demo-trainer-0123456789", "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "tfxd", "tfxd.dev/pipeline": "demo"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "demo-trainer-pod",
                                          "uid": "u-1"}]},
        "spec": {"runPolicy": {"cleanPodPolicy": "Running", "activeDeadlineSeconds": 7200},
                 "tfReplicaSpecs": {
                     # under ParameterServer the chief coordinates: the workers' cpu and memory, no GPU
                     "Chief": replicas(1, {"requests": {"cpu": "4", "memory": "16Gi"},
                                           "limits": {"cpu": "4", "memory": "16Gi"}}),
                     # a ParameterServer worker killed (preempted) is created again; it rejoins
                     "Worker": replicas(2, gpu_worker, restart="ExitCode"),
                     "PS": replicas(1, {"requests": {"cpu": "500m", "memory": "2Gi"},
                                        "limits": {"cpu": "500m", "memory": "2Gi"}})}}}
    # no TF_CONFIG: the operator writes it
    assert "TF_CONFIG" not in json.dumps(body)
    # without ps: a chief and workers - 1 workers, every one with the GPU
    plain = manifest.body("j", NAMESPACE, settings(tmp_path, parameter_servers=0, workers=3), ["A"])
    assert {k: v["replicas"] for k, v in plain["spec"]["tfReplicaSpecs"].items()} == {"Chief": 1, "Worker": 2}
    assert {v["restartPolicy"] for v in plain["spec"]["tfReplicaSpecs"].values()} == {"Never"}  # MultiWorkerMirrored
    assert plain["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["resources"] == gpu_worker


def test_job_names_are_dns_labels_fixed_per_run_and_task():
    name = operator_job.job_name("9-Taxi_Tips" * 8, "gs://b/root/run-1/Trainer/model/7")
    assert name == operator_job.job_name("9-Taxi_Tips" * 8, "gs://b/root/run-1/Trainer/model/7/")
    assert name != operator_job.job_name("9-Taxi_Tips" * 8, "gs://b/root/run-2/Trainer/model/7")
    assert len(name) <= 47 and name[0].isalpha() and name.startswith("t-9-taxi-tips")


class Script:
    """A controller: each created job's pods and status follow ``steps`` [(seconds, pods' phases or a
    callback)]."""

    def __init__(self, steps=()) -> None:
        self.steps, self.api = list(steps), None
        self.jobs: list[dict[str, Any]] = []

    def created(self, job: dict[str, Any]) -> None:
        self.jobs.append(job)
        threading.Thread(target=self._play, args=(job,), daemon=True).start()

    def deleted(self, job: dict[str, Any]) -> None:
        self.api.finish_delete(job["metadata"]["namespace"], job["metadata"]["name"])

    def _play(self, job: dict[str, Any]) -> None:
        for seconds, step in self.steps:
            time.sleep(seconds)
            if (job["metadata"]["namespace"], job["metadata"]["name"]) not in self.api.jobs:
                return
            step(self.api, job)


def pods(states: dict[tuple[str, int], tuple[str, dict[str, Any]]]):
    """A step that sets replica pods: (kind, index) -> (phase, container state)."""

    def step(api: KubeApi, job: dict[str, Any]) -> None:
        for (kind, index), (phase, state) in states.items():
            pod = training_operator.pod(job, (kind, index), phase, state)
            log = api.logs.get((NAMESPACE, pod["metadata"]["name"]))
            api.put_pod(pod, log)
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        api.set_status(*key, training_operator.job_status(api.jobs[key], api.job_pods(*key)))

    return step


RUNNING = ("Running", {"running": {"startedAt": "2026-11-23T00:00:00Z"}})
DONE = ("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}})
ALL_RUNNING = {("Chief", 0): RUNNING, ("Worker", 0): RUNNING, ("Worker", 1): RUNNING, ("PS", 0): RUNNING}


@pytest.fixture
def task(tmp_path, monkeypatch):
    """A Trainer task's artifacts and properties, and a function running its executor against ``api``."""
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "Transform" / "transformed_examples")
    examples.set_string_custom_property(keys.SPLIT_COUNTS_PROPERTY, json.dumps({"train": 80, "eval": 20}))
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(tmp_path / "Transform" / "transform_graph")
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "run-1" / "Trainer" / "model")
    model_run = standard_artifacts.ModelRun()
    model_run.uri = str(tmp_path / "run-1" / "Trainer" / "model_run")
    config = TrainerCustomConfig({}, operator_job=settings(tmp_path))
    properties = {"custom_config": config.to_text(), "run_fn": "tfxd.trainer_module.run_fn.run_fn"}
    monkeypatch.setattr(job_launch, "POLL_SECONDS", 1)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KFP_POD_NAME", "demo-trainer-pod")
    monkeypatch.setenv("KFP_POD_UID", "uid-1")

    def run(api: KubeApi) -> None:
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE))
        job_launch.OperatorExecutor().Do({"examples": [examples], "transform_graph": [graph]},
                            {"model": [model], "model_run": [model_run]}, properties)

    run.model_uri = model.uri
    run.artifacts = ({"examples": [examples], "transform_graph": [graph]},
                     {"model": [model], "model_run": [model_run]}, properties)
    return run


def write_model(model_uri: str):
    def step(api: KubeApi, job: dict[str, Any]) -> None:
        os.makedirs(os.path.join(model_uri, "Format-Serving"), exist_ok=True)
    return step


def serve(script: Script):
    api = KubeApi((training_operator.TFJOBS,), controller=script)
    script.api = api
    return api


def rbac_allows() -> set[tuple[str, str]]:
    rules = [doc for doc in yaml.safe_load_all((REPO / "kubeflow" / "tfjob-rbac.yaml").read_text())
             if doc["kind"] == "Role"][0]["rules"]
    return {(verb, resource) for rule in rules for resource in rule["resources"] for verb in rule["verbs"]}


def test_success_follows_the_job_to_its_end(task, caplog):
    script = Script([(0.2, pods(ALL_RUNNING)), (0.5, write_model(task.model_uri)),
                     (0.1, pods({("Chief", 0): DONE, ("Worker", 0): DONE, ("Worker", 1): DONE, ("PS", 0): RUNNING}))])
    caplog.set_level("INFO", logger="absl")  # absl logs it; tf.Transform, run in-process earlier, sets absl to WARNING
    with serve(script) as api:
        task(api)
    job = script.jobs[0]
    assert job["metadata"]["name"] == operator_job.job_name("demo", task.model_uri)
    assert job["metadata"]["ownerReferences"][0] == {"apiVersion": "v1", "kind": "Pod", "name": "demo-trainer-pod",
                                                      "uid": "uid-1"}
    replica = operator_job.decode(job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"][0])
    assert keys.TrainerConfig.OPERATOR_JOB not in json.loads(replica["exec_properties"]["custom_config"])  # replicas train
    assert keys.TrainerConfig.BACKUP_DIR in json.loads(replica["exec_properties"]["custom_config"])
    text = caplog.text
    assert f"created TFJob {NAMESPACE}/{job['metadata']['name']} (1 Chief, 2 Worker, 1 PS)" in text
    assert "Running (Chief: 1 active; Worker: 2 active; PS: 1 active)" in text
    assert "Succeeded (Chief: 1 succeeded; Worker: 2 succeeded; PS: 1 active)" in text
    assert f"kubectl logs -n {NAMESPACE} -l training.kubeflow.org/job-name={job['metadata']['name']}" in text
    assert {(verb, resource) for verb, resource, _ in api.requests} <= rbac_allows()
    assert {ns for _, _, ns in api.requests} == {NAMESPACE}


def test_a_failed_replica_is_named_with_its_reason_and_log_and_the_job_deleted(task, tmp_path):
    log = tmp_path / "worker-1.log"
    log.write_text("epoch 1/10\nResourceExhausted: OOM when allocating tensor\n")

    def oom(api: KubeApi, job: dict[str, Any]) -> None:
        api.logs[(NAMESPACE, training_operator.pod_name(job["metadata"]["name"], "Worker", 1))] = str(log)
        pods({("Worker", 1): ("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}})})(api, job)

    script = Script([(0.2, pods(ALL_RUNNING)), (0.3, oom)])
    with serve(script) as api, pytest.raises(job_launch.TrainingJobFailed) as failure:
        task(api)
    name = script.jobs[0]["metadata"]["name"]
    message = str(failure.value)
    assert f"TFJob {NAMESPACE}/{name} failed: replica worker-1 (pod {name}-worker-1) OOMKilled (exit code 137): " \
           "out of memory; raise targets.kubeflow.trainer.resources.worker.memory" in message
    assert "ResourceExhausted: OOM when allocating tensor" in message
    assert not api.jobs and ("delete", "tfjobs", NAMESPACE) in api.requests


def test_a_replica_that_cannot_pull_its_image_fails_the_step_at_once(task):
    stuck = ("Pending", {"waiting": {"reason": "ImagePullBackOff",
                                     "message": 'Back-off pulling image "registry.example.com/demo:1.0"'}})
    script = Script([(0.2, pods({("Chief", 0): RUNNING, ("Worker", 0): stuck}))])
    with serve(script) as api, pytest.raises(job_launch.TrainingJobFailed) as failure:
        task(api)
    # failed on the stuck replica's reason (job_launch.STUCK), not at the job's deadline
    assert "did not finish within" not in str(failure.value)
    assert "replica worker-0" in str(failure.value) and "cannot start: ImagePullBackOff: Back-off pulling image" in \
        str(failure.value) and "check targets.kubeflow.image" in str(failure.value)
    assert not api.jobs


def test_the_operators_deadline_and_the_steps_own(task, monkeypatch):
    def late(api: KubeApi, job: dict[str, Any]) -> None:
        key = (NAMESPACE, job["metadata"]["name"])
        api.set_status(*key, training_operator.job_status(api.jobs[key], api.job_pods(*key), deadline_passed=True))

    with serve(Script([(0.2, pods(ALL_RUNNING)), (0.2, late)])) as api, pytest.raises(job_launch.TrainingJobFailed) as failure:
        task(api)
    assert "has failed because it was active longer than specified deadline" in str(failure.value)
    assert not api.jobs
    # an operator that never ends the job: the step stops it past the deadline and its grace
    monkeypatch.setattr(job_launch, "GRACE_SECONDS", 0)
    config = trainer_config.of(task.artifacts[2])
    quick = replace(config.operator_job, timeout="2s", timeout_seconds=2)
    task.artifacts[2]["custom_config"] = replace(config, operator_job=quick).to_text()
    with serve(Script([(0.2, pods(ALL_RUNNING))])) as api, pytest.raises(job_launch.TrainingJobFailed) as failure:
        task(api)
    assert "did not finish within 2s (targets.kubeflow.trainer.timeout)" in str(failure.value)
    assert not api.jobs


def test_a_retried_step_takes_over_or_replaces_its_own_job(task, caplog, tmp_path):
    caplog.set_level("INFO", logger="absl")  # absl logs it; tf.Transform, run in-process earlier, sets absl to WARNING
    # the first attempt's job still runs (its pod was evicted): the retry replaces it under the same name
    script = Script([(0.2, pods(ALL_RUNNING))])
    with serve(script) as api:
        name = operator_job.job_name("demo", task.model_uri)
        body = manifest.body(name, NAMESPACE, settings(tmp_path), ["OLD"])
        api.controller = None
        api.jobs[(NAMESPACE, name)] = {**body, "status": {"conditions": [
            {"type": "Running", "status": "True"}]}}
        api.jobs[(NAMESPACE, name)]["metadata"].update(uid="old", resourceVersion="1")
        api.controller = script
        script.steps.append((0.3, write_model(task.model_uri)))
        script.steps.append((0.1, pods({("Chief", 0): DONE})))
        task(api)
        verbs = [(verb, resource) for verb, resource, _ in api.requests]
        assert verbs.index(("delete", "tfjobs")) < verbs.index(("create", "tfjobs"))
        assert [job["metadata"]["name"] for job in script.jobs] == [name]
        assert f"replacing TFJob {NAMESPACE}/{name}, left Running by an earlier attempt" in caplog.text
        # and once more: the job of the attempt before succeeded and its model is there: taken as it is
        task(api)
        assert len(script.jobs) == 1
        assert "succeeded: taking its model" in caplog.text


def test_a_stopped_step_deletes_its_job(task, tmp_path):
    """SIGTERM (a cancelled run, an evicted pod) deletes the TFJob; the step ends as stopped (143)."""
    inputs, outputs, properties = task.artifacts
    from tfx.types import artifact_utils

    payload = json.dumps({"inputs": artifact_utils.jsonify_artifact_dict(inputs),
                          "outputs": artifact_utils.jsonify_artifact_dict(outputs), "exec_properties": properties})
    code = ("import json, sys\nfrom absl import logging\nlogging.set_verbosity(logging.INFO)\nfrom tfx.types import artifact_utils\nfrom tfxd.components.trainer import job_launch\n"
            "p = json.loads(sys.stdin.read())\n"
            "job_launch.OperatorExecutor().Do(artifact_utils.parse_artifact_dict(p['inputs']), "
            "artifact_utils.parse_artifact_dict(p['outputs']), p['exec_properties'])\n")
    with serve(Script([(0.2, pods(ALL_RUNNING))])) as api:
        env = {**os.environ, "KUBECONFIG": api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE)}
        process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        process.stdin.write(payload)
        process.stdin.close()
        process.stdin = None  # communicate() below must not flush it
        deadline = time.monotonic() + 120
        while not any(job.get("status", {}).get("conditions") for job in api.jobs.values()):
            assert time.monotonic() < deadline and process.poll() is None, process.stdout.read()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0]
    assert process.returncode == -signal.SIGTERM, output
    assert "deleted TFJob" in output and "the step was stopped (SIGTERM)" in output
    assert not api.jobs


def test_the_api_refuses_what_the_operator_refuses(tmp_path, monkeypatch):
    """The stand-in API is only proof if it refuses what the cluster does: the webhook's rules and a
    field the CRD lacks (which a real server would drop)."""
    from kubernetes import client, config

    with KubeApi((training_operator.TFJOBS,)) as api:
        config.load_kube_config(config_file=api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE))
        custom = client.CustomObjectsApi()
        good = manifest.body("demo-trainer-1", NAMESPACE, settings(tmp_path), ["A"])

        def refused(body: dict[str, Any]) -> str:
            with pytest.raises(client.exceptions.ApiException) as refusal:
                custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", body)
            return f"{refusal.value.status} {json.loads(refusal.value.body)['message']}"

        renamed = json.loads(json.dumps(good))
        renamed["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
        assert refused(renamed).startswith("403 admission webhook") and "container with name tensorflow" in \
            refused(renamed)
        numbered = {**good, "metadata": {**good["metadata"], "name": "1-trainer"}}
        assert "DNS-1035" in refused(numbered)
        typo = json.loads(json.dumps(good))
        typo["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["nodeSelectors"] = {"a": "b"}
        assert "422" in refused(typo) and "nodeSelectors: field not declared in schema" in refused(typo)
        typo["spec"]["runPolicy"]["cleanupPolicy"] = "All"
        assert "spec.runPolicy.cleanupPolicy: field not declared" in refused(typo)
        custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", good)
        assert refused(good).startswith("409")
    # the Training Operator's own code (tests/conformance) takes the good body and refuses each of the others
    # (imported here: that module imports this one)
    from tests.conformance.test_training_operator import accepted, judged

    accepted(good, tmp_path)
    assert "container with name tensorflow" in judged(renamed, tmp_path).stderr
    assert "DNS-1035" in judged(numbered, tmp_path).stderr
    assert 'unknown field "spec.runPolicy.cleanupPolicy", unknown field ' \
           '"spec.tfReplicaSpecs.PS.template.spec.nodeSelectors"' in judged(typo, tmp_path).stderr


def test_replicas_default_to_the_pipeline_pods_service_account(tmp_path, monkeypatch):
    """The step's pod token names its service account (a bound token's claims); replicas in the same
    namespace run as it, so they reach the bucket with the pipeline's rights. Elsewhere: none is set."""
    import base64

    from tfxd.components.trainer import kubernetes_client

    claims = {"iss": "https://kubernetes.default.svc", "kubernetes.io": {
        "namespace": NAMESPACE, "serviceaccount": {"name": "pipeline-runner", "uid": "u"}}}
    encoded = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    (tmp_path / "token").write_text(f"eyJhbGciOiJSUzI1NiJ9.{encoded}.c2lnbmF0dXJl")
    monkeypatch.setattr(kubernetes_client, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with KubeApi((training_operator.TFJOBS,)) as api:
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE))
        assert kubernetes_client.Kubernetes().use(tfjob.TFJob()).own_service_account() == "pipeline-runner"
        assert kubernetes_client.Kubernetes("other-team").use(tfjob.TFJob()).own_service_account() is None


def test_what_the_cluster_answers_is_said_with_its_fix(tmp_path, monkeypatch):
    """RBAC's 403 (the Role to apply), the webhook's 403 (its own words), a cluster without the TFJob kind
    (the operator to install): the kubernetes client's own exceptions, as the API server words them."""
    from kubernetes.client.exceptions import ApiException

    from tfxd.components.trainer import kubernetes_client

    def answer(status: int, reason: str, message: str) -> ApiException:
        exc = ApiException(status=status, reason=reason)
        exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
        return exc

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with KubeApi((training_operator.TFJOBS,)) as api:
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE))
        kube = kubernetes_client.Kubernetes().use(tfjob.TFJob())
    rbac = kube._explain("create", answer(403, "Forbidden", 'tfjobs.kubeflow.org is forbidden: User '
                         '"system:serviceaccount:kubeflow:pipeline-runner" cannot create resource "tfjobs"'))
    assert "may not create tfjobs in namespace team-a (HTTP 403): apply kubeflow/tfjob-rbac.yaml" in rbac
    webhook = kube._explain("create", answer(403, "Forbidden", 'admission webhook "validator.tfjob.training-'
                            'operator.kubeflow.org" denied the request: spec.tfReplicaSpecs: Forbidden'))
    assert webhook.startswith("the Training Operator refused the TFJob: admission webhook")
    missing = kube._explain("create", answer(404, "Not Found", "the server could not find the requested resource"))
    assert "does not know TFJobs (kubeflow.org/v1): install the Kubeflow Training Operator" in missing


def test_a_frozen_replica_is_named_as_the_cause_and_the_failed_one_as_its_reporter(task, tmp_path):
    """Worker 1 stops answering while its pod runs (frozen, cut off): TensorFlow's coordination service fails
    worker 0, naming task 1 (tests/components/trainer/test_peer_blame.py has TensorFlow's lines). The step
    names worker 1 and where its log is, not worker 0, whose pod alone failed."""
    from tests.components.trainer.test_peer_blame import ABORTED, AGENT

    log = tmp_path / "worker-0.log"
    log.write_text(f"epoch 3/10\n{AGENT}\nTraceback (most recent call last):\n{ABORTED}\n")

    def reported(api: KubeApi, job: dict[str, Any]) -> None:
        api.logs[(NAMESPACE, training_operator.pod_name(job["metadata"]["name"], "Worker", 0))] = str(log)
        pods({("Worker", 0): ("Failed", {"terminated": {"exitCode": 1, "reason": "Error"}})})(api, job)

    script = Script([(0.2, pods(ALL_RUNNING)), (0.3, reported)])
    with serve(script) as api, pytest.raises(job_launch.TrainingJobFailed) as failure:
        task(api)
    name = script.jobs[0]["metadata"]["name"]
    message = str(failure.value)
    assert message.startswith(
        f"TFJob {NAMESPACE}/{name} failed: replica worker-1 (pod {name}-worker-1) stopped answering while running "
        "(frozen, hung, or cut off from the others): TensorFlow lost it (Task /job:worker/replica:0/task:1 heartbeat "
        f"timeout); its log: kubectl logs -n {NAMESPACE} {name}-worker-1. Reported by replica worker-0 (pod "
        f"{name}-worker-0) Error (exit code 1); its last lines:\n"), message
    assert ABORTED in message
