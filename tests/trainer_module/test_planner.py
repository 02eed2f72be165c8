"""The planner, table-driven: every row of docs/distributed.md's decision table and every refusal."""

from __future__ import annotations

import json

import pytest

from tfxd.trainer_module.cluster import ClusterError, from_environment
from tfxd.trainer_module.planner import Devices, PlanError, Strategy, cluster_refusal, plan

CPU = Devices()
ONE_GPU = Devices(gpus=1, gpu_compute_capability=(7, 5))
FOUR_GPUS = Devices(gpus=4, gpu_compute_capability=(8, 0))
OLD_GPUS = Devices(gpus=2, gpu_compute_capability=(6, 0))
TPU = Devices(tpu="local", tpu_cores=8)


def tf_config(cluster: dict, kind: str, index: int = 0) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})}


TWO_WORKERS = {"worker": ["localhost:2222", "localhost:2223"]}
PS_CLUSTER = {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]}


@pytest.mark.parametrize(("env", "devices", "strategy", "replicas", "is_chief", "extra"), [
    # 1: a TPU resolves
    ({}, TPU, "tpu", 8, True, {"precision": "mixed_bfloat16"}),
    # 3: ps tasks -> ParameterServer; the chief coordinates, workers and ps serve
    (tf_config(PS_CLUSTER, "chief"), CPU, "parameter_server", 2, True, {"role": "train", "shard_policy": "data"}),
    (tf_config(PS_CLUSTER, "worker", 1), CPU, "parameter_server", 2, False, {"role": "serve"}),
    (tf_config(PS_CLUSTER, "ps"), CPU, "parameter_server", 2, False, {"role": "serve"}),
    # 4: two or more chief/worker tasks -> MultiWorkerMirrored
    (tf_config(TWO_WORKERS, "worker", 0), CPU, "multi_worker_mirrored", 2, True, {"communication": "ring"}),
    (tf_config(TWO_WORKERS, "worker", 1), CPU, "multi_worker_mirrored", 2, False, {}),
    (tf_config(TWO_WORKERS, "worker", 1), FOUR_GPUS, "multi_worker_mirrored", 8, False,
     {"communication": "nccl", "global_batch_size": 64 * 8}),
    # 5-7: one task
    ({}, FOUR_GPUS, "mirrored", 4, True, {"communication": "nccl", "precision": "mixed_float16",
                                         "global_batch_size": 256}),
    ({}, OLD_GPUS, "mirrored", 2, True, {"precision": "float32"}),
    ({}, ONE_GPU, "one_device", 1, True, {"device": "/gpu:0", "precision": "mixed_float16"}),
    ({}, CPU, "default", 1, True, {"precision": "float32", "shard_policy": "off", "global_batch_size": 64}),
])
def test_decision_table(env, devices, strategy, replicas, is_chief, extra):
    result = plan(env, devices, batch_size=64, train_files=1)
    assert result.strategy == strategy
    assert result.replicas == replicas
    assert result.is_chief is is_chief
    assert result.reason
    for key, value in extra.items():
        assert getattr(result, key) == value, key


def test_explicit_strategy_wins_when_it_can_work():
    assert plan({}, FOUR_GPUS, strategy="one_device").strategy == "one_device"
    assert plan({}, FOUR_GPUS, strategy="central_storage").replicas == 4
    assert plan({}, Devices(cpu_devices=2), strategy="mirrored").replicas == 2
    assert plan({}, CPU, strategy="multi_worker_mirrored").replicas == 1


@pytest.mark.parametrize(("env", "devices", "strategy", "needle"), [
    ({}, CPU, "mirrored", "mirrored needs two or more devices"),
    ({}, CPU, "tpu", "no TPU resolves here"),
    ({}, FOUR_GPUS, "parameter_server", "needs parameter servers, and the cluster in TF_CONFIG has none"),
    (tf_config(TWO_WORKERS, "worker"), CPU, "one_device", "one_device trains in one process"),
    (tf_config(TWO_WORKERS, "worker"), FOUR_GPUS, "mirrored", "use strategy auto \\(multi_worker_mirrored"),
    (tf_config(PS_CLUSTER, "chief"), CPU, "multi_worker_mirrored", "has no parameter servers, and the cluster"),
])
def test_refusals(env, devices, strategy, needle):
    with pytest.raises(PlanError, match=needle):
        plan(env, devices, strategy=strategy)


