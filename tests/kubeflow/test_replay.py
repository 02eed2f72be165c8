"""`tfxd replay` (kubeflow.replay): a compiled file executed here task by task.

- The compiled taxi example (Vertex JSON, as Vertex runs it: TFX's driver hook, a task finding the
  baseline in the push destination) replays to a
  trained, evaluated, blessed and pushed model that answers raw tf.Examples; the Evaluator's accuracy
  meets the bar `tfxd run` meets.
- The Kubeflow YAML replays as the open-source backend runs it (no driver hook, no resolver: a task
  finds the baseline), with train_args overridden (the Trainer ran 100 steps), blessed and pushed; a
  second Kubeflow replay under the same root takes the first one's pushed model as its baseline.
- Digits, compiled for Kubeflow, replays to a pushed model too (penguin replays on a Cloud Storage API
  server: test_replay_on_bucket.py).
- A failing task stops the replay, naming the task, its exit code and its log.
- Without TensorFlow: ordering, the launcher's placeholders and executor input, parameters, bucket and
  project mapping, importers and resolver filters, on tiny hand-written PipelineSpecs.

Three full taxi replays (module-scoped, ~1.5-2 minutes each on 2 cores) and one that fails at ExampleGen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests.conftest import REPO
from tests.pipeline.run.test_run_taxi import (
    TAXI_ACCURACY_FLOOR,
    example_project,
    served_on_raw_examples,
)
from tfxd import keys
from tfxd.kubeflow.replay import artifacts, ir, launcher, runner

BASELINE_TASK = "latest_blessed_model_resolver"  # on both targets a container task (components/baseline)
CONTAINERS = ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "Trainer", "Evaluator",
              "Pusher")


# ------------------------------------------------------------------------------------------ taxi, replayed


@pytest.fixture(scope="module")
def taxi(tmp_path_factory) -> dict[str, Path]:
    """A scratch project (taxi.yaml and its data) and the example compiled for both targets."""
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    project = tmp_path_factory.mktemp("project")
    (project / "taxi.yaml").write_text((REPO / "examples" / "taxi.yaml").read_text())
    os.symlink(REPO / "examples" / "data", project / "data")
    out = tmp_path_factory.mktemp("compiled")
    files = {"project": project, "root": tmp_path_factory.mktemp("replays")}
    for target, name in (("vertex", "taxi.json"), ("kubeflow", "taxi.yaml")):
        files[target] = Path(compile_to(load_spec(str(project / "taxi.yaml"), target=target), target,
                                        str(out / name)))
    return files


@pytest.fixture(scope="module")
def first(taxi) -> tuple[dict, list]:
    """The Vertex PipelineJob replayed as compiled (and the on_task events)."""
    events: list = []
    summary = runner.replay(str(taxi["vertex"]), project_dir=str(taxi["project"]), root=str(taxi["root"]),
                        on_task=lambda name, event: events.append((name, event)))
    return summary, events


@pytest.fixture(scope="module")
def second(taxi, first) -> dict:
    """The KFP YAML replayed under the same root, 100 training steps, through the CLI."""
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    result = subprocess.run([tfxd, "replay", str(taxi["kubeflow"]), "--project", str(taxi["project"]), "--root",
                             str(taxi["root"]), "--param", 'train_args={"numSteps": 100}'],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    for task in CONTAINERS:
        assert f"ok {task} ran (" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    runs = sorted(p for p in taxi["root"].iterdir() if (p / "summary.json").is_file())
    summary = json.loads((runs[-1] / "summary.json").read_text())
    assert f"replay {summary['run_id']} of taxi-tips" in result.stdout
    return summary


@pytest.fixture(scope="module")
def third(taxi, second) -> dict:
    """The KFP YAML replayed once more under the same root, in process, 120 steps: another model. With the
    second's 100 steps the example's seed (42) and the same transformed examples train the second's model bit
    for bit, which the baseline task passes over as the candidate itself (components/baseline)."""
    return runner.replay(str(taxi["kubeflow"]), project_dir=str(taxi["project"]), root=str(taxi["root"]),
                         parameters={"train_args": '{"numSteps": 120}'})


def _task(summary: dict, name: str) -> dict:
    return next(task for task in summary["tasks"] if task["name"] == name)


def _value(example, name: str) -> float:
    values = example.features.feature[name].float_list.value if name in example.features.feature else []
    return values[0] if values else np.nan


def test_vertex_job_replays_every_task(taxi, first):
    summary, events = first
    root = taxi["root"]
    assert summary["status"] == "ok" and summary["format"] == "vertex" and summary["pipeline"] == "taxi-tips"
    statuses = {task["name"]: task["status"] for task in summary["tasks"]}
    assert statuses == dict.fromkeys((*CONTAINERS, BASELINE_TASK), "ran")
    order = [task["name"] for task in summary["tasks"]]
    assert order.index("Trainer") < order.index(BASELINE_TASK) < order.index("Evaluator") < order.index("Pusher")
    assert summary["parameters"] == {"train_args": '{"numSteps": 1000}', "eval_args": '{"numSteps": 150}'}
    run_dir = root / summary["run_id"]
    for name in CONTAINERS:
        log = run_dir / "logs" / f"{name}.log"
        assert _task(summary, name)["log"] == str(log) and log.stat().st_size > 0
        assert (run_dir / name / "executor_output.json").is_file()
        assert _task(summary, name)["seconds"] > 0
    assert [(name, event["event"]) for name, event in events] == [
        (name, kind) for name in order for kind in ("start", "end")]
    # the image's project is the local project; the Beam flags are the in-memory ones
    executor_input = json.loads((run_dir / "ExampleGen" / "executor_input.json").read_text())
    assert executor_input["inputs"]["parameters"]["input_base"] == {
        "stringValue": os.path.join(str(taxi["project"]), "data", "taxi")}
    assert executor_input["inputs"]["parameters"]["span"] == {"intValue": "0"}  # from the driver
    assert "input_fingerprint" in executor_input["inputs"]["parameterValues"]
    assert "--direct_running_mode=in_memory" in (run_dir / "logs" / "Trainer.log").read_text().splitlines()[1]
    examples = json.loads((run_dir / "ExampleGen" / "executor_output.json").read_text())
    metadata = examples["artifacts"]["examples"]["artifacts"][0]["metadata"]
    assert json.loads(metadata["split_names"]) == ["train", "eval"]
    assert sum(json.loads(metadata["tfxd_split_counts"]).values()) == 15002
    # every output artifact is indexed under the root, with a unique name
    index = json.loads((root / artifacts.INDEX_FILE).read_text())["artifacts"]
    mine = [record for record in index if record["run_id"] == summary["run_id"]]
    assert len({record["name"] for record in mine}) == len(mine) == len(summary["artifacts"])
    assert {record["uri"] for record in mine} == set(summary["artifacts"].values())
    assert (Path(summary["artifacts"]["Trainer.model"]) / "Format-Serving" / "saved_model.pb").is_file()


def test_replay_blesses_and_pushes_locally_never_to_the_bucket(taxi, first):
    summary, _ = first
    root = taxi["root"]
    assert summary["blessed"] is True and summary["baseline"] is None  # the first model has no baseline
    assert summary["model"] == summary["artifacts"]["Trainer.model"]
    assert summary["pushed"] is True
    pushed = Path(summary["pushed_destination"])
    assert pushed.parent == root / "bucket" / "my-bucket" / "pipelines" / "taxi-tips" / "serving"
    assert (pushed / "saved_model.pb").is_file()
    assert summary["pushed_destination_on_cluster"] == f"gs://my-bucket/pipelines/taxi-tips/serving/{pushed.name}"
    assert summary["buckets"] == {"gs://my-bucket": str(root / "bucket" / "my-bucket")}
    assert summary["pipeline_root_on_cluster"] == "gs://my-bucket/pipelines/taxi-tips/pipeline"
    assert not list(Path(taxi["project"]).glob("gs:*")) and not list(Path.cwd().glob("gs:*"))


def test_pushed_model_answers_raw_examples(first):
    summary, _ = first
    served, expected = served_on_raw_examples(summary["pushed_destination"],
                                              summary["artifacts"]["ExampleGen.examples"])
    accuracy = float(((served > 0.5) == expected).mean())
    assert accuracy >= 0.75, accuracy


def test_evaluator_accuracy_matches_the_local_run(first):
    import tensorflow_model_analysis as tfma

    summary, _ = first
    overall = [m for m in tfma.load_metrics(summary["evaluation"]) if not m.slice_key.single_slice_keys]
    assert len(overall) == 1
    values = {kv.key.name: kv.value.double_value.value for kv in overall[0].metric_keys_and_values}
    assert values["example_count"] == 2988
    # the bar `tfxd run` of the same example meets (unseeded, the model varies by a few points run to run)
    assert TAXI_ACCURACY_FLOOR <= values["binary_accuracy"] <= 1.0, values


def test_kubeflow_yaml_replays_as_the_open_source_backend_runs_it(taxi, second):
    assert second["format"] == "kubeflow" and second["status"] == "ok"
    assert second["parameters"]["train_args"] == '{"numSteps": 100}'
    assert second["parameters"]["eval_args"] == '{"numSteps": 150}'  # the file's default
    assert {task["name"]: task["status"] for task in second["tasks"]} == {
        **dict.fromkeys(CONTAINERS, "ran"), BASELINE_TASK: "ran"}
    report = json.loads((Path(second["artifacts"]["Trainer.model"]) / "tfxd_training.json").read_text())
    assert report["steps_per_epoch"] * report["epochs"] == 100
    assert len(report["history"]) == report["epochs"]
    # no driver ran: ExampleGen's executor resolved the span and the input's fingerprint itself
    run_dir = Path(second["run_dir"])
    assert not (run_dir / "ExampleGen" / "pre_cache_check_output.json").exists()
    examples = json.loads((run_dir / "ExampleGen" / "executor_output.json").read_text())
    metadata = examples["artifacts"]["examples"]["artifacts"][0]["metadata"]
    assert metadata["span"] == 0 and metadata["input_fingerprint"].startswith("split:single_split,num_files:1,")
    # the Vertex replay pushed elsewhere (its target's bucket): this first Kubeflow model has no baseline
    assert not os.listdir(second["artifacts"][f"{BASELINE_TASK}.model"])
    assert second["baseline"] is None
    assert second["blessed"] is True and second["pushed"] is True
    assert Path(second["pushed_destination"]).parent == (
        taxi["root"] / "bucket" / "my-bucket" / "tfxd" / "taxi-tips" / "serving")


def test_a_second_kubeflow_replay_takes_the_first_pushed_model_as_baseline(second, third):
    assert third["run_id"] != second["run_id"] and third["status"] == "ok"
    baseline = Path(third["artifacts"][f"{BASELINE_TASK}.model"])
    output = json.loads((Path(third["run_dir"]) / BASELINE_TASK / "executor_output.json").read_text())
    source = output["artifacts"]["model"]["artifacts"][0]["metadata"]["tfxd_baseline_source"]
    assert source == second["pushed_destination"]  # the newest model pushed, not this run's candidate
    assert (baseline / "Format-Serving" / "saved_model.pb").read_bytes() == (
        Path(second["pushed_destination"]) / "saved_model.pb").read_bytes()
    assert third["baseline"] == str(baseline) and third["model"] == third["artifacts"]["Trainer.model"]
    evaluator_input = json.loads(
        (Path(third["run_dir"]) / "Evaluator" / "executor_input.json").read_text())["inputs"]["artifacts"]
    assert [a["uri"] for a in evaluator_input["baseline_model"]["artifacts"]] == [str(baseline)]
    # the Evaluator compared the two models: the metrics hold their differences (the max_drop threshold's)
    import tensorflow_model_analysis as tfma

    diffs = {kv.key.name for record in tfma.load_metrics(third["evaluation"])
             for kv in record.metric_keys_and_values if kv.key.is_diff}
    assert "binary_accuracy" in diffs


@pytest.mark.xdist_group("tests/kubeflow/test_replay.py: the other examples")  # shares no module fixture
@pytest.mark.parametrize(("example", "pipeline"), [("digits", "digits-cnn")])  # penguin: test_replay_on_bucket.py
def test_the_other_examples_replay_to_a_pushed_model(tmp_path_factory, example, pipeline):
    """Each example as shipped, compiled for Kubeflow, replays end to end: every task ran, the model is
    blessed and pushed (to the replay's stand-in for the bucket)."""
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    project = example_project(tmp_path_factory, example)
    compiled = compile_to(load_spec(str(project / f"{example}.yaml"), target="kubeflow"), "kubeflow",
                          str(project / f"{example}-kubeflow.yaml"))
    summary = runner.replay(compiled, project_dir=str(project), root=str(project / "replays"))
    assert summary["pipeline"] == pipeline and summary["status"] == "ok"
    assert {task["name"]: task["status"] for task in summary["tasks"]} == {
        **dict.fromkeys(CONTAINERS, "ran"), BASELINE_TASK: "ran"}
    assert summary["blessed"] is True and summary["pushed"] is True
    assert summary["pushed_destination_on_cluster"].startswith(f"gs://my-bucket/tfxd/{pipeline}/serving/")
    assert os.path.isdir(summary["pushed_destination"])


def test_failing_task_stops_the_replay(taxi, tmp_path):
    job = json.loads(taxi["vertex"].read_text())
    parameters = job["pipelineSpec"]["root"]["dag"]["tasks"]["ExampleGen"]["inputs"]["parameters"]
    parameters["input_base"]["runtimeValue"]["constantValue"]["stringValue"] = f"{keys.IMAGE_PROJECT_DIR}/data/missing"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(job))
    events: list = []
    with pytest.raises(launcher.TaskFailed) as caught:
        runner.replay(str(broken), project_dir=str(taxi["project"]), root=str(tmp_path / "root"),
                  on_task=lambda name, event: events.append((name, event["event"], event.get("status"))))
    error = caught.value
    log = tmp_path / "root" / error.summary["run_id"] / "logs" / "ExampleGen.log"
    assert error.task == "ExampleGen" and error.exit_code not in (0, None)
    assert error.log == str(log) and log.is_file()
    text = str(error)
    assert text.startswith("ExampleGen failed: exit code ") and str(log) in text
    # the root cause from the log, with the path as the replay saw it (the image's project is the local one)
    assert f"InputError: no data file matches {taxi['project']}/data/missing" in text
    assert f"{taxi['project']}/data/missing" in log.read_text()
    assert events == [("ExampleGen", "start", None), ("ExampleGen", "end", "failed")]
    statuses = {task["name"]: task["status"] for task in error.summary["tasks"]}
    assert statuses.pop("ExampleGen") == "failed" and set(statuses.values()) == {"not run"}
    saved = json.loads((tmp_path / "root" / error.summary["run_id"] / "summary.json").read_text())
    assert saved["status"] == "failed"


