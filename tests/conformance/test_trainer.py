"""tfxd's TensorFlow runtime (kubeflow/trainjob-runtime.yaml) and every TrainJob tfxd builds, judged by
Kubeflow Trainer v2's own code and JobSet's (v2.3.0 and v0.12.0, run by build/conformance/trainer,
conformance/trainer/): both CRDs' schemas as the API server applies them (with their CEL rules), Trainer's
webhooks, Trainer's controller building the JobSet from the TrainJob and the runtime, JobSet's webhooks and
controller, and the pods the Job controller makes of it. Each node's TF_CONFIG is derived from the
environment the real code gives that pod (trainer_module/cluster.py), names the hosts JobSet gives the
nodes, and plans MultiWorkerMirrored or ParameterServer. The stand-in `tfxd replay` runs them on
(kubeflow/replay/trainer_v2.py) gives each node the same environment, host and labels, and refuses what
the real code refuses in its words. Negative cases show the real code refusing: a runtime reference that
names no runtime, an unknown field, a name that is no DNS label, a runtime without the trainer's container."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.components.trainer.test_trainjob import NAMESPACE, OWNER, loaded, settings
from tests.conftest import REPO
from tfxd import keys
from tfxd.components.trainer import trainjob
from tfxd.kubeflow.replay import kube_api, trainer_v2
from tfxd.pipeline.spec.errors import SpecError
from tfxd.trainer_module.cluster import from_environment
from tfxd.trainer_module.planner import Devices, plan

JUDGE = REPO / "build" / "conformance" / "trainer"
RUNTIME = REPO / "kubeflow" / "trainjob-runtime.yaml"


def judged(body: dict[str, Any], tmp_path: Path, runtime: Path = RUNTIME) -> subprocess.CompletedProcess:
    """The judge's answer for ``body`` on ``runtime`` (both as a user would kubectl apply them)."""
    assert JUDGE.is_file(), f"{JUDGE} is missing: `make conformance` builds it (make test does)"
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return subprocess.run([str(JUDGE), str(runtime), str(path)], capture_output=True, text=True, timeout=60)


