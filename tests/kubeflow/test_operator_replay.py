"""A Kubeflow file whose Trainer asks for several processes: the Trainer task launches an operator's job,
and `tfxd replay` runs it on local stand-ins (kubeflow/replay/local_operators.py) for Kubeflow Trainer v2
(a TrainJob: each node a process with the environment JobSet gives its pod) and the Training Operator (a
TFJob: each replica a process with the TF_CONFIG the operator writes). The stand-in cluster serves both,
as a cluster with both installed: `operator: auto` takes the TrainJob.

- The penguin example with 2 workers, its data, pipeline root and push destination on a Cloud Storage API
  server (tests/buckets/, the replay and every node in the namespace where Google's names lead there),
  replays blessed and pushed as a TrainJob (its nodes' cluster addresses mapped to loopback ports); the
  summary's strategy is multi_worker_mirrored with 2 replicas; the chief (node 0) alone wrote the model,
  on the bucket.
- The same Trainer task, run again with operator: tfjob as a chief, a worker and a parameter server,
  trains with ParameterServer to an exported model, reading the replay's examples on the bucket and writing
  its model there; its worker, killed mid-training, is created again by the operator and rejoins.
- A node stopped mid-training fails the step naming it; the retried step resumes from the checkpoint
  BackupAndRestore kept on the bucket.
  These two run the Trainer task in the bucket's namespace, the operators' stand-in API on the host's end
  of its link, where the namespace reaches it, and each replica on a host of its own
  (components/trainer/replica_hosts.py): a namespace under its cluster name, at port 2222, running the
  TF_CONFIG or JobSet environment its operator gives it verbatim, and reaching the bucket's front at
  Google's names, as a pod does.
- The file meets the open-source backend's rules and goes through kfp's own loader and compiler.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.buckets.server import GOOGLE_NAMES, bucket_server
from tests.conformance.test_trainer import accepted as trainer_accepted
from tests.conformance.test_training_operator import accepted, stand_in
from tests.conftest import REPO
from tests.kubeflow.kfp_rules import backend_problems
from tests.kubeflow.on_bucket import compiled_on_bucket, objects, replay_on_bucket
from tfxd.kubeflow.replay.kube_api import as_sent
from tfxd.kubeflow.replay.launcher import REPLAY_NAMESPACE, this_python
from tfxd.kubeflow.replay.local_operators import LocalOperators

WORKERS = ("targets.kubeflow.trainer.workers=2", "training.steps=60")
BUCKET = "tfxd-operators"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict:
    """Penguin's two-worker Kubeflow file replayed on the bucket, which stays up for the tests that run the
    Trainer task again."""
    files = compiled_on_bucket(tmp_path_factory, "penguin", BUCKET, *WORKERS)
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(BUCKET)
        server.upload_folder(REPO / "examples" / "data" / "penguin", BUCKET, "data/penguin")
        _, summary = replay_on_bucket(server, files["kubeflow"], files)
        model = objects(server, summary["artifacts"]["Trainer.model"])
        yield {"summary": summary, "project": files["project"], "compiled": files["kubeflow"], "model": model,
               "server": server}


def test_a_two_worker_trainer_replays_as_a_trainjob_blessed_and_pushed(replayed):
    summary = replayed["summary"]
    assert summary["status"] == "ok" and summary["blessed"] is True and summary["pushed"] is True
    assert summary["strategy"]["strategy"] == "multi_worker_mirrored" and summary["strategy"]["replicas"] == 2
    assert any("its job ran on local stand-ins for Kubeflow Trainer v2" in n for n in summary["notes"])
    trainer_log = Path(next(t["log"] for t in summary["tasks"] if t["name"] == "Trainer")).read_text()
    assert "launching a TrainJob (auto: the cluster serves trainjobs (trainer.kubeflow.org/v1alpha1); tfjobs " \
           "(kubeflow.org/v1) served too)" in trainer_log
    assert f"created TrainJob {REPLAY_NAMESPACE}/penguin-species-trainer-" in trainer_log
    assert "(2 nodes, all workers)" in trainer_log and "Succeeded (job node: 1 succeeded)" in trainer_log
    logs = Path(summary["logs"]) / "operators"
    chief = next(logs.glob("*-node-0-0-*.log")).read_text()
    worker = next(logs.glob("*-node-0-1-*.log")).read_text()
    assert "strategy=multi_worker_mirrored replicas=2 is_chief=True" in chief
    assert "strategy=multi_worker_mirrored replicas=2 is_chief=False" in worker
    # the chief waited for the worker's checksum over the collectives (the job ends when the chief does)
    assert all("all 2 replicas hold the same weights" in log for log in (chief, worker))
    # both trained the same weights; the chief alone wrote the model where the pipeline expects it
    checksum = [line.split("weights_checksum=")[1].split()[0] for line in (chief, worker)
                for line in line.splitlines() if "weights_checksum=" in line]
    assert len(checksum) == 2 and checksum[0] == checksum[1]
    assert summary["buckets"] == {} and summary["pushed_destination"].startswith(f"gs://{BUCKET}/serving/")
    assert any(name.endswith("/Format-Serving/saved_model.pb") for name in replayed["model"]), replayed["model"]


def test_the_file_meets_the_backends_rules_and_kfps_round_trip(replayed, tmp_path):
    from kfp import compiler, components, dsl

    pipeline_spec = yaml.safe_load(replayed["compiled"].read_text())
    assert backend_problems(pipeline_spec) == []
    args = pipeline_spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]["args"]
    assert args[args.index("--executor_class_path") + 1] == "tfxd.components.trainer.job_launch.OperatorExecutor"
    component = components.load_component_from_file(str(replayed["compiled"]))
    defaults = {name: spec.default for name, spec in component.component_spec.inputs.items()}

    def wrapped(train_args=defaults["train_args"], eval_args=defaults["eval_args"]):
        component(train_args=train_args, eval_args=eval_args)

    wrapped.__annotations__ = {"train_args": str, "eval_args": str}
    again = tmp_path / "wrapped.yaml"
    compiler.Compiler().compile(dsl.pipeline(name="penguin-wrapped")(wrapped), str(again))
    assert backend_problems(yaml.safe_load(again.read_text())) == []


def test_the_trainer_task_as_a_parameter_server_tfjob_rides_out_its_worker_killed(replayed, tmp_path):
    """The replayed Trainer task's own executor input, with operator: tfjob and a chief, one worker and one
    parameter server: the operator's TF_CONFIG leads the planner to ParameterServer. The worker, killed
    after the first epoch (SIGKILL, as a preempted node's pod), is created again by the operator (its
    restartPolicy ExitCode), rejoins, and the training it held up goes on to an exported model."""
    task, output, made, outputs, killed, operator = _ps_worker_killed(replayed, tmp_path, "tfjob", ("Worker", 0),
                                                                       "*-chief-0.log")
    server = replayed["server"]
    logs = {path.name: path.read_text() for path in (tmp_path / "logs").glob("*.log")}
    assert not operator.hosts  # each job's hosts went with its processes
    assert task.returncode == 0, output[-3000:]
    assert "(1 Chief, 1 Worker, 1 PS)" in output
    # the TFJob the Trainer task sent, judged by the Training Operator's own code (tests/conformance): taken,
    # and each replica's TF_CONFIG the one the stand-in gave its process
    [job] = made
    sent = as_sent(job)
    assert accepted(sent, tmp_path) == stand_in(sent)
    assert sent["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    chief = next(text for name, text in logs.items() if "-chief-0" in name)
    worker = next(text for name, text in logs.items() if "-worker-0" in name)
    assert "strategy=parameter_server replicas=1 is_chief=True" in chief
    assert f"pod {killed} failed with exit code 137; the operator created it again" in worker
    assert "Restarting (" in output  # the job's condition, as the launcher followed it
    # the coordinator lost the worker, waited for it and took it back; the training went on to its end
    lost = chief.index("Worker /job:worker/replica:0/task:0 failed with UnavailableError")
    assert chief.index("Worker /job:worker/replica:0/task:0 has been recovered") > lost
    assert "> Trainer epoch 10/10" in chief[lost:] and "resumes at epoch" not in chief
    model = f"{outputs}/Trainer/model"
    assert f"{model}/Format-Serving/saved_model.pb".removeprefix(f"gs://{BUCKET}/") in objects(server, model)
    report = json.loads(server.read(BUCKET, f"{model}/tfxd_training.json".removeprefix(f"gs://{BUCKET}/")))
    assert report["plan"]["strategy"] == "parameter_server" and report["plan"]["task"] == {"type": "chief",
                                                                                         "index": 0}


def test_a_tfjob_worker_trains_on_over_a_slow_lossy_link_and_frozen_is_named_by_the_step(replayed, tmp_path):
    """MultiWorkerMirrored as a TFJob (a Chief and a Worker, each on a host of its own; peer_timeout 5):
    after the first epoch the worker's link turns slow and lossy (50 ms and 1% of the packets lost, each
    way: bench/link_delay.py) and the training goes on over it, another epoch done; then the worker
    freezes (SIGSTOP: alive and silent, as a hung pod). The chief's coordination service misses its
    heartbeats and fails, the TFJob fails, and the step names the frozen worker as the cause, with
    TensorFlow's words and where its log is, the chief as the reporter."""
    from tests.bench.test_link_delay import delayed
    from tests.trainer_module.test_worker_crash import SLOW_EPOCHS

    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "slow_epochs.py").write_text(SLOW_EPOCHS)

    def mirrored(config: dict) -> None:
        config["operator_job"].update(workers=2, parameter_servers=0, operator="tfjob")
        config["spec"]["training"]["peer_timeout"] = 5
        config["spec"]["training"]["callbacks"]["custom"] = ["slow_epochs:SlowEpochs"]

    executor_input, _ = _trainer_task(replayed, tmp_path, mirrored)
    server, project = replayed["server"], str(replayed["project"])
    env = {"PYTHONPATH": os.pathsep.join([project, str(tmp_path / "user")])}
    with _operators(server, tmp_path, project, env) as operator:
        task = _run_task(server, executor_input, operator, env, project)
        try:
            _wait_for_the_chief(tmp_path / "logs", task, "*-chief-0.log", "> Trainer epoch 1/")
            [job] = list(operator.processes)
            with delayed(operator.hosts[job].hosts["worker-0"].namespace, tmp_path / "link.json", "--delay", "0.05",
                         "--loss", "0.01"):
                _wait_for_the_chief(tmp_path / "logs", task, "*-chief-0.log", "> Trainer epoch 2/")
            operator.processes[job][("Worker", 0)].send_signal(signal.SIGSTOP)
            output = task.communicate(timeout=300)[0]
        finally:
            if task.poll() is None:
                task.kill()
    counts = json.loads((tmp_path / "link.json").read_text())
    assert counts["accepted"] > 0 and counts["least_hold_s"] >= 0.05, counts
    assert task.returncode != 0, output[-3000:]
    name = job[1]
    said = " ".join(output.split())
    assert (f"TFJob {REPLAY_NAMESPACE}/{name} failed: replica worker-0 (pod {name}-worker-0) stopped answering "
            "while running (frozen, hung, or cut off from the others): TensorFlow lost it (Task "
            f"/job:worker/replica:0/task:0 heartbeat timeout); its log: kubectl logs -n {REPLAY_NAMESPACE} "
            f"{name}-worker-0. Reported by replica chief-0 (pod {name}-chief-0) Error (exit code 1)") in said, said[-3000:]