def test_sigterm_stops_the_replay_with_exit_143_and_removes_the_stopped_tasks_outputs(taxi, tmp_path):
    from tests.pipeline.run.test_crash_resume import TFXD, _processes_of

    root = tmp_path / "root"
    process = subprocess.Popen([TFXD, "replay", str(taxi["vertex"]), "--project", str(taxi["project"]),
                                "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        for line in process.stdout:
            if "> StatisticsGen ..." in line:
                break
        _wait_for_a_forked_task(process.pid)  # the task's own process is at work
        process.send_signal(signal.SIGTERM)  # the main process alone, as Kubernetes or `timeout` sends it
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 143, out + err
    assert "replay interrupted by SIGTERM; the stopped task's outputs were removed" in err
    assert "Traceback" not in out + err
    assert not _processes_of(process.pid)  # the task's process was stopped with it
    [summary_file] = root.glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM"
    statuses = {task["name"]: task["status"] for task in summary["tasks"]}
    assert statuses["ExampleGen"] == "ran" and statuses["StatisticsGen"] == "interrupted"
    assert (summary_file.parent / "ExampleGen").is_dir() and not (summary_file.parent / "StatisticsGen").exists()
    assert not list(root.glob("**/*.tmp"))  # each task's temporary folder went with it, the stopped one's too


def _wait_for_a_forked_task(replay: int, timeout: float = 120) -> None:
    """Until the replay's preloader has forked a task (forked_tasks.py): a process under the replay whose
    parent is not the replay itself."""
    deadline = time.monotonic() + timeout
    while True:
        for child in psutil.Process(replay).children(recursive=True):
            with contextlib.suppress(psutil.Error):  # ended meanwhile
                if child.ppid() != replay:
                    return
        assert time.monotonic() < deadline, "no task was forked"
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------ without TensorFlow

# A container that echoes what it got: its executor input (argv[1]) and the rest of its args, into its
# output artifact's folder, and writes ExecutorOutput metadata for its outputs.
ECHO = textwrap.dedent("""\
    import json, os, sys
    executor_input = json.loads(sys.argv[1])
    outputs = executor_input["outputs"]
    result = {"artifacts": {}, "parameterValues": {}}
    for key, listed in outputs["artifacts"].items():
        artifact = listed["artifacts"][0]
        os.makedirs(artifact["uri"], exist_ok=True)
        with open(os.path.join(artifact["uri"], "seen.json"), "w") as handle:
            json.dump({"input": executor_input, "argv": sys.argv[2:], "env": {
                "PYTHONPATH": os.environ["PYTHONPATH"], "TF_USE_LEGACY_KERAS": os.environ["TF_USE_LEGACY_KERAS"],
                "cwd": os.getcwd(), "python": sys.executable}}, handle)
        metadata = dict(artifact["metadata"], made_by=os.path.basename(os.path.dirname(artifact["uri"])),
                        score=float(os.environ.get("SCORE", "1")))
        result["artifacts"][key] = {"artifacts": [dict(artifact, metadata=metadata)]}
    for key in outputs.get("parameters", {}):
        result["parameterValues"][key] = "made-" + key
    if os.environ.get("FAIL") and "--fail" in sys.argv:
        print("ValueError: asked to fail", file=sys.stderr)
        sys.exit(3)
    os.makedirs(os.path.dirname(outputs["outputFile"]), exist_ok=True)
    with open(outputs["outputFile"], "w") as handle:
        json.dump(result, handle)
    """)


def _artifact_type(title: str) -> dict:
    return {"artifactType": {"instanceSchema": f"title: {title}\ntype: object\n"}}


def _pipeline_spec(echo: str) -> dict:
    container = {"image": "example/image:1", "command": ["python", echo],
                 "args": ["{{$}}", "--runner=DirectRunner", "--direct_num_workers=0",
                          f"--data={keys.IMAGE_PROJECT_DIR}/data", "--out={{$.outputs.artifacts['data'].uri}}",
                          "--param={{$.inputs.parameters['where']}}", "--dest=gs://bucket-a/serving/x"]}
    return {
        "pipelineInfo": {"name": "tiny"},
        "schemaVersion": "2.0.0",
        "root": {
            "inputDefinitions": {"parameters": {"steps": {"type": "INT", "defaultValue": 5},
                                                "label": {"type": "STRING", "defaultValue": "x"}}},
            "dag": {"tasks": {
                "make": {"componentRef": {"name": "make"}, "taskInfo": {"name": "make"},
                         "inputs": {"parameters": {
                             "where": {"runtimeValue": {"constantValue": {"stringValue":
                                                                          f"{keys.IMAGE_PROJECT_DIR}/data/file.csv"}}},
                             "steps": {"componentInputParameter": "steps"},
                             "ratio": {"runtimeValue": {"constant": 0.5}}}}},
                "use": {"componentRef": {"name": "use"}, "taskInfo": {"name": "use"},
                        "inputs": {
                            "artifacts": {
                                "data": {"taskOutputArtifact": {"producerTask": "make", "outputArtifactKey": "data"}},
                                "imported": {"taskOutputArtifact": {"producerTask": "bring",
                                                                    "outputArtifactKey": "result"}}},
                            "parameters": {
                                "note": {"taskOutputParameter": {"producerTask": "make",
                                                                 "outputParameterKey": "note"}},
                                "where": {"componentInputParameter": "label"}}}},
                "bring": {"componentRef": {"name": "bring"}, "taskInfo": {"name": "bring"}},
                "latest": {"componentRef": {"name": "latest"}, "taskInfo": {"name": "latest"},
                           "dependentTasks": ["use"]},
            }},
        },
        "components": {
            "make": {"executorLabel": "make_executor",
                     "inputDefinitions": {"parameters": {"where": {"type": "STRING"}, "steps": {"type": "INT"},
                                                         "ratio": {"parameterType": "NUMBER_DOUBLE"}}},
                     "outputDefinitions": {"artifacts": {"data": _artifact_type("tfx.Examples")},
                                           "parameters": {"note": {"type": "STRING"}}}},
            "use": {"executorLabel": "use_executor",
                    "inputDefinitions": {"artifacts": {"data": _artifact_type("tfx.Examples"),
                                                       "imported": _artifact_type("tfx.Schema")},
                                         "parameters": {"note": {"type": "STRING"}, "where": {"type": "STRING"}}},
                    "outputDefinitions": {"artifacts": {"data": _artifact_type("tfx.Model")}}},
            "bring": {"executorLabel": "bring_executor",
                      "outputDefinitions": {"artifacts": {"result": _artifact_type("tfx.Schema")}}},
            "latest": {"executorLabel": "latest_executor",
                       "outputDefinitions": {"artifacts": {"model": _artifact_type("tfx.Model")}}},
        },
        "deploymentSpec": {"executors": {
            "make_executor": {"container": container},
            "use_executor": {"container": {**container, "args": [*container["args"], "--fail"]}},
            "bring_executor": {"importer": {
                "artifactUri": {"constantValue": {"stringValue": f"{keys.IMAGE_PROJECT_DIR}/schema"}},
                "typeSchema": {"instanceSchema": "title: tfx.Schema\ntype: object\n"},
                "metadata": {"origin": "gs://bucket-a/schemas"}}},
            "latest_executor": {"resolver": {"outputArtifactQueries": {"model": {
                "filter": 'schema_title="tfx.Model" AND state=LIVE AND metadata.score.number_value=2'}}}},
        }},
    }


def _without_resolver(spec: dict) -> dict:
    """The pipeline as a Kubeflow file has it: the open-source backend runs no resolver."""
    spec = json.loads(json.dumps(spec))
    del spec["root"]["dag"]["tasks"]["latest"], spec["components"]["latest"]
    del spec["deploymentSpec"]["executors"]["latest_executor"]
    return spec


@pytest.fixture
def tiny(tmp_path) -> dict[str, Path]:
    """A tiny KFP PipelineSpec (YAML, no resolver) and a Vertex job (JSON, with a resolver) of the same
    pipeline, whose containers are ECHO."""
    import yaml

    project = tmp_path / "project"
    project.mkdir()
    echo = project / "echo.py"
    echo.write_text(ECHO)
    spec = _pipeline_spec(f"{keys.IMAGE_PROJECT_DIR}/echo.py")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(_without_resolver(spec)))
    job = {"pipelineSpec": spec, "runtimeConfig": {"gcsOutputDirectory": "gs://bucket-a/root",
                                                   "parameters": {"steps": {"intValue": "7"}}}}
    (tmp_path / "tiny.json").write_text(json.dumps(job))
    return {"project": project, "yaml": tmp_path / "tiny.yaml", "json": tmp_path / "tiny.json",
            "root": tmp_path / "root"}


def _seen(summary: dict, task: str) -> dict:
    return json.loads((Path(summary["artifacts"][f"{task}.data"]) / "seen.json").read_text())


def test_tiny_pipeline_gets_what_the_launcher_gives(tiny, monkeypatch):
    monkeypatch.setenv("SCORE", "2")
    summary = runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]),
                        parameters={"label": "chosen"})
    project, root, run_dir = str(tiny["project"]), str(tiny["root"]), Path(summary["run_dir"])
    assert [task["name"] for task in summary["tasks"]] == ["bring", "make", "use", "latest"]
    assert [task["status"] for task in summary["tasks"]] == ["imported", "ran", "ran", "resolved"]
    assert summary["parameters"] == {"steps": 7, "label": "chosen"}  # runtime config, then the override
    make = _seen(summary, "make")
    inputs = make["input"]["inputs"]
    assert inputs["parameters"] == {"where": {"stringValue": f"{project}/data/file.csv"},
                                    "steps": {"intValue": "7"}, "ratio": {"doubleValue": 0.5}}
    assert inputs["parameterValues"] == {"where": f"{project}/data/file.csv", "steps": 7, "ratio": 0.5}
    (output,) = make["input"]["outputs"]["artifacts"]["data"]["artifacts"]
    assert output == {"name": f"tfxd-replay/tiny/{summary['run_id']}/make/data",
                      "type": {"schemaTitle": "tfx.Examples"}, "uri": str(run_dir / "make" / "data"),
                      "metadata": {}}
    assert make["input"]["outputs"]["outputFile"] == str(run_dir / "make" / "executor_output.json")
    assert make["input"]["outputs"]["parameters"] == {"note": {"outputFile": str(run_dir / "make" / "parameters" /
                                                                                 "note")}}
    # the Beam flags in memory, the image's project and the bucket mapped, the placeholders filled
    # the image's project and the bucket mapped, the placeholders filled; Beam flags only change for TFX
    assert make["argv"] == ["--runner=DirectRunner", "--direct_num_workers=0", f"--data={project}/data",
                            f"--out={run_dir / 'make' / 'data'}", f"--param={project}/data/file.csv",
                            f"--dest={root}/bucket/bucket-a/serving/x"]
    assert make["env"] == {"PYTHONPATH": make["env"]["PYTHONPATH"], "TF_USE_LEGACY_KERAS": "1", "cwd": project,
                           "python": sys.executable}
    assert make["env"]["PYTHONPATH"].split(os.pathsep)[0] == project
    # a consumer gets the producer's artifact as the producer's output metadata described it
    use = _seen(summary, "use")["input"]["inputs"]
    (data,) = use["artifacts"]["data"]["artifacts"]
    assert data["uri"] == str(run_dir / "make" / "data")
    assert data["metadata"] == {"made_by": "make", "score": 2.0}
    assert use["parameters"]["note"] == {"stringValue": "made-note"}  # taskOutputParameter
    assert use["parameters"]["where"] == {"stringValue": "chosen"}
    (imported,) = use["artifacts"]["imported"]["artifacts"]
    assert imported["uri"] == f"{project}/schema" and imported["type"] == {"schemaTitle": "tfx.Schema"}
    assert imported["metadata"] == {"origin": f"{root}/bucket/bucket-a/schemas"}
    # the resolver finds this run's model (score 2), newest first
    assert _task(summary, "latest")["outputs"] == {"model": [str(run_dir / "use" / "data")]}
    assert (Path(summary["logs"]) / "make.log").is_file() and (Path(summary["logs"]) / "use.log").is_file()


