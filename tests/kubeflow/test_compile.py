"""`tfxd compile`: the three examples compile offline for both targets into files that parse strictly
into kfp-pipeline-spec's protos, name only importable executors, hold no local path and no environment
value but those the spec interpolates, come out byte-identical (twice, from other folders, under other
environments), and carry resources, runtime parameters and Vertex worker pools."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from tests.conftest import REPO
from tests.kubeflow.kfp_rules import backend_problems
from tfxd.kubeflow.cluster_target import pipeline_tasks
from tfxd.pipeline.spec.load import load_spec


def tfxd(*args: str, cwd) -> subprocess.CompletedProcess:
    binary = os.path.join(os.path.dirname(sys.executable), "tfxd")
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def _executors(pipeline_spec: dict) -> dict:
    return pipeline_spec["deploymentSpec"]["executors"]


def test_outputs_parse_strictly_and_name_importable_executors(compiled):
    for (example, target), path in compiled.items():
        if target == "kubeflow":
            pipeline_spec = yaml.safe_load(path.read_text())
            json_format.ParseDict(pipeline_spec, pipeline_spec_pb2.PipelineSpec())  # unknown fields raise
        else:
            job = json.loads(path.read_text())
            json_format.ParseDict(job, pipeline_spec_pb2.PipelineJob())
            pipeline_spec = job["pipelineSpec"]
            assert job["runtimeConfig"]["gcsOutputDirectory"] == f"gs://my-bucket/pipelines/{pipeline_spec['pipelineInfo']['name']}/pipeline"
        classes = []
        for executor in _executors(pipeline_spec).values():
            args = executor.get("container", {}).get("args", [])
            if "--executor_class_path" in args:
                classes.append(args[args.index("--executor_class_path") + 1])
                assert executor["container"]["image"].endswith(f"tfxd-{example}:0.1.0")
        # eight components, and the task that finds the baseline in the push destination
        assert len(classes) == 9, (example, target, classes)
        for dotted in classes:
            module, _, name = dotted.rpartition(".")
            assert getattr(importlib.import_module(module), name)
        assert "tfxd.components.trainer.executor.Executor" in classes
        tasks = pipeline_tasks(pipeline_spec)
        for name, task in tasks.items():  # each task's record says its pipeline and its name (cluster_task.py)
            label = pipeline_spec["components"][task["componentRef"]["name"]]["executorLabel"]
            container = _executors(pipeline_spec)[label].get("container")
            if container is None:  # a resolver Vertex runs itself, or an importer
                continue
            assert container["command"] == ["python", "-m", "tfxd.components.cluster_task"], (name, container)
            assert container["args"][:4] == ["--tfxd_pipeline", pipeline_spec["pipelineInfo"]["name"], "--tfxd_task", name]
        for task, key, dotted in (("Transform", "preprocessing_fn", "tfxd.components.transform.preprocessing.preprocessing_fn"),
                                  ("Trainer", "run_fn", "tfxd.trainer_module.run_fn.run_fn")):
            parameters = tasks[task]["inputs"]["parameters"]
            constant = parameters[key]["runtimeValue"]  # schema 2.1.0 (Kubeflow) holds plain values
            assert (constant["constant"] if target == "kubeflow" else constant["constantValue"]["stringValue"]) == dotted
            assert "module_file" not in parameters and "module_path" not in parameters
            module, _, name = dotted.rpartition(".")
            assert callable(getattr(importlib.import_module(module), name))


@pytest.mark.reliability("compiled file")
def test_no_local_paths_and_byte_identical(compiled, tmp_path):
    for path in compiled.values():
        text = path.read_text()
        for local in (str(REPO), str(Path.home()), "/tmp/", str(tmp_path.parent)):
            assert local not in text, (path, local)
        assert "/tfxd/project/data/" in text  # the data, where kubeflow/Dockerfile puts the project
    again = tmp_path / "taxi.json"
    result = tfxd("compile", str(REPO / "examples" / "taxi.yaml"), "--target", "vertex", "-o", str(again), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert again.read_bytes() == compiled[("taxi", "vertex")].read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["taxi.json"]  # nothing else written


SECRETS = {"TFXD_TEST_TOKEN": "s3cr3t-t0ken-value", "AWS_SECRET_ACCESS_KEY": "aws-s3cr3t-key-value",
           "GOOGLE_APPLICATION_CREDENTIALS": "/secret/place/creds.json", "KFP_BEARER": "bearer-s3cr3t-value"}


@pytest.mark.reliability("compiled file")
def test_only_interpolated_environment_reaches_the_compiled_files(tmp_path):
    """Compiled from two folders, under two environments full of look-alike credentials: the files are
    byte-identical, hold the one value the spec interpolates, and none of the rest of the environment."""
    outputs = []
    for name, extra_env in (("a", {}), ("b", SECRETS)):
        folder = tmp_path / name
        folder.mkdir()
        spec = _spec_with(folder, "")
        spec.write_text(spec.read_text().replace("image: us-docker.pkg.dev/my-project/ml/tfxd-taxi:0.1.0",
                                                 "image: us-docker.pkg.dev/my-project/ml/tfxd-taxi:${TFXD_TEST_TAG}"))
        env = {**os.environ, **extra_env, "TFXD_TEST_TAG": "v7", "HOME": str(folder)}
        binary = os.path.join(os.path.dirname(sys.executable), "tfxd")
        for target in ("vertex", "kubeflow"):
            out = folder / f"taxi-{target}.out"
            result = subprocess.run([binary, "compile", str(spec), "--target", target, "-o", str(out)],
                                    capture_output=True, text=True, cwd=folder, env=env, timeout=600)
            assert result.returncode == 0, result.stderr
            outputs.append(out)
    a_vertex, a_kubeflow, b_vertex, b_kubeflow = (p.read_bytes() for p in outputs)
    assert a_vertex == b_vertex and a_kubeflow == b_kubeflow
    assert b"tfxd-taxi:v7" in b_vertex
    skipped = {"TFXD_TEST_TAG", "PWD", "OLDPWD", "SHLVL", "_"}
    values = {v for k, v in {**os.environ, **SECRETS}.items() if k not in skipped and len(v) >= 8}
    for text in (b_vertex.decode(), b_kubeflow.decode()):
        leaked = sorted(v for v in values if v in text and not v.startswith(("us-central1", "/tfxd")))
        assert leaked == [], leaked
        for word in ("private_key", "password", "access_token", "BEGIN PRIVATE KEY"):
            assert word not in text


def test_vertex_file_loads_in_the_aiplatform_sdk(compiled):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    job = aiplatform.PipelineJob(display_name="taxi-tips", template_path=str(compiled[("taxi", "vertex")]),
                                 project="my-project", location="us-central1", credentials=AnonymousCredentials())
    runtime = job._gca_resource.runtime_config
    assert runtime.gcs_output_directory == "gs://my-bucket/pipelines/taxi-tips/pipeline"
    assert json.loads(runtime.parameters["train_args"].string_value) == {"numSteps": 1000}


def test_training_length_is_a_runtime_parameter(compiled):
    pipeline_spec = yaml.safe_load(compiled[("taxi", "kubeflow")].read_text())
    parameters = pipeline_spec["root"]["inputDefinitions"]["parameters"]
    assert json.loads(parameters["train_args"]["defaultValue"]) == {"numSteps": 1000}
    assert json.loads(parameters["eval_args"]["defaultValue"]) == {"numSteps": 150}
    trainer = pipeline_tasks(pipeline_spec)["Trainer"]["inputs"]["parameters"]
    assert trainer["train_args"] == {"componentInputParameter": "train_args"}


def _spec_with(tmp_path: Path, extra: str) -> Path:
    text = (REPO / "examples" / "taxi.yaml").read_text() + extra
    (tmp_path / "taxi.yaml").write_text(text)
    os.symlink(REPO / "examples" / "data", tmp_path / "data")
    return tmp_path / "taxi.yaml"


def test_kubeflow_resources_become_task_resources(tmp_path):
    spec = _spec_with(tmp_path, "")
    spec.write_text(spec.read_text().replace("    root: gs://my-bucket/tfxd\n", "    root: gs://my-bucket/tfxd\n"
                                             "    resources:\n      Trainer: {cpu: 4, memory: 16Gi, gpu: 1}\n"
                                             "      Transform: {cpu: 500m, memory: 2G}\n", 1))
    result = tfxd("compile", str(spec), "--target", "kubeflow", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    executors = _executors(yaml.safe_load(result.stdout))
    assert executors["Trainer_executor"]["container"]["resources"] == {
        "cpuLimit": 4.0, "cpuRequest": 4.0, "memoryLimit": 17.179869, "memoryRequest": 17.179869,
        "accelerator": {"type": "nvidia.com/gpu", "count": "1"}}
    assert executors["Transform_executor"]["container"]["resources"] == {
        "cpuLimit": 0.5, "cpuRequest": 0.5, "memoryLimit": 2.0, "memoryRequest": 2.0}
    assert "resources" not in executors["Evaluator_executor"]["container"]


def test_vertex_worker_pools_for_two_workers_one_ps_and_t4s(tmp_path):
    from tfxd.pipeline.spec.load import load_spec

    spec = _spec_with(tmp_path, "")
    sets = ("targets.vertex.trainer.workers=2", "targets.vertex.trainer.parameter_servers=1",
            "targets.vertex.trainer.machine_type=n1-standard-8",
            "targets.vertex.trainer.accelerator={type: NVIDIA_TESLA_T4, count: 1}",
            "targets.vertex.service_account=trainer@my-project.iam.gserviceaccount.com")
    from tfxd.components.trainer.vertex_job import custom_config

    vertex = load_spec(str(spec), sets, target="vertex").spec.targets.vertex
    image = {"image_uri": "us-docker.pkg.dev/my-project/ml/tfxd-taxi:0.1.0"}
    t4 = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
    assert custom_config(vertex) == {
        "ai_platform_training_args": {"project": "my-project", "job_spec": {
            "service_account": "trainer@my-project.iam.gserviceaccount.com",
            "worker_pool_specs": [
                {"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-8"}, "container_spec": image},
                {"replica_count": 2, "machine_spec": t4, "container_spec": image},
                {"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-8"}, "container_spec": image},
            ]}},
        "ai_platform_enable_vertex": True, "ai_platform_vertex_region": "us-central1"}
    args = [f"--set={s}" for s in sets]
    result = tfxd("compile", str(spec), "--target", "vertex", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    pipeline_spec = json.loads(result.stdout)["pipelineSpec"]
    trainer_args = _executors(pipeline_spec)["Trainer_executor"]["container"]["args"]
    assert trainer_args[4:6] == ["--executor_class_path", "tfxd.components.trainer.vertex_job.Executor"]


def test_mirrored_workers_put_accelerators_on_the_chief_too():
    from types import SimpleNamespace

    from tfxd.components.trainer.vertex_job import worker_pools

    trainer = SimpleNamespace(workers=3, parameter_servers=0, machine_type="a2-highgpu-1g",
                              accelerator=SimpleNamespace(type="NVIDIA_TESLA_A100", count=1))
    pools = worker_pools(trainer, "img")
    assert [p["replica_count"] for p in pools] == [1, 2]
    assert all(p["machine_spec"]["accelerator_type"] == "NVIDIA_TESLA_A100" for p in pools)


@pytest.mark.parametrize(("extra", "key", "message"), [
    ("training:\n  strategy: parameter_server\n", "training.strategy", "targets.kubeflow.trainer has none"),
    ("push:\n  to: /srv/models\n", "push.to", "cannot write"),
])
def test_what_kubeflow_cannot_honour_is_refused_at_validate(tmp_path, extra, key, message):
    spec = _spec_with(tmp_path, "")
    text = spec.read_text()
    section = extra.split(":")[0]
    if f"\n{section}:" in text:
        text = text.replace(f"\n{section}:\n", "\n" + extra, 1)
    else:
        text += extra
    spec.write_text(text)
    result = tfxd("validate", str(spec), "--target", "kubeflow", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert key in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr


T = "targets.kubeflow.trainer"


@pytest.mark.parametrize(("sets", "key", "message"), [
    ((f"{T}.workers=2", f"{T}.parameter_servers=1", f"{T}.resources.ps.gpu=1"), f"{T}.resources.ps.gpu",
     "parameter servers hold variables and compute nothing"),
    ((f"{T}.workers=0",), f"{T}.workers", "greater than or equal to 1"),
    ((f"{T}.parameter_servers=1", f"{T}.clean_pod_policy=None"), f"{T}.clean_pod_policy",
     "keep running, and holding their nodes"),
    ((f"{T}.namespace=team-a",), f"{T}.namespace",
     "configure(s) the operator's job (a TrainJob or a TFJob), which runs only when"),
    ((f"{T}.workers=2", "targets.kubeflow.resources.Trainer.gpu=1"), "targets.kubeflow.resources.Trainer.gpu",
     "only launches and follows it"),
    ((f"{T}.workers=2", "training.strategy=mirrored"), "training.strategy", "mirrored trains in one process"),
    ((f"{T}.workers=2", "training.strategy=default"), "training.strategy",
     "default trains in one process, and targets.kubeflow.trainer has 2 chief/worker task(s)"),
    ((f"{T}.parameter_servers=1", "training.strategy=multi_worker_mirrored"), "training.strategy",
     "multi_worker_mirrored has no parameter servers"),
    ((f"{T}.workers=2", f'{T}.tolerations=[{{"key": "gpu", "operator": "Exists", "value": "x"}}]'),
     f"{T}.tolerations[0].value", "matches any value, and takes none"),
    ((f"{T}.workers=2", f"{T}.timeout=90"), f"{T}.timeout", ""),
    ((f"{T}.workers=2", f"{T}.namespace=Team_A"), f"{T}.namespace", ""),
    ((f"{T}.workers=2", f"{T}.resources.worker.memory=16m"), f"{T}.resources.worker.memory", "thousandths"),
])
def test_a_tfjob_that_cannot_work_is_refused_at_validate(make_spec, sets, key, message):
    from tfxd.pipeline.spec.errors import SpecError

    with pytest.raises(SpecError) as refusal:
        load_spec(make_spec.path, ["targets.kubeflow.root=gs://b/kfp", *sets], target="kubeflow", check_files=False)
    assert key in str(refusal.value) and message in str(refusal.value)


def test_multi_worker_and_parameter_server_trainers_compile_to_a_tfjob_task(make_spec):
    from tfxd.kubeflow.compile import pipeline_job

    for sets in ((f"{T}.workers=3", "training.strategy=multi_worker_mirrored"),
                 (f"{T}.workers=2", f"{T}.parameter_servers=1", "training.strategy=parameter_server")):
        loaded = load_spec(make_spec.path, ["targets.kubeflow.root=gs://b/kfp", *sets], target="kubeflow",
                           check_files=False)
        pipeline_spec = pipeline_job(loaded, "kubeflow")["pipelineSpec"]
        args = pipeline_spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]["args"]
        assert args[args.index("--executor_class_path") + 1] == "tfxd.components.trainer.job_launch.OperatorExecutor"
        config = json.loads(pipeline_tasks(pipeline_spec)["Trainer"]["inputs"]["parameters"][
            "custom_config"]["runtimeValue"]["constant"])
        assert config["operator_job"]["workers"] == int(sets[0].split("=")[1]) and config["operator_job"]["timeout_seconds"] == 86400
        assert backend_problems(pipeline_spec) == []
    # one process: the Trainer trains in its own pod
    one = pipeline_job(load_spec(make_spec.path, ["targets.kubeflow.root=gs://b/kfp"], target="kubeflow",
                                 check_files=False), "kubeflow")["pipelineSpec"]
    args = one["deploymentSpec"]["executors"]["Trainer_executor"]["container"]["args"]
    assert args[args.index("--executor_class_path") + 1] == "tfxd.components.trainer.executor.Executor"


def test_a_non_utc_kubeflow_schedule_is_refused(tmp_path):
    spec = _spec_with(tmp_path, "")
    spec.write_text(spec.read_text().replace("    root: gs://my-bucket/tfxd\n", "    root: gs://my-bucket/tfxd\n"
                                             "    schedule: {cron: '0 3 * * 1', timezone: Europe/Berlin}\n", 1))
    result = tfxd("validate", str(spec), "--target", "kubeflow", cwd=tmp_path)
    assert result.returncode == 2
    assert "targets.kubeflow.schedule.timezone" in result.stderr and "UTC" in result.stderr


def test_the_dockerfile_matches_what_compile_assumes():
    from tfxd import keys

    lines = (REPO / "kubeflow" / "Dockerfile").read_text().splitlines()
    assert "ARG TFX_IMAGE=gcr.io/tfx-oss-public/tfx:1.16.0" in lines and "FROM ${TFX_IMAGE}" in lines
    env = " ".join(line.strip(" \\") for line in lines if line.startswith(("ENV", "    ")))
    assert "TF_USE_LEGACY_KERAS=1" in env and f"PYTHONPATH={keys.IMAGE_PROJECT_DIR}" in env
    assert f"COPY . {keys.IMAGE_PROJECT_DIR}" in lines and f"WORKDIR {keys.IMAGE_PROJECT_DIR}" in lines


def test_a_name_kubeflow_refuses_is_refused_at_validate(tmp_path):
    spec = _spec_with(tmp_path, "")
    spec.write_text(spec.read_text().replace("name: taxi-tips\n", "name: taxi-tips-\n", 1))
    assert tfxd("validate", str(spec), cwd=tmp_path).returncode == 0  # a fine name locally
    result = tfxd("validate", str(spec), "--target", "kubeflow", cwd=tmp_path)
    assert result.returncode == 2
    assert "taxi.yaml:5:7: name: Kubeflow Pipelines takes a pipeline name that starts and ends with a letter" \
        in result.stderr and "hint: drop the trailing '-' from name" in result.stderr
