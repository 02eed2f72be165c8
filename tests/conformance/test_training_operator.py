"""Every TFJob tfxd builds, judged by the Kubeflow Training Operator's own code (v1.9.4, run by
build/conformance/training-operator, conformance/training-operator/main.go): the TFJob CRD's schema as the
API server applies it, the operator's validating webhook, its defaults, and the TF_CONFIG its controller
writes into each replica. The stand-in operator `tfxd replay` uses (kubeflow/replay/training_operator.py)
must write the same TF_CONFIG, string for string, and the Trainer's planner must plan from the real one.
Negative cases show the real code refusing: an unknown field, no `tensorflow` container, two chiefs."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.components.trainer.test_tfjob import NAMESPACE, settings
from tests.conftest import REPO
from tfxd.components.trainer import tfjob_manifest as manifest
from tfxd.kubeflow.replay import kube_api, training_operator
from tfxd.trainer_module.planner import Devices, plan

JUDGE = REPO / "build" / "conformance" / "training-operator"


def judged(body: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess:
    """The operator program's answer for ``body`` (written as YAML, as a user would kubectl apply it), under
    this process's environment (the controller reads CUSTOM_CLUSTER_DOMAIN from its own)."""
    assert JUDGE.is_file(), f"{JUDGE} is missing: `make conformance` builds it (make test does)"
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return subprocess.run([str(JUDGE), str(path)], capture_output=True, text=True, timeout=60)


def accepted(body: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    result = judged(body, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def stand_in(body: dict[str, Any]) -> dict[str, str]:
    return {f"{kind.lower()}-{index}": training_operator.written(config)
            for (kind, index), config in training_operator.tf_configs(body).items()}


CASES = {  # what tfxd makes, and the replicas the operator makes of it: MultiWorkerMirrored over 2 workers;
    # ParameterServer with a chief, 2 workers and 1 ps
    "two-workers": ({"workers": 2, "parameter_servers": 0}, {"chief-0", "worker-0"}),
    "chief-two-workers-one-ps": ({"workers": 2, "parameter_servers": 1}, {"chief-0", "worker-0", "worker-1", "ps-0"}),
}


@pytest.mark.parametrize("case", CASES)
def test_the_real_controller_writes_the_stand_ins_tf_config(case, tmp_path, monkeypatch):
    # settings as test_tfjob's: resources with a GPU, a node selector, tolerations, a service account; and the
    # owner reference the Trainer step puts on the job
    trainer, replicas = CASES[case]
    body = manifest.body(f"taxi-trainer-{case}", NAMESPACE, settings(tmp_path, **trainer), ["--args"],
                         owner={"name": "taxi-trainer-step-pod", "uid": "0a1b2c3d-0000-4000-8000-000000000001"})
    real = accepted(body, tmp_path)
    assert real == stand_in(body)
    assert set(real) == replicas
    # the cluster domain the operator's deployment may set: both name `...svc.<domain>`
    monkeypatch.setenv(training_operator.CLUSTER_DOMAIN_ENV, "cluster.local")
    with_domain = accepted(body, tmp_path)
    assert with_domain == stand_in(body)
    assert f".{NAMESPACE}.svc.cluster.local:{manifest.PORT}" in with_domain["chief-0"]


def test_the_planner_plans_from_the_real_tf_config(tmp_path):
    mwms = manifest.body("taxi-trainer-mwms", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=0), ["A"])
    real = accepted(mwms, tmp_path)
    chief, worker = plan({"TF_CONFIG": real["chief-0"]}, Devices()), plan({"TF_CONFIG": real["worker-0"]}, Devices())
    assert (chief.strategy, chief.replicas, chief.is_chief) == ("multi_worker_mirrored", 2, True)
    assert (worker.strategy, worker.replicas, worker.is_chief) == ("multi_worker_mirrored", 2, False)
    ps = manifest.body("taxi-trainer-ps", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=1), ["A"])
    real = accepted(ps, tmp_path)
    coordinator = plan({"TF_CONFIG": real["chief-0"]}, Devices())
    assert (coordinator.strategy, coordinator.replicas, coordinator.is_chief) == ("parameter_server", 2, True)


def _refusal(body: dict[str, Any], tmp_path: Path) -> str:
    result = judged(body, tmp_path)
    assert result.returncode == 1 and not result.stdout, result.stdout + result.stderr
    return result.stderr


def _stand_in_agrees(body: dict[str, Any], refusal: str) -> None:
    """The replay's stand-in webhook (training_operator.webhook_problems) says what the real webhook said, word for word."""
    problems = training_operator.webhook_problems(body)
    assert problems and all(problem in refusal for problem in problems), (problems, refusal)