def test_explicit_default_trains_without_distribution_in_one_process_only():
    chosen = plan({}, FOUR_GPUS, strategy="default")
    assert (chosen.strategy, chosen.replicas, chosen.device) == (Strategy.DEFAULT, 1, None)
    assert json.loads(json.dumps(chosen.to_json()))["strategy"] == "default"  # the name, not the member
    with pytest.raises(PlanError, match="default trains in one process, and the cluster in TF_CONFIG has 2"):
        plan(tf_config(TWO_WORKERS, "worker"), CPU, strategy="default")


@pytest.mark.parametrize(("strategy", "tasks", "ps", "refused"), [
    ("parameter_server", 2, 0, True), ("parameter_server", 1, 1, False),
    ("one_device", 1, 1, True), ("mirrored", 2, 0, True), ("central_storage", 1, 0, False),
    ("multi_worker_mirrored", 2, 1, True), ("multi_worker_mirrored", 2, 0, False), ("auto", 3, 2, False),
])
def test_the_cluster_rule_is_the_one_validate_and_the_planner_apply(strategy, tasks, ps, refused):
    """One rule, two askers: the loader with the target's trainer section, the planner with TF_CONFIG."""
    refusal = cluster_refusal(Strategy(strategy), tasks, ps, "the cluster in TF_CONFIG")
    assert (refusal is not None) == refused
    cluster = {"worker": [f"w:{i}" for i in range(tasks)], **({"ps": [f"p:{i}" for i in range(ps)]} if ps else {})}
    devices = Devices(gpus=2, gpu_compute_capability=(8, 0))
    if refused:
        with pytest.raises(PlanError) as raised:
            plan(tf_config(cluster, "worker"), devices, strategy=strategy)
        assert str(raised.value) == f"training.strategy: {refusal.problem}; {refusal.fix}"
    else:
        assert plan(tf_config(cluster, "worker"), devices, strategy=strategy).strategy is not Strategy.AUTO


def test_precision_and_collectives_can_be_forced():
    result = plan({}, CPU, mixed_precision="mixed_bfloat16", all_reduce="ring")
    assert (result.precision, result.communication) == ("mixed_bfloat16", "ring")
    assert plan({}, FOUR_GPUS, mixed_precision="off").precision == "float32"


def test_shard_policy_follows_the_file_count():
    env = tf_config(TWO_WORKERS, "worker")
    assert plan(env, CPU, train_files=2).shard_policy == "file"
    assert plan(env, CPU, train_files=1).shard_policy == "data"


def test_master_is_renamed_chief():
    env = tf_config({"master": ["m:1"], "worker": ["w:1"]}, "master")
    result = plan(env, CPU)
    assert result.task == {"type": "chief", "index": 0} and result.is_chief
    assert result.cluster == {"cluster": {"chief": ["m:1"], "worker": ["w:1"]}, "task": {"type": "chief", "index": 0}}


# A Vertex custom job with 4 pools: chief, 2 workers, 1 ps, 1 evaluator.
VERTEX = {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
          "workerpool1": ["cmle-training-workerpool1-ab-0:2222", "cmle-training-workerpool1-ab-1:2222"],
          "workerpool2": ["cmle-training-workerpool2-ab-0:2222"],
          "workerpool3": ["cmle-training-workerpool3-ab-0:2222"]}
TRAINING_CLUSTER = {"chief": VERTEX["workerpool0"], "worker": VERTEX["workerpool1"], "ps": VERTEX["workerpool2"]}


@pytest.mark.parametrize(("pool", "index", "kind"), [("workerpool0", 0, "chief"), ("workerpool1", 0, "worker"),
                                                     ("workerpool1", 1, "worker"), ("workerpool2", 0, "ps"),
                                                     ("workerpool3", 0, "evaluator")])