def test_tiny_yaml_defaults_and_importer_history(tiny):
    one = runner.replay(str(tiny["yaml"]), project_dir=str(tiny["project"]), root=str(tiny["root"]))
    assert one["format"] == "kubeflow" and one["parameters"] == {"steps": 5, "label": "x"}
    two = runner.replay(str(tiny["yaml"]), project_dir=str(tiny["project"]), root=str(tiny["root"]),
                        parameters={"steps": "9"})
    assert two["parameters"]["steps"] == 9
    # the importer does not reimport an artifact it already has
    assert _task(two, "bring")["outputs"] == _task(one, "bring")["outputs"]
    index = json.loads((tiny["root"] / artifacts.INDEX_FILE).read_text())["artifacts"]
    assert [record["order"] for record in index] == list(range(1, len(index) + 1))
    assert len({record["name"] for record in index}) == len(index) == 5  # schema once, two runs x (make, use)


def test_tiny_json_resolver_history(tiny, monkeypatch):
    monkeypatch.setenv("SCORE", "2")
    one = runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]))
    monkeypatch.setenv("SCORE", "1")  # the second run's model does not match the resolver's filter
    two = runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]))
    assert _task(two, "latest")["outputs"] == {"model": [one["artifacts"]["use.data"]]}


def test_a_kubeflow_file_with_a_resolver_or_a_hook_is_replayed_as_the_open_source_backend_would(tiny, tmp_path):
    import yaml

    spec = _pipeline_spec(f"{keys.IMAGE_PROJECT_DIR}/echo.py")
    with_resolver = tmp_path / "with-resolver.yaml"
    with_resolver.write_text(yaml.safe_dump(spec))
    with pytest.raises(ir.ReplayError, match="task latest is a resolver, and the open-source Kubeflow Pipelines "
                                             "backend runs container and importer executors only"):
        runner.replay(str(with_resolver), project_dir=str(tiny["project"]), root=str(tmp_path / "root"))
    hooked = _without_resolver(spec)
    container = hooked["deploymentSpec"]["executors"]["make_executor"]["container"]
    container["lifecycle"] = {"preCacheCheck": {"command": ["false"], "args": []}}  # would fail if it ran
    path = tmp_path / "hooked.yaml"
    path.write_text(yaml.safe_dump(hooked))
    summary = runner.replay(str(path), project_dir=str(tiny["project"]), root=str(tmp_path / "root"))
    assert summary["status"] == "ok" and [task["status"] for task in summary["tasks"]] == ["imported", "ran", "ran"]
    assert summary["notes"] == ["make: its preCacheCheck hook was not run, as the open-source Kubeflow "
                                "Pipelines backend does not run it"]