def _ps_worker_killed(replayed, tmp_path: Path, kind: str, worker: tuple[str, int], chief: str):
    """The replayed Trainer task with ``kind``'s operator, a chief, one worker and one parameter server,
    slowed a little at each epoch's end, its ``worker`` killed after the first epoch (the chief's log:
    ``chief``); once the task ended: the task, its output, the jobs it created, its outputs' folder, the
    killed pod's name and the operators' stand-in."""
    from tests.trainer_module.test_worker_crash import SLOW_EPOCHS

    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "slow_epochs.py").write_text(SLOW_EPOCHS)

    def with_ps(config: dict) -> None:
        config["operator_job"].update(workers=1, parameter_servers=1, operator=kind)
        config["spec"]["training"]["callbacks"]["custom"] = ["slow_epochs:SlowEpochs"]

    executor_input, outputs = _trainer_task(replayed, tmp_path, with_ps)
    server, project = replayed["server"], str(replayed["project"])
    env = {"PYTHONPATH": os.pathsep.join([project, str(tmp_path / "user")])}
    made: list[dict] = []
    with _operators(server, tmp_path, project, env) as operator:
        operator.created = _recording(operator.created, made)
        task = _run_task(server, executor_input, operator, env, project)
        try:
            killed = _kill_the_worker_after_an_epoch(operator, tmp_path / "logs", task, worker, chief)
            output = task.communicate(timeout=600)[0]
        finally:
            if task.poll() is None:
                task.kill()
    return task, output, made, outputs, killed, operator


