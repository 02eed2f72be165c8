"""The Trainer as a Kubeflow Trainer v2 TrainJob on tfxd's TensorFlow runtime: the exact TrainJob body for
MultiWorkerMirrored and for ParameterServer with a GPU per worker; the operator chosen at run time (`auto`
takes a TrainJob where the cluster serves one, else a TFJob; an explicit operator the cluster lacks is
refused with the fix), through API discovery against the loopback API; the spec keys one operator cannot
honour refused at validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.kubeflow.conftest import SPEC_TEXT
from tfxd import keys
from tfxd.components.trainer import job_launch, kubernetes_client, operator_job, trainjob
from tfxd.components.trainer.tfjob import TFJob
from tfxd.components.trainer.trainjob import TrainJob
from tfxd.kubeflow.replay.kube_api import KubeApi
from tfxd.kubeflow.replay.training_operator import TFJOBS
from tfxd.pipeline.assembly.configs import operator_settings
from tfxd.pipeline.spec.errors import SpecError
from tfxd.pipeline.spec.load import load_spec
from tfxd.trainer_config import OperatorSettings

NAMESPACE = "team-a"
TRAINER = {"operator": "trainjob", "workers": 2, "namespace": NAMESPACE,
           "resources": {"worker": {"cpu": 4, "memory": "16Gi", "gpu": 1}},
           "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
           "service_account": "trainer", "timeout": "2h"}
OWNER = {"name": "demo-trainer-pod", "uid": "u-1"}


def loaded(tmp_path: Path, trainer: dict[str, Any]):
    path = tmp_path / "demo.yaml"
    path.write_text(SPEC_TEXT)
    return load_spec(str(path), [f"targets.kubeflow.trainer={json.dumps(trainer)}", "targets.kubeflow.root=gs://b/kfp"],
                     target="kubeflow", check_files=False)


def settings(tmp_path: Path, **trainer: Any) -> OperatorSettings:
    """targets.kubeflow.trainer as the assembly hands it to the launcher, from a spec."""
    spec = loaded(tmp_path, {**TRAINER, **trainer}).spec
    return operator_settings(spec.name, spec.targets.kubeflow)


def expected(nodes: int, servers: int, resources: dict[str, Any] | None) -> dict[str, Any]:
    trainer: dict[str, Any] = {
        "image": "registry.example.com/demo:1.0", "command": ["python", "-m", "tfxd.components.trainer.operator_replica"],
        "args": ["ARGS"], "numNodes": nodes,
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "TFXD_TRAINJOB_NODES", "value": str(nodes)},
                {"name": "TFXD_TRAINJOB_PARAMETER_SERVERS", "value": str(servers)}]}
    if resources:
        trainer["resourcesPerNode"] = resources
    pod = {"serviceAccountName": "trainer", "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "demo-trainer-0123456789", "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "tfxd", "tfxd.dev/pipeline": "demo"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "demo-trainer-pod",
                                          "uid": "u-1"}]},
        "spec": {"runtimeRef": {"name": "tfxd-tensorflow", "apiGroup": "trainer.kubeflow.org",
                                "kind": "ClusterTrainingRuntime"},
                 "trainer": trainer, "activeDeadlineSeconds": 7200,
                 "runtimePatches": [{"manager": "tfxd.dev/trainer", "trainingRuntimeSpec": {"template": {"spec": {
                     "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]}}


def test_trainjob_body_for_two_workers(tmp_path):
    body = trainjob.body("demo-trainer-0123456789", NAMESPACE, settings(tmp_path, resources={"worker": {"cpu": 4}}),
                         ["ARGS"], owner=OWNER)
    assert body == expected(2, 0, {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}})
    assert TrainJob().shape(body) == "2 nodes, all workers"


def test_trainjob_body_for_two_workers_one_ps_and_a_gpu_per_node(tmp_path):
    body = trainjob.body("demo-trainer-0123456789", NAMESPACE, settings(tmp_path, parameter_servers=1), ["ARGS"],
                         owner=OWNER)
    gpu = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}
    assert body == expected(4, 1, gpu)  # a chief, 2 workers, 1 ps: Trainer v2 sizes every node alike
    assert TrainJob().shape(body) == "4 nodes: a chief, 2 workers, 1 PS"


def test_trainjob_state_and_progress_from_its_status():
    job = TrainJob()
    running = {"status": {"jobsStatus": [{"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0}]}}
    assert job.state({}) is None and job.state(running) == "Running"
    assert job.progress(running) == "job node: 1 active, 1 ready"
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    failed = {"status": {"conditions": [{"type": "Complete", "status": "False"}, {"type": "Failed", "status": "True"}]}}
    assert job.state(done) == "Succeeded" and job.state(failed) == "Failed"
    pod = {"metadata": {"labels": {keys.TrainJob.COMPLETION_INDEX_LABEL: "1"}}}
    assert job.replica(pod) == "node-1"


@pytest.mark.parametrize(("wanted", "served", "chosen"), [
    ("auto", {"trainjob": True, "tfjob": True}, "TrainJob"),
    ("auto", {"trainjob": True, "tfjob": False}, "TrainJob"),
    ("auto", {"trainjob": False, "tfjob": True}, "TFJob"),
    ("tfjob", {"tfjob": True}, "TFJob"),
    ("trainjob", {"trainjob": True}, "TrainJob"),
])
def test_the_operator_chosen_from_what_the_cluster_serves(wanted, served, chosen):
    job, why = job_launch.choose_operator(wanted, served)
    assert chosen == job.KIND
    if wanted == "auto":
        assert why.startswith(f"auto: the cluster serves {job.PLURAL} ({job.GROUP}/{job.VERSION})")
    else:
        assert why == f"targets.kubeflow.trainer.operator: {wanted}"


def test_the_spec_offers_the_operators_the_trainer_can_launch():
    """The spec's choices (pipeline/spec/targets.py) and the Trainer's table (job_launch.OPERATORS) name the
    same operators: one added to either alone would be accepted at validate and fail on the cluster, or be
    unreachable."""
    from typing import get_args

    from tfxd.pipeline.spec.targets import KubeflowTrainer

    assert set(get_args(KubeflowTrainer.model_fields["operator"].annotation)) == {"auto", *job_launch.OPERATORS}


def test_an_operator_the_cluster_lacks_is_refused_with_the_fix():
    with pytest.raises(job_launch.TrainingJobFailed) as lacking:
        job_launch.choose_operator("trainjob", {"trainjob": False})
    assert str(lacking.value) == (
        "targets.kubeflow.trainer.operator is trainjob, and this cluster does not serve trainjobs "
        "(trainer.kubeflow.org/v1alpha1): install Kubeflow Trainer v2 and tfxd's TensorFlow runtime (tfxd "
        "kubeflow-manifest trainjob-runtime | kubectl apply -f -), or set operator: auto to take the one the "
        "cluster has")
    with pytest.raises(job_launch.TrainingJobFailed, match="this cluster serves neither trainjobs "
                       r"\(trainer.kubeflow.org/v1alpha1\) nor tfjobs \(kubeflow.org/v1\): install Kubeflow Trainer"):
        job_launch.choose_operator("auto", {"trainjob": False, "tfjob": False})


def test_the_cluster_is_asked_through_api_discovery(tmp_path, monkeypatch):
    """The loopback API serves tfjobs and no trainjobs, as a cluster with only the Training Operator does."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with KubeApi((TFJOBS,)) as api:
        monkeypatch.setenv("KUBECONFIG", api.kubeconfig(str(tmp_path / "kubeconfig"), NAMESPACE))
        kube = kubernetes_client.Kubernetes()
        served = {name: kube.serves(job) for name, job in job_launch.OPERATORS.items()}
    assert served == {"trainjob": False, "tfjob": True}
    assert job_launch.choose_operator("auto", served)[0].KIND == TFJob.KIND
    assert api.requests == []  # discovery needs no Role: every authenticated account may ask