def test_vertex_cluster_spec_becomes_tf_config(pool, index, kind):
    env = {"CLUSTER_SPEC": json.dumps({"cluster": VERTEX, "environment": "cloud",
                                       "task": {"type": pool, "index": index}, "job": "{}"})}
    result = plan(env, CPU)
    assert result.cluster == {"cluster": TRAINING_CLUSTER, "task": {"type": kind, "index": index}}
    if kind == "evaluator":
        assert (result.role, result.strategy, result.is_chief) == ("evaluate", "default", False)
    else:
        assert result.strategy == "parameter_server"
        assert result.is_chief is (kind == "chief")
        assert result.replicas == 2


def test_tf_config_wins_over_cluster_spec():
    env = {**tf_config(TWO_WORKERS, "worker", 1), "CLUSTER_SPEC": json.dumps({"cluster": VERTEX, "task": {
        "type": "workerpool0", "index": 0}})}
    assert from_environment(env).task_type == "worker"


@pytest.mark.parametrize(("env", "needle"), [
    ({"TF_CONFIG": "{not json"}, "not valid JSON"),
    (tf_config(TWO_WORKERS, "worker", 5), "not in the cluster"),
    (tf_config({"chief": ["a", "b"]}, "chief"), "at most one"),
    (tf_config({"trainer": ["a"]}, "trainer"), "unknown task types"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool9": ["a"]}, "task": {"type": "workerpool9"}})},
     "unknown worker pool"),
])
def test_bad_cluster_descriptions(env, needle):
    with pytest.raises(ClusterError, match=needle):
        from_environment(env)


def test_plan_json_has_the_spec_shape():
    data = plan({}, CPU).to_json()
    assert {"strategy", "replicas", "is_chief", "task", "global_batch_size", "shard_policy", "precision",
            "devices", "reason", "steps_per_execution", "execution_reason"} <= set(data)
    json.dumps(data)


@pytest.mark.parametrize(("env", "devices", "setting", "custom", "expected", "reason"), [
    ({}, CPU, "auto", False, 32, "paid once per 32 steps"),
    ({}, FOUR_GPUS, "auto", False, 32, "paid once per 32 steps"),
    (tf_config(PS_CLUSTER, "chief"), CPU, "auto", False, 32, "paid once per 32 steps"),
    ({}, TPU, "auto", True, 1, "custom callbacks"),  # their batch hooks would see every 32nd step only
    ({}, CPU, 100, True, 100, "training.steps_per_execution is 100"),  # an explicit number wins
    ({}, CPU, 1, False, 1, "training.steps_per_execution is 1"),
    (tf_config(TWO_WORKERS, "worker", 0), CPU, "auto", False, 32, "paid once per 32 steps"),
])
def test_steps_per_execution(env, devices, setting, custom, expected, reason):
    chosen = plan(env, devices, steps_per_execution=setting, custom_callbacks=custom)
    assert chosen.steps_per_execution == expected
    assert reason in chosen.execution_reason
    record = chosen.to_json()
    assert (record["steps_per_execution"], record["execution_reason"]) == (expected, chosen.execution_reason)


def test_the_training_operators_tf_config_with_its_addresses_moved_to_loopback():
    """The TF_CONFIG the Kubeflow Training Operator writes (training-operator v1.9,
    pkg/controller.v1/tensorflow/tensorflow.go: lower-case types, `<job>-<type>-<i>.<ns>.svc:2222`,
    "environment": "cloud"), as replay's stand-in for the operator gives it, with the address map."""
    from tfxd.kubeflow.replay.training_operator import tf_configs

    job = {"metadata": {"name": "taxi-trainer-1", "namespace": "team-a"},
           "spec": {"tfReplicaSpecs": {"Chief": {"replicas": 1}, "Worker": {"replicas": 2}, "PS": {"replicas": 1}}}}
    configs = tf_configs(job)
    assert configs[("Worker", 1)] == {
        "cluster": {"chief": ["taxi-trainer-1-chief-0.team-a.svc:2222"],
                    "worker": ["taxi-trainer-1-worker-0.team-a.svc:2222", "taxi-trainer-1-worker-1.team-a.svc:2222"],
                    "ps": ["taxi-trainer-1-ps-0.team-a.svc:2222"]},
        "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    moved = {address: f"localhost:{2000 + i}" for i, address in enumerate(
        a for members in configs[("Chief", 0)]["cluster"].values() for a in members)}
    env = {"TF_CONFIG": json.dumps(configs[("Chief", 0)]), "TFXD_CLUSTER_ADDRESSES": json.dumps(moved)}
    chosen = plan(env, Devices())
    assert (chosen.strategy, chosen.replicas, chosen.is_chief, chosen.role) == ("parameter_server", 2, True, "train")
    assert chosen.cluster["cluster"]["worker"] == [moved["taxi-trainer-1-worker-0.team-a.svc:2222"],
                                                   moved["taxi-trainer-1-worker-1.team-a.svc:2222"]]
    two = {"metadata": job["metadata"], "spec": {"tfReplicaSpecs": {"Chief": {"replicas": 1}, "Worker": {"replicas": 1}}}}
    worker = plan({"TF_CONFIG": json.dumps(tf_configs(two)[("Worker", 0)])}, Devices())
    assert (worker.strategy, worker.replicas, worker.is_chief) == ("multi_worker_mirrored", 2, False)