def _kill_the_worker_after_an_epoch(operator: LocalOperators, logs: Path, task: subprocess.Popen,
                                   worker: tuple[str, int], chief: str) -> str:
    """SIGKILL the job's ``worker`` once the chief (its log ``chief``) has trained an epoch; its pod's name.
    Every replica runs on its own host: a namespace of its own, whose hosts file gives each replica's
    cluster name its address."""
    _wait_for_the_chief(logs, task, chief, "> Trainer epoch 1/")
    [job] = list(operator.processes)
    hosts = operator.hosts[job].hosts
    for (kind, index), process in operator.processes[job].items():
        namespace = subprocess.run(["ip", "netns", "identify", str(process.pid)], capture_output=True,
                                   text=True).stdout.strip()
        replica = operator.replicas[job][(kind, index)][0]
        assert namespace == hosts[f"{kind.lower()}-{index}"].namespace, (kind, index, namespace)
        assert hosts[f"{kind.lower()}-{index}"].hostname == replica.address.rsplit(":", 1)[0]
    operator.processes[job][worker].kill()
    return operator.replicas[job][worker][0].pod


def test_the_trainer_task_as_a_parameter_server_trainjob_rides_out_its_worker_killed(replayed, tmp_path):
    """The same with operator: trainjob: the worker node, killed after the first epoch, gets a new pod from
    the Job controller after its wait (tfxd's runtime: backoffLimitPerIndex, held to the real controller in
    tests/conformance/test_trainer.py), reads its failure count there, rejoins as a worker, and the
    training goes on to an exported model while the chief trained meanwhile."""
    from tfxd.kubeflow.replay import trainer_v2

    task, output, made, outputs, killed, _ = _ps_worker_killed(replayed, tmp_path, "trainjob", ("node", 1),
                                                               "*-node-0-0-*.log")
    server = replayed["server"]
    assert task.returncode == 0, output[-3000:]
    [job] = made
    name = job["metadata"]["name"]
    assert trainer_accepted(as_sent(job), tmp_path)["jobSet"]["replicatedJobs"][0]["backoffLimitPerIndex"] == 3
    logs = tmp_path / "logs"
    chief = (logs / f"{trainer_v2.pod_name(name, 0)}.log").read_text()
    again = (logs / f"{trainer_v2.pod_name(name, 1, failures=1)}.log").read_text()
    assert killed == trainer_v2.pod_name(name, 1)
    assert f"pod {killed} failed with exit code 137; the operator created it again" in again
    assert "was started again after its pod was killed" not in again  # it went on as the worker
    lost = chief.index("Worker /job:worker/replica:0/task:0 failed with UnavailableError")
    assert chief.index("Worker /job:worker/replica:0/task:0 has been recovered") > lost
    assert "> Trainer epoch 10/10" in chief[lost:] and "resumes at epoch" not in chief
    model = f"{outputs}/Trainer/model"
    assert f"{model}/Format-Serving/saved_model.pb".removeprefix(f"gs://{BUCKET}/") in objects(server, model)