def accepted(body: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    result = judged(body, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def refusal(body: dict[str, Any], tmp_path: Path, runtime: Path = RUNTIME) -> str:
    result = judged(body, tmp_path, runtime)
    assert result.returncode == 1 and not result.stdout, result.stdout + result.stderr
    return result.stderr


def environment(pod: dict[str, Any]) -> dict[str, str]:
    """The node container's environment as the kubelet gives it (the downward API's values resolved)."""
    [container] = [c for c in pod["containers"] if c["name"] == keys.TrainJob.CONTAINER]
    return {env["name"]: env["value"] if "value" in env else env["resolved"] for env in container["env"]}


CASES = {  # MultiWorkerMirrored over 2 workers; ParameterServer with a chief, 2 workers and 1 ps
    "two-workers": ({"parameter_servers": 0}, ["worker:0", "worker:1"], "multi_worker_mirrored"),
    "two-workers-one-ps": ({"parameter_servers": 1}, ["chief:0", "worker:0", "worker:1", "ps:0"], "parameter_server"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_real_code_makes_the_nodes_each_derives_its_tf_config_from(case, tmp_path):
    trainer, roles, strategy = CASES[case]
    body = trainjob.body(f"taxi-trainer-{case}", NAMESPACE, settings(tmp_path, **trainer), ["--args"], owner=OWNER)
    real = accepted(body, tmp_path)
    [job] = real["jobSet"]["replicatedJobs"]
    assert (job["name"], job["parallelism"], job["completions"], job["completionMode"]) == (
        "node", len(roles), len(roles), "Indexed")
    assert job["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert (job["backoffLimit"], job["backoffLimitPerIndex"], job["maxFailedIndexes"]) == (None, 3, 0)
    assert real["jobSet"]["subdomain"] == real["jobSet"]["headlessService"] == body["metadata"]["name"]
    pods = sorted(real["pods"], key=lambda pod: pod["podIndex"])
    clusters = [from_environment(environment(pod)) for pod in pods]
    assert [f"{c.task_type}:{c.task_index}" for c in clusters] == roles
    hosts = [address.rsplit(":", 1)[0] for kind in ("chief", "worker", "ps") for address in
             clusters[0].spec.get(kind, [])]
    assert hosts == [pod["fqdn"] for pod in pods]  # the names JobSet gives the nodes, in node order
    assert all(c.spec == clusters[0].spec for c in clusters)
    for pod in pods:  # what tfxd asked of every node, as the real code built it
        [container] = pod["containers"]
        assert container["image"] == "registry.example.com/demo:1.0" and container["args"] == ["--args"]
        assert container["command"] == ["python", "-m", "tfxd.components.trainer.operator_replica"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert (pod["serviceAccountName"], pod["restartPolicy"], pod["terminationGracePeriodSeconds"]) == (
            "trainer", "Never", 30)
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        assert pod["annotations"]["sidecar.istio.io/inject"] == "false"
    stand_in = trainer_v2.replicas(body)  # what replay runs: the same nodes, hosts, environments and labels
    assert [replica.env for replica in stand_in] == [environment(pod) for pod in pods]
    assert [replica.pod.rsplit("-", 1)[0] for replica in stand_in] == [pod["hostname"] for pod in pods]
    assert [address.rsplit(":", 1)[0] for address in stand_in[0].addresses] == [pod["fqdn"] for pod in pods]
    for index, pod in enumerate(pods):
        labels = trainer_v2.labels(body, index)
        assert labels == {key: pod["labels"][key] for key in labels}
    chief = plan(environment(pods[0]), Devices())
    assert (chief.strategy, chief.is_chief, chief.replicas) == (strategy, True, 2)
    assert not plan(environment(pods[1]), Devices()).is_chief


def test_the_real_code_refuses_a_missing_runtime_an_unknown_field_and_a_runtime_without_the_node(tmp_path):
    good = trainjob.body("taxi-trainer-1", NAMESPACE, settings(tmp_path), ["A"])
    accepted(good, tmp_path)

    elsewhere = copy.deepcopy(good)
    elsewhere["spec"]["runtimeRef"]["name"] = "torch-distributed"
    said = refusal(elsewhere, tmp_path)
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in said
    assert '"torch-distributed" not found: specified clusterTrainingRuntime must be created before' in said
    stand_in_agrees(good, elsewhere, said, 'clustertrainingruntimes.trainer.kubeflow.org "torch-distributed" not found: '
                    "specified clusterTrainingRuntime must be created before the TrainJob is created")

    unknown = copy.deepcopy(good)
    unknown["spec"]["trainer"]["numNode"] = 2
    said = refusal(unknown, tmp_path)
    assert 'unknown field "spec.trainer.numNode"' in said
    stand_in_agrees(good, unknown, said, 'strict decoding error: unknown field "spec.trainer.numNode"')

    # two at once: the strict decoder names each (k8s.io/apimachinery runtime/error.go, strictDecodingError),
    # sorted by pruning (apiextensions-apiserver schema/pruning/algorithm.go)
    unknowns = copy.deepcopy(unknown)
    unknowns["spec"]["suspended"] = True
    said = refusal(unknowns, tmp_path)
    stand_in_agrees(good, unknowns, said,
                    'strict decoding error: unknown field "spec.suspended", unknown field "spec.trainer.numNode"')

    dotted = copy.deepcopy(good)
    dotted["metadata"]["name"] = "taxi.trainer"
    said = refusal(dotted, tmp_path)
    stand_in_agrees(good, dotted, said, "metadata.name must match RFC 1035 DNS label format")

    runtime = yaml.safe_load(RUNTIME.read_text())
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]["name"] = "tensorflow"
    renamed = tmp_path / "renamed-runtime.yaml"
    renamed.write_text(yaml.safe_dump(runtime))
    said = refusal(good, tmp_path, renamed)
    assert "must contain the required container for the ancestor: trainer" in said


def stand_in_agrees(good: dict[str, Any], bad: dict[str, Any], real: str, words: str) -> None:
    """The replay's stand-in takes ``good`` and refuses ``bad``, saying ``words`` as the real code said them."""
    assert words in real, real
    trainer_v2.validate(good, NAMESPACE)
    with pytest.raises(kube_api.Invalid) as refused:
        trainer_v2.validate(bad, NAMESPACE)
    assert words in refused.value.message, refused.value.message


def test_zero_nodes_pass_trainer_v2_3_so_tfxd_refuses_them_itself(tmp_path):
    """Trainer v2.3.0 has no minimum on numNodes (kubeflow/trainer #3805, fixed after it): a TrainJob of
    zero nodes is accepted, Trainer and JobSet build its Job, and the Job API refuses that Job (its
    success policy names node 0, which it has not): a training that never starts. tfxd's spec refuses it."""
    empty = trainjob.body("taxi-trainer-0", NAMESPACE, settings(tmp_path), ["A"])
    empty["spec"]["trainer"]["numNodes"] = 0
    said = refusal(empty, tmp_path)
    assert said.startswith("the Job API refuses Job taxi-trainer-0-node-0: ") and "too large index" in said
    with pytest.raises(SpecError, match="targets.kubeflow.trainer.workers"):
        loaded(tmp_path, {"operator": "trainjob", "workers": 0})


def failures(body: dict[str, Any], tmp_path: Path, runtime: Path = RUNTIME) -> dict[str, Any]:
    """What the Job API and the Job controller do when node 1's pod fails: with each of CODES once, and
    killed by SIGKILL every time (conformance/trainer/jobs.go)."""
    path = tmp_path / "failing.yaml"
    path.write_text(yaml.safe_dump(body))
    result = subprocess.run([str(JUDGE), "--failures", "1", "--exit-codes", ",".join(map(str, CODES)),
                             "--repeated", "137", str(runtime), str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["failures"]


CODES = (1, 2, 3, 126, 127, 128, 134, 137, 143, 255)


def test_a_node_killed_by_a_signal_gets_a_new_pod_and_an_error_fails_the_job_as_the_job_controller_does(tmp_path):
    """The runtime's podFailurePolicy, backoffLimitPerIndex and maxFailedIndexes through the Job API's own
    validation and kube-controller-manager's own Job controller (k8s.io/kubernetes v1.36: pkg/registry/
    batch/job, pkg/controller/job): an error exit fails the Job at once; a signal's (128 or more: preempted,
    evicted, out of memory) gets a new pod, whose failure-count annotation the node reads, up to 3 times;
    the fourth fails the Job. The stand-in replay runs (trainer_v2) decides each the same way, with the
    controller's words and wait, and gives the new pod the environment the real one has."""
    body = trainjob.body("taxi-trainer-ps", NAMESPACE, settings(tmp_path, parameter_servers=1), ["A"])
    real = failures(body, tmp_path)
    assert real["podFailureBackoffSeconds"] == trainer_v2.POD_FAILURE_BACKOFF
    for code in CODES:
        fate = real["byExitCode"][str(code)]
        assert fate["newPodsFailureCounts"] == ([] if code < 128 else ["1"]), code
        assert trainer_v2.restarts(body, ("node", 1), code, 0) == (code >= 128)
        stand_in = trainer_v2.fate(code, 0, "team-a/POD")
        if code < 128:
            assert fate["jobFailedReason"] == stand_in[0] == "PodFailurePolicy"
            pod = fate["jobFailedMessage"].split("for pod ")[1].split(" ")[0]
            assert fate["jobFailedMessage"] == trainer_v2.fate(code, 0, pod)[1]
        else:
            assert stand_in is None
    repeated = real["repeated"]
    assert repeated["newPodsFailureCounts"] == ["1", "2", "3"]
    assert repeated["jobFailedReason"] == "MaxFailedIndexesExceeded"
    assert [trainer_v2.restarts(body, ("node", 1), 137, n) for n in range(4)] == [True, True, True, False]
    assert trainer_v2.fate(137, 3) == (repeated["jobFailedReason"], repeated["jobFailedMessage"])
    # the count the new pod's annotation carries reaches the node, which goes on as a worker
    again = trainer_v2.restarted_env(body, ("node", 1), 1)
    assert again[keys.TrainJob.INDEX_FAILURES_ENV] == "1"
    assert (from_environment(again).task_type, from_environment(again).task_index) == ("worker", 0)
    assert [trainer_v2.restart_delay(n) for n in (1, 2, 3)] == [10.0, 20.0, 40.0]


def test_the_job_controller_judge_bites(tmp_path):
    """The judge run on the runtime as it was (backoffLimit 0, no policy): the Job controller fails the
    Job on the first killed node, where tfxd's runtime gives it a new pod; and the Job API refuses a
    policy it cannot take (exit code 0 in an In rule)."""
    body = trainjob.body("taxi-trainer-ps", NAMESPACE, settings(tmp_path, parameter_servers=1), ["A"])
    runtime = yaml.safe_load(RUNTIME.read_text())
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    strict = copy.deepcopy(runtime)
    spec = strict["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    for key in ("backoffLimitPerIndex", "maxFailedIndexes", "podFailurePolicy"):
        del spec[key]
    spec["backoffLimit"] = 0
    path = tmp_path / "strict-runtime.yaml"
    path.write_text(yaml.safe_dump(strict))
    fate = failures(body, tmp_path, path)["byExitCode"]["137"]
    assert (fate["newPodsFailureCounts"], fate["jobFailedReason"]) == ([], "BackoffLimitExceeded")

    node["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"].insert(0, 0)
    path = tmp_path / "zero-runtime.yaml"
    path.write_text(yaml.safe_dump(runtime))
    said = refusal(body, tmp_path, path)
    assert said.startswith("the Job API refuses Job taxi-trainer-ps-node-0: ")
    assert "must not be 0 for the In operator" in said