def jobset_env(index: int, nodes: int, servers: int = 0, **more: str) -> dict[str, str]:
    """A TrainJob node's environment on tfxd's runtime (tests/conformance/test_trainer.py checks it against
    what Trainer v2, JobSet and the Job controller really give a pod)."""
    return {"TFXD_JOBSET_NAME": "taxi-trainer-1", "TFXD_REPLICATED_JOB": "node", "TFXD_JOB_INDEX": "0",
            "JOB_COMPLETION_INDEX": str(index), "TFXD_TRAINJOB_NODES": str(nodes),
            "TFXD_TRAINJOB_PARAMETER_SERVERS": str(servers), **more}


@pytest.mark.parametrize(("env", "kind", "index", "strategy", "is_chief"), [
    (jobset_env(0, 2), "worker", 0, "multi_worker_mirrored", True),  # worker 0 is the chief
    (jobset_env(1, 2), "worker", 1, "multi_worker_mirrored", False),
    (jobset_env(0, 4, 1), "chief", 0, "parameter_server", True),  # node 0 coordinates
    (jobset_env(2, 4, 1), "worker", 1, "parameter_server", False),
    (jobset_env(3, 4, 1), "ps", 0, "parameter_server", False),
])
def test_a_trainjob_nodes_jobset_environment_becomes_tf_config(env, kind, index, strategy, is_chief):
    cluster = from_environment(env)
    assert (cluster.task_type, cluster.task_index) == (kind, index)
    assert cluster.spec["worker"][0].startswith("taxi-trainer-1-node-0-")
    assert all(address.endswith(".taxi-trainer-1:2222") for addresses in cluster.spec.values() for address in addresses)
    planned = plan(env, CPU)
    assert (planned.strategy, planned.is_chief) == (strategy, is_chief)


def test_a_trainjobs_addresses_moved_to_loopback_and_tf_config_winning():
    moved = json.dumps({"taxi-trainer-1-node-0-0.taxi-trainer-1:2222": "localhost:4000",
                        "taxi-trainer-1-node-0-1.taxi-trainer-1:2222": "localhost:4001"})
    assert from_environment(jobset_env(1, 2, TFXD_CLUSTER_ADDRESSES=moved)).spec == {
        "worker": ["localhost:4000", "localhost:4001"]}
    assert from_environment({**jobset_env(1, 2), **tf_config(TWO_WORKERS, "worker", 0)}).task_index == 0


@pytest.mark.parametrize(("env", "needle"), [
    ({"TFXD_JOBSET_NAME": "j"}, "a TrainJob node needs TFXD_REPLICATED_JOB, TFXD_JOB_INDEX, JOB_COMPLETION_INDEX, "
     "TFXD_TRAINJOB_NODES in its environment"),
    (jobset_env(0, 2, TFXD_TRAINJOB_NODES="two"), "a count that is not a number"),
    (jobset_env(0, 2, 1), "a TrainJob of 2 nodes cannot hold a chief, a worker and 1 parameter servers"),
    (jobset_env(2, 2), r"task worker:2 is not in the cluster"),
])
def test_a_trainjob_environment_that_cannot_be_a_cluster_is_refused(env, needle):
    with pytest.raises(ClusterError, match=needle):
        from_environment(env)