@pytest.mark.parametrize(("trainer", "key", "message"), [
    ({"operator": "trainjob", "clean_pod_policy": "All"}, "clean_pod_policy",
     "clean_pod_policy is the Training Operator's (a TFJob's)"),
    ({"operator": "trainjob", "parameter_servers": 1, "resources": {"ps": {"cpu": 2}}}, "resources.ps",
     "Kubeflow Trainer sizes every node of a TrainJob alike"),
    ({"operator": "tfjob", "runtime": "my-runtime"}, "runtime", "runtime names the ClusterTrainingRuntime of a TrainJob"),
    ({"operator": "openmpi"}, "operator", "allowed values: auto, tfjob, trainjob"),
])
def test_keys_the_chosen_operator_cannot_honour_are_refused(tmp_path, trainer, key, message):
    with pytest.raises(SpecError) as refused:
        loaded(tmp_path, {"workers": 2, **trainer})
    text = str(refused.value)
    assert f"targets.kubeflow.trainer.{key}" in text and message in text


def test_the_name_fits_the_pods_jobset_makes():
    """JobSet refuses a JobSet whose pod names (`<name>-node-0-<i>-<5 random>`) pass 63 characters."""
    name = operator_job.job_name("a" * 80, "gs://b/r/Trainer/model/1")
    assert len(f"{name}-node-0-99-abcde") <= 63