def test_the_real_code_refuses_an_unknown_field_no_tensorflow_container_and_two_chiefs(tmp_path):
    good = manifest.body("taxi-trainer-1", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=1), ["A"])
    accepted(good, tmp_path)
    assert training_operator.webhook_problems(good) == []

    unknown = copy.deepcopy(good)
    unknown["spec"]["runPolicy"]["cleanPodPolicyy"] = "All"
    assert 'unknown field "spec.runPolicy.cleanPodPolicyy"' in _refusal(unknown, tmp_path)

    renamed = copy.deepcopy(good)
    for replica in renamed["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["name"] = "trainer"
    said = _refusal(renamed, tmp_path)
    assert "denied the request" in said and "must have at least one container with name tensorflow" in said
    _stand_in_agrees(renamed, said)

    two_chiefs = copy.deepcopy(good)  # a Chief and a Master: two roles that coordinate (two Chief replicas pass)
    two_chiefs["spec"]["tfReplicaSpecs"]["Master"] = copy.deepcopy(two_chiefs["spec"]["tfReplicaSpecs"]["Chief"])
    said = _refusal(two_chiefs, tmp_path)
    assert "denied the request" in said and "must not have more than 1 Chief or Master role" in said
    _stand_in_agrees(two_chiefs, said)


def test_policies_the_real_code_takes_and_where_the_stand_in_is_stricter(tmp_path):
    """The TFJob CRD has no enum for cleanPodPolicy or restartPolicy and the webhook checks neither: the real
    code takes "Sometimes" for both. The stand-in takes the cleanPodPolicy and cleans up as the controller
    does (an unknown policy removes every pod); it refuses the restartPolicy at create, its own rule, as every
    pod the controller made of it would be refused (training_operator.RESTART_POLICIES)."""
    good = manifest.body("taxi-trainer-1", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=1), ["A"])
    cleaning = copy.deepcopy(good)
    cleaning["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes"
    accepted(cleaning, tmp_path)
    training_operator.validate(cleaning, NAMESPACE)
    assert training_operator.cleanup(cleaning, deadline_passed=False) == (True, None)
    assert training_operator.cleanup(good, deadline_passed=False) == (True, {"Running", "Pending"})  # Running

    restarting = copy.deepcopy(good)
    restarting["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    accepted(restarting, tmp_path)
    with pytest.raises(kube_api.Invalid, match=r"spec\.tfReplicaSpecs\[Worker\]\.restartPolicy: Unsupported value: "
                       r"'Sometimes'.* refuses each of its pods"):
        training_operator.validate(restarting, NAMESPACE)


def _restarts(body: dict[str, Any], tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The real controller's restart facts of ``body``, by replica type (the judge's --restarts)."""
    path = tmp_path / f"{body['metadata']['name']}-restarts.yaml"
    path.write_text(yaml.safe_dump(body))
    result = subprocess.run([str(JUDGE), "--restarts", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_parameter_server_jobs_workers_are_recreated_when_killed_and_nothing_else_is(tmp_path):
    """ParameterServer: the workers under restartPolicy ExitCode, whose pods the controller makes Never (the
    kubelet does not restart them in place) and recreates when they exit with a code the operator takes as
    retryable (a signal); the chief and the ps Never. MultiWorkerMirrored: every replica Never. The stand-in
    recreates exactly those (training_operator.restarts), and none on an error exit."""
    ps = manifest.body("taxi-trainer-ps", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=1), ["A"])
    real = _restarts(ps, tmp_path)
    assert {kind: (facts["restartPolicy"], facts["podRestartPolicy"]) for kind, facts in real.items()} == {
        "Chief": ("Never", "Never"), "Worker": ("ExitCode", "Never"), "PS": ("Never", "Never")}
    codes = (0, 1, 2, 126, 127, 128, 130, 137, 143)
    retryable = set(real["Worker"]["retryableExitCodes"])
    assert retryable == {128, 130, 137, 143}  # the judge bites: an error exit (1) is not retried
    for kind in real:
        recreated = {code for code in codes if code and training_operator.restarts(ps, (kind, 0), code)}
        assert recreated == (retryable if kind == "Worker" else set()), kind
    mwms = manifest.body("taxi-trainer-mwms", NAMESPACE, settings(tmp_path, workers=2, parameter_servers=0), ["A"])
    assert {facts["restartPolicy"] for facts in _restarts(mwms, tmp_path).values()} == {"Never"}
    assert not any(training_operator.restarts(mwms, (kind, 0), 137) for kind in ("Chief", "Worker"))