def test_tiny_failing_task_names_task_exit_code_and_log(tiny, monkeypatch):
    monkeypatch.setenv("FAIL", "1")
    with pytest.raises(launcher.TaskFailed) as caught:
        runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]), run_id="r1")
    log = tiny["root"] / "r1" / "logs" / "use.log"
    assert caught.value.task == "use" and caught.value.exit_code == 3 and caught.value.log == str(log)
    assert str(caught.value) == f"use failed: exit code 3: ValueError: asked to fail\n    full log: {log}"
    assert [task["status"] for task in caught.value.summary["tasks"]] == ["imported", "ran", "failed", "not run"]


def test_refusals(tiny, tmp_path):
    import yaml

    spec = yaml.safe_load(tiny["yaml"].read_text())
    kwargs = {"project_dir": str(tiny["project"]), "root": str(tmp_path / "root")}
    with pytest.raises(ir.ReplayError, match=r"unknown pipeline parameter 'stpes' \(the pipeline's: label, steps\)"):
        runner.replay(str(tiny["yaml"]), parameters={"stpes": "1"}, **kwargs)
    with pytest.raises(ir.ReplayError, match="pipeline parameter steps: 'many' is not a valid int"):
        runner.replay(str(tiny["yaml"]), parameters={"steps": "many"}, **kwargs)
    job = json.loads(tiny["json"].read_text())  # resolvers run on Vertex
    job["pipelineSpec"]["deploymentSpec"]["executors"]["latest_executor"]["resolver"]["outputArtifactQueries"][
        "model"]["filter"] = 'schema_title="tfx.Model" AND create_time>"2024-01-01"'
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(job))
    with pytest.raises(ir.ReplayError, match="does not support the clause 'create_time>\"2024-01-01\"'"):
        runner.replay(str(bad), **kwargs)
    spec["root"]["dag"]["tasks"]["make"]["dependentTasks"] = ["use"]
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text(yaml.safe_dump(spec))
    with pytest.raises(ir.ReplayError, match="cycle"):
        runner.replay(str(cycle), **kwargs)
    not_compiled = tmp_path / "spec.yaml"
    not_compiled.write_text("tfxd: 1\nname: x\n")
    with pytest.raises(ir.ReplayError, match="is not a compiled pipeline"):
        runner.replay(str(not_compiled), **kwargs)