def rbac_allows(name: str) -> set[tuple[str, str, str]]:
    rules = [doc for doc in yaml.safe_load_all((REPO / "kubeflow" / name).read_text()) if doc["kind"] == "Role"][0]["rules"]
    return {(verb, group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def test_the_trainjob_role_allows_the_calls_the_tfjob_role_allows_on_trainjobs():
    """The launcher makes the same calls for either operator (job_launch.Launch through kubernetes_client);
    test_tfjob checks every call it makes against tfjob-rbac.yaml."""
    tfjobs = {(verb, keys.TrainJob.GROUP if group == keys.TFJob.GROUP else group,
               keys.TrainJob.PLURAL if resource == keys.TFJob.PLURAL else resource)
              for verb, group, resource in rbac_allows("tfjob-rbac.yaml")}
    assert rbac_allows("trainjob-rbac.yaml") == tfjobs


@pytest.mark.parametrize("name", ["trainjob-runtime", "trainjob-rbac", "tfjob-rbac"])
def test_tfxd_prints_the_manifests_a_cluster_admin_applies(name):
    result = run_cli("kubeflow-manifest", name)
    assert result.exit_code == 0 and result.stdout == (REPO / "kubeflow" / f"{name}.yaml").read_text()
    documents = list(yaml.safe_load_all(result.stdout))  # YAML kubectl reads, each a Kubernetes object
    assert documents and all(document["apiVersion"] and document["kind"] for document in documents)


def test_an_unknown_manifest_is_refused_with_the_names_there_are():
    result = run_cli("kubeflow-manifest", "pytorch-runtime")
    assert result.exit_code == 2 and "'trainjob-runtime', 'trainjob-rbac', 'tfjob-rbac'" in result.stderr



@pytest.mark.parametrize(("servers", "tasks"), [(0, ["worker-0", "worker-1", "worker-2", "worker-3"]),
                                                 (1, ["chief-0", "worker-0", "worker-1", "ps-0"])])
def test_each_node_is_the_task_its_tf_config_names(tmp_path, servers, tasks):
    """A TrainJob's pods are named by node; TensorFlow's errors name TF_CONFIG tasks, which each node
    derives from its JobSet environment (trainer_module/cluster.py): the launcher maps one to the other."""
    from tfxd.trainer_module.cluster import from_jobset

    body = trainjob.body("demo-trainer-0123456789", NAMESPACE,
                         settings(tmp_path, workers=4 - servers - (1 if servers else 0), parameter_servers=servers),
                         ["ARGS"], owner=None)
    assert body["spec"]["trainer"]["numNodes"] == 4
    names = keys.TrainJob
    pods = [{"metadata": {"labels": {names.COMPLETION_INDEX_LABEL: str(node)}}} for node in range(4)]
    assert [TrainJob().task(pod, body) for pod in pods] == tasks
    for node, task in enumerate(tasks):  # the node's own view, from the environment the runtime gives it
        cluster = from_jobset({names.JOBSET_NAME_ENV: "demo", names.REPLICATED_JOB_ENV: "node", names.JOB_INDEX_ENV: "0",
                               names.COMPLETION_INDEX_ENV: str(node), names.NODES_ENV: "4",
                               names.PARAMETER_SERVERS_ENV: str(servers)})
        assert f"{cluster.task_type}-{cluster.task_index}" == task


@pytest.mark.parametrize(("servers", "node", "goes_on", "why"), [
    (1, 1, True, ""), (1, 2, True, ""),
    (1, 0, False, "node 0 (chief 0) was started again after its pod was killed (2 of its pods failed"),
    (1, 3, False, "a parameter server's variables went with its pod"),
    (0, 1, False, "a MultiWorkerMirrored worker cannot rejoin its peers' collective")])
def test_a_node_started_again_goes_on_only_as_a_parameter_server_worker(servers, node, goes_on, why):
    """The Job controller gives a node killed by a signal a new pod (tfxd's runtime, backoffLimitPerIndex),
    whose failure count the node reads: a ParameterServer worker rejoins (TensorFlow's coordinator takes
    it back); any other node refuses, with an error, which fails the Job (the runtime's podFailurePolicy)."""
    from tfxd.trainer_module.cluster import ClusterError, from_jobset

    names = keys.TrainJob
    env = {names.JOBSET_NAME_ENV: "demo", names.REPLICATED_JOB_ENV: "node", names.JOB_INDEX_ENV: "0",
           names.COMPLETION_INDEX_ENV: str(node), names.NODES_ENV: "4", names.PARAMETER_SERVERS_ENV: str(servers),
           names.INDEX_FAILURES_ENV: "0"}
    from_jobset(env)  # the first pod of every node
    if goes_on:
        assert from_jobset({**env, names.INDEX_FAILURES_ENV: "2"}).task_type == "worker"
        return
    with pytest.raises(ClusterError) as refused:
        from_jobset({**env, names.INDEX_FAILURES_ENV: "2"})
    assert why in str(refused.value) and "fails the TrainJob; retry the pipeline's step" in str(refused.value)