def _wait_for_the_chief(logs: Path, task: subprocess.Popen, chief: str, text: str) -> None:
    """Until the chief's log (``chief``, a pattern in ``logs``) says ``text``, while the task runs."""
    deadline = time.monotonic() + 300
    while not any(text in path.read_text() for path in logs.glob(chief)):
        assert time.monotonic() < deadline and task.poll() is None, task.communicate()[0][-3000:]
        time.sleep(0.1)


def _trainer_task(replayed, tmp_path: Path, change) -> tuple[dict, str]:
    """The replayed Trainer task's executor input, ``change``d (its custom_config), its outputs in a folder
    of the bucket of its own (the node folder: BackupAndRestore's checkpoints go under its .backup/); that
    folder."""
    summary = replayed["summary"]
    executor_input = json.loads((Path(summary["run_dir"]) / "Trainer" / "executor_input.json").read_text())
    config = _custom_config(executor_input)
    change(config)
    executor_input = _with_custom_config(executor_input, config)
    outputs = f"gs://{BUCKET}/again/{tmp_path.name}"
    for key, value in executor_input["outputs"]["artifacts"].items():
        value["artifacts"][0]["uri"] = f"{outputs}/Trainer/{key}"
    executor_input["outputs"]["outputFile"] = str(tmp_path / "executor_output.json")  # the pod's own disk
    return executor_input, outputs