def test_resolver_filters_as_tfx_compiles_them(tmp_path):
    index = artifacts.ArtifactIndex(str(tmp_path))
    base = {"pipeline": "p", "run_id": "r", "task": "t", "key": "k"}
    model_1 = index.add({**base, "name": "m1", "schemaTitle": "tfx.Model", "uri": "/m1", "metadata": {}})
    index.add({**base, "name": "b1", "schemaTitle": "tfx.ModelBlessing", "uri": "/b1",
               "metadata": {"blessed": 1.0, "current_model_id": "m1"}})
    index.add({**base, "name": "m2", "schemaTitle": "tfx.Model", "uri": "/m2", "metadata": {}})
    index.add({**base, "name": "b2", "schemaTitle": "tfx.ModelBlessing", "uri": "/b2",
               "metadata": {"blessed": 0.0, "current_model_id": "m2"}})
    index.add({**base, "pipeline": "other", "name": "b3", "schemaTitle": "tfx.ModelBlessing", "uri": "/b3",
               "metadata": {"blessed": 1.0, "current_model_id": "m3"}})
    blessed = 'schema_title="tfx.ModelBlessing" AND state=LIVE AND metadata.blessed.number_value=1'
    assert [r["name"] for r in artifacts.ArtifactIndex(str(tmp_path)).query("p", blessed, lambda _: None)] == ["b1"]
    by_name = ('schema_title="tfx.Model" AND state=LIVE AND '
               "name=\"{{$.inputs.artifacts['input'].metadata['current_model_id']}}\"")
    seen = []

    def lookup(expression):
        seen.append(expression)
        return "m1"

    assert index.query("p", by_name, lookup) == [model_1]
    assert seen == [".inputs.artifacts['input'].metadata['current_model_id']"]
    assert index.query("p", by_name, lambda _: None) == []  # no blessing: no model
    assert [r["name"] for r in index.query("p", 'schema_title="tfx.Model" AND state=LIVE', lambda _: None)] == [
        "m2", "m1"]
    assert index.query("p", 'schema_title="tfx.Model" AND state=PENDING', lambda _: None) == []
    with pytest.raises(ir.ReplayError, match="'metadata.blessed.number_value>0'"):
        index.query("p", "metadata.blessed.number_value>0", lambda _: None)


def test_task_order_follows_dependencies_and_inputs():
    tasks = {"c": {"inputs": {"artifacts": {"x": {"taskOutputArtifact": {"producerTask": "b"}}}}},
             "b": {"inputs": {"parameters": {"y": {"taskOutputParameter": {"producerTask": "a"}}}}},
             "a": {"dependentTasks": ["d"]}, "d": {}}
    assert ir.task_order(tasks) == ["d", "a", "b", "c"]
    with pytest.raises(ir.ReplayError, match="task a depends on zz"):
        ir.task_order({"a": {"dependentTasks": ["zz"]}})