def _on_vertex(config: dict) -> None:
    """The Trainer's custom_config as a spec with targets.vertex.trainer of a chief, a worker and a
    parameter server compiles it, the training slowed a little at each epoch's end."""
    from tfxd.components.trainer import vertex_job
    from tfxd.pipeline.spec.targets import VertexTarget

    target = VertexTarget.model_validate({"project": "tfxd-tests", "region": "europe-west4", "image": "tfxd:replay",
                                          "root": f"gs://{BUCKET}/vertex",
                                          "trainer": {"workers": 1, "parameter_servers": 1}})
    del config["operator_job"]
    config.update(vertex_job.custom_config(target))
    config["spec"]["training"]["callbacks"]["custom"] = ["slow_epochs:SlowEpochs"]


def _vertex_task(server, env: dict, cwd: str, invocation: dict) -> subprocess.Popen:
    """The Trainer task with tfxd's Vertex executor, in the bucket's namespace as its pod."""
    return subprocess.Popen(
        server.command(sys.executable, "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
                       "--executor_class_path", "tfxd.components.trainer.vertex_job.Executor",
                       "--json_serialized_invocation_args", json.dumps(invocation)),
        env={**server.env(), **env}, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _ended(task: subprocess.Popen, seconds: float = 600) -> tuple[int, str]:
    """The task's exit code and output, once it ends (killed past ``seconds``)."""
    try:
        output = task.communicate(timeout=seconds)[0]
        return task.returncode, output
    finally:
        if task.poll() is None:
            task.kill()


def _custom_config(executor_input: dict) -> dict:
    return json.loads(executor_input["inputs"]["parameterValues"]["custom_config"])


def _with_custom_config(executor_input: dict, config: dict) -> dict:
    """``executor_input`` with the Trainer's custom_config ``config``."""
    changed = json.loads(json.dumps(executor_input))
    changed["inputs"]["parameterValues"]["custom_config"] = json.dumps(config)
    changed["inputs"]["parameters"]["custom_config"] = {"stringValue": json.dumps(config)}
    return changed


def _backed_up(server, outputs: str) -> list[str]:
    """BackupAndRestore's chief checkpoints under the Trainer's outputs on the bucket."""
    return [name for name in objects(server, f"{outputs}/.backup") if name.endswith("/chief/checkpoint")]


def trainjob_role() -> set[tuple[str, str, str, str]]:
    """(kind, verb, API group, resource) the Role in kubeflow/trainjob-rbac.yaml allows."""
    [role] = [doc for doc in yaml.safe_load_all((REPO / "kubeflow" / "trainjob-rbac.yaml").read_text())
              if doc["kind"] == "Role"]
    return {("Role", verb, group, resource) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def _recording(created, made: list[dict]):
    """LocalOperators.created, keeping each job the stand-in API took (with the fields it added)."""
    def recorded(job: dict) -> None:
        made.append(json.loads(json.dumps(job)))
        created(job)
    return recorded


def _operators(server, tmp_path: Path, project: str, env: dict) -> LocalOperators:
    """The operators' stand-in with its API on the host's end of the bucket's namespace link, and each
    replica on a host of its own that reaches the front there at Google's names, with a pod's view of the
    bucket (server.env())."""
    def here(container: dict) -> list[str]:
        return this_python([*container["command"], *container["args"]])

    return LocalOperators(str(tmp_path / "logs"), here, cwd=project, env={**server.env(), **env}, host=server.host,
                          reach={server.host: list(GOOGLE_NAMES)})


def _run_task(server, executor_input: dict, operator: LocalOperators, env: dict, cwd: str) -> subprocess.Popen:
    """The Trainer task in the bucket's namespace, as its pod."""
    return subprocess.Popen(
        server.command(sys.executable, "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
                       "--executor_class_path", "tfxd.components.trainer.job_launch.OperatorExecutor",
                       "--json_serialized_invocation_args", json.dumps(executor_input)),
        env={**server.env(), **env, **operator.environment(REPLAY_NAMESPACE)}, cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.reliability("crash point")
def test_a_node_stopped_by_sigterm_ends_in_time_fails_the_step_and_the_retried_step_resumes(replayed, tmp_path):
    """A worker node of the TrainJob gets SIGTERM mid-training (Kubernetes evicting its pod): it ends within
    tfxd.stops.STOP_SECONDS with exit status 143, saying where the retry resumes from; the step fails naming
    it and saying where the checkpoint is, the job is deleted; the retried step (same inputs) starts the job
    again under the same name, and the chief resumes from the BackupAndRestore checkpoint, not epoch 1."""
    from tests.trainer_module.test_worker_crash import SLOW_EPOCHS
    from tfxd import stops
    from tfxd.kubeflow.replay import trainer_v2

    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "slow_epochs.py").write_text(SLOW_EPOCHS.replace("time.sleep(0.5)", "time.sleep(1.5)"))

    def slow(config: dict) -> None:
        config["spec"]["training"]["callbacks"]["custom"] = ["slow_epochs:SlowEpochs"]

    executor_input, outputs = _trainer_task(replayed, tmp_path, slow)
    server, project = replayed["server"], str(replayed["project"])
    env = {"PYTHONPATH": os.pathsep.join([project, str(tmp_path / "user")])}
    backed_up = functools.partial(_backed_up, server, outputs)

    with _operators(server, tmp_path, project, env) as operator:
        first = _run_task(server, executor_input, operator, env, project)
        try:
            deadline = time.monotonic() + 300
            while not backed_up():
                assert time.monotonic() < deadline and first.poll() is None, first.communicate()[0][-3000:]
                time.sleep(0.2)
            [job] = list(operator.processes)
            worker = operator.processes[job][("node", 1)]
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
            output = first.communicate(timeout=300)[0]
        finally:
            if first.poll() is None:
                first.kill()
        worker_log = (tmp_path / "logs" / f"{trainer_v2.pod_name(job[1], 1)}.log").read_text()
        assert worker.returncode == 143, (worker.returncode, worker_log[-3000:])
        # it stopped at a step boundary on its own, not at the deadline its stop watch set
        assert f"still running {stops.DEADLINE_SECONDS:g} s after SIGTERM" not in worker_log, worker_log[-3000:]
        assert first.returncode != 0, output[-3000:]
        assert "tfxd: Trainer replica worker-1 stopped by SIGTERM; the retried training resumes from the last " \
               f"epoch backed up in {outputs}/.backup/" in worker_log, worker_log[-3000:]
        assert f"TrainJob {REPLAY_NAMESPACE}/{job[1]} failed: replica node-1 (pod {job[1]}-node-0-1-" in output
        assert ") Error (exit code 143)" in output
        assert "Retry the step to resume from the last epoch checkpointed in" in output
        assert not operator.api.jobs  # deleted by the failed step
        # every call the launcher made (create, get, watch, delete, the pods and a log) is one its Role allows
        made = {(verb, resource) for verb, resource, _ in operator.api.requests}
        assert {("create", "trainjobs"), ("delete", "trainjobs"), ("get", "pods/log")} <= made
        assert made <= {(verb, resource) for _, verb, _, resource in trainjob_role()}
        second = _run_task(server, executor_input, operator, env, project)
        output = second.communicate(timeout=600)[0]
        assert second.returncode == 0, output[-3000:]
        chief = (tmp_path / "logs" / f"{trainer_v2.pod_name(job[1], 0)}.log").read_text()
    assert f"created TrainJob {REPLAY_NAMESPACE}/{job[1]}" in output  # the same name: one job per run and task
    resumed = [line for line in chief.splitlines() if "Trainer resumes at epoch " in line]
    assert resumed and int(resumed[0].split("resumes at epoch ")[1].split("/")[0]) > 1, chief[-3000:]
    model = f"{outputs}/Trainer/model"
    assert f"{model}/Format-Serving/saved_model.pb".removeprefix(f"gs://{BUCKET}/") in objects(server, model)
    assert not backed_up()  # a completed training leaves no backup


def test_the_trainer_task_as_a_vertex_custom_job_is_taken_as_sent_and_rides_out_its_worker_killed(replayed,
                                                                                                tmp_path):
    """The replayed Trainer task's own executor input with targets.vertex.trainer's custom job (a chief, a
    worker and a parameter server: three pools), run with tfxd's Vertex executor: TFX's VertexJobClient
    sends the CustomJob through aiplatform's gRPC client, unchanged, to Vertex's name, where the JobService
    stand-in (kubeflow/replay/vertex_jobs.py) takes it; each pool's replica runs the command the job
    carries, on a host of its own, with the CLUSTER_SPEC and TF_CONFIG Vertex gives it. The worker, killed
    after the first epoch (a VM lost), is restarted by the service with the same hostname, as Vertex
    restarts it; the coordinator takes it back and the chief exports the model on the bucket."""
    from tests.trainer_module.test_worker_crash import SLOW_EPOCHS
    from tfxd.kubeflow.replay.vertex_jobs import VertexJobs

    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "slow_epochs.py").write_text(SLOW_EPOCHS)
    executor_input, outputs = _trainer_task(replayed, tmp_path, _on_vertex)
    server, project = replayed["server"], str(replayed["project"])
    env = {"PYTHONPATH": os.pathsep.join([project, str(tmp_path / "user")])}

    def here(container: dict) -> list[str]:
        return this_python([*container.get("command", []), *container.get("args", [])])

    with VertexJobs(str(tmp_path / "replicas"), here, env={**server.env(), **env}, host=server.host,
                    reach={server.host: list(GOOGLE_NAMES)}) as jobs:
        run_task = functools.partial(_vertex_task, server, {**env, **jobs.environment()}, project)
        # the judge bites: a primary pool of 2 replicas is refused, and the task says why
        pools = _custom_config(executor_input)["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
        refused, said = _ended(run_task(_with_custom_config(executor_input, _custom_config(executor_input) | {
            "ai_platform_training_args": {"project": "tfxd-tests", "job_spec": {
                "worker_pool_specs": [{**pools[0], "replica_count": 2}, *pools[1:]]}}})))
        assert len(jobs.sent) == 1 and not jobs.jobs  # refused: no job made
        task = run_task(executor_input)
        _kill_the_vertex_worker_after_an_epoch(jobs, task)
        code, output = _ended(task)
        request = jobs.sent[1]
        [job] = jobs.jobs.values()
        logs = {name: Path(path).read_text() for name, path in job.logs.items()}
    assert refused != 0 and "InvalidArgument: 400 workerPoolSpecs[0] is the primary replica: its replicaCount must " \
        "be 1, not 2" in said, said[-3000:]
    assert code == 0, output[-3000:]
    _sent_as_aiplatform_sends(request, pools=3)
    # each replica ran with Vertex's environment; the planner took ParameterServer from it
    assert set(logs) == {"workerpool0-0", "workerpool1-0", "workerpool2-0"}
    cluster_spec = json.loads(job.given["workerpool1-0"]["CLUSTER_SPEC"])
    job_id = job.given["workerpool1-0"]["CLOUD_ML_JOB_ID"]
    assert cluster_spec == {"cluster": {f"workerpool{p}": [f"cmle-training-workerpool{p}-{job_id}-0:2222"]
                                        for p in (0, 1, 2)},
                            "environment": "cloud", "task": {"type": "workerpool1", "index": 0, "trial": ""}}
    assert json.loads(job.given["workerpool0-0"]["TF_CONFIG"])["task"] == {"type": "chief", "index": 0, "trial": ""}
    assert json.loads(job.given["workerpool2-0"]["TF_CONFIG"])["task"] == {"type": "ps", "index": 0, "trial": ""}
    chief = logs["workerpool0-0"]
    assert "strategy=parameter_server replicas=1 is_chief=True" in chief, chief[-3000:]
    # the worker was restarted by the service, as Vertex restarts it; the coordinator took it back
    assert "The replica workerpool1-0 exited with a non-zero status of 137. Vertex restarts it with the same " \
        "hostname (restart 1 of 5)" in logs["workerpool1-0"] and job.restarts == {"workerpool1-0": 1}
    lost = chief.index("Worker /job:worker/replica:0/task:0 failed with UnavailableError")
    assert chief.index("Worker /job:worker/replica:0/task:0 has been recovered") > lost
    assert "> Trainer epoch 10/10" in chief[lost:] and "resumes at epoch" not in chief
    model = f"{outputs}/Trainer/model"
    assert f"{model}/Format-Serving/saved_model.pb".removeprefix(f"gs://{BUCKET}/") in objects(server, model)


def _sent_as_aiplatform_sends(request, pools: int) -> None:
    """The CreateCustomJobRequest as aiplatform's client sent it, read back into its own types: the
    project's region, ``pools`` pools of one replica each, tfxd's Trainer executor as their command."""
    from google.cloud.aiplatform_v1.types import CustomJob

    assert request.parent == "projects/tfxd-tests/locations/europe-west4"
    specs = CustomJob.to_dict(request.custom_job)["job_spec"]["worker_pool_specs"]
    assert [(int(p["replica_count"]), p["machine_spec"]["machine_type"], p["container_spec"]["image_uri"])
            for p in specs] == [(1, "n1-standard-4", "tfxd:replay")] * pools
    assert specs[0]["container_spec"]["command"][:5] == ["python", "-m", "tfx.scripts.run_executor",
                                                         "--executor_class_path",
                                                         "tfxd.components.trainer.executor.Executor"]
    assert request.custom_job.labels["tfx_executor"]


def _kill_the_vertex_worker_after_an_epoch(jobs, task: subprocess.Popen) -> None:
    """SIGKILL the custom job's worker once its chief has trained an epoch."""
    deadline = time.monotonic() + 300
    while not jobs.jobs or "> Trainer epoch 1/" not in Path(next(iter(jobs.jobs.values())).logs.get(
            "workerpool0-0", os.devnull)).read_text():
        assert time.monotonic() < deadline and task.poll() is None, task.communicate()[0][-3000:]
        time.sleep(0.1)
    [job] = jobs.jobs.values()
    job.processes["workerpool1-0"].kill()


def test_the_job_service_refuses_what_vertex_refuses():
    """The worker-pool rules of Vertex's documentation (distributed-training: the first pool is the primary
    replica alone), said back as INVALID_ARGUMENT, and a job that keeps them taken."""
    from google.cloud.aiplatform_v1.types import CustomJob

    from tfxd.kubeflow.replay.vertex_jobs import refusal

    def job(*pools: dict) -> CustomJob:
        return CustomJob(display_name="j", job_spec={"worker_pool_specs": list(pools)})

    pool = {"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"}, "container_spec": {"image_uri": "i"}}
    assert refusal(job(pool, {**pool, "replica_count": 3})) is None
    assert refusal(job({**pool, "replica_count": 2})) == ("workerPoolSpecs[0] is the primary replica: its replicaCount "
                                                          "must be 1, not 2")
    assert refusal(job()) == "a CustomJob has 1 to 4 worker pools, not 0"
    assert refusal(job(pool, {"replica_count": 1, "container_spec": {"image_uri": "i"}})) == \
        "workerPoolSpecs[1].machineSpec.machineType is required"


def test_a_replay_without_google_credentials_gets_a_key_aiplatform_signs_its_own_token_with(tmp_path, monkeypatch):
    """google.auth finds nothing of the user's (no key file, no metadata server, no gcloud login): the task is
    given a service-account key made for the replay, which google-auth reads as a service account's; where
    it finds the user's, nothing is added."""
    from google.oauth2 import service_account

    from tfxd.kubeflow.replay.vertex_jobs import VertexJobs

    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    with VertexJobs(str(tmp_path / "logs"), lambda container: []) as jobs:
        bare = jobs.environment({"CLOUDSDK_CONFIG": str(tmp_path / "gcloud")})
        key = service_account.Credentials.from_service_account_file(bare["GOOGLE_APPLICATION_CREDENTIALS"])
        assert key.service_account_email == "tfxd-replay@tfxd-replay.iam.gserviceaccount.com"
        assert bare["grpc_proxy"].startswith("http://127.0.0.1:") and os.path.isfile(bare["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"])
        assert "GOOGLE_APPLICATION_CREDENTIALS" not in jobs.environment({"GCE_METADATA_HOST": "10.0.0.1:80"})
    assert not os.path.exists(bare["GOOGLE_APPLICATION_CREDENTIALS"])  # gone with the service
