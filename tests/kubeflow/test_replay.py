"""`tfxd replay` (kubeflow.replay): a compiled file executed here task by task.

- The compiled taxi example, its data, pipeline roots and push destination on a Cloud Storage API server
  (tests/buckets/: every task reaches the bucket by its own client code, in a network namespace where
  Google's names lead there, and nothing maps a bucket to a folder):
  - the Vertex JSON, as Vertex runs it (TFX's driver hook, a task finding the baseline in the push
    destination), replays to a trained, evaluated, blessed model pushed to the bucket that answers raw
    tf.Examples; the Evaluator's accuracy meets the bar `tfxd run` meets;
  - the Kubeflow YAML replays as the open-source backend runs it (no driver hook, no resolver: a task finds
    the baseline), with train_args overridden (the Trainer ran 100 steps), and takes the model the Vertex
    replay pushed to the same destination as its baseline, which the Evaluator compares it with.
- Digits, compiled for Kubeflow, replays to a model pushed to its bucket too (penguin with a two-worker
  TrainJob: test_operator_replay.py).
- A failing task stops the replay, naming the task, its exit code and its log; SIGTERM stops it and removes
  the stopped task's outputs from the bucket.
- Without TensorFlow: ordering, the launcher's placeholders and executor input, parameters, bucket and
  project mapping (the default without an emulator), importers and resolver filters, on tiny hand-written
  PipelineSpecs.

Two full taxi replays (module-scoped, ~1.5 minutes each on 2 cores) and one that fails at ExampleGen.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests.buckets.server import bucket_server
from tests.conftest import REPO
from tests.kubeflow.on_bucket import TFXD, compiled_on_bucket, objects, replay_on_bucket
from tests.pipeline.run.test_run_taxi import TAXI_ACCURACY_FLOOR, served_on_raw_examples
from tfxd import keys
from tfxd.kubeflow.cluster_target import pipeline_tasks
from tfxd.kubeflow.replay import artifacts, ir, launcher, runner

BASELINE_TASK = "latest_blessed_model_resolver"  # on both targets a container task (components/baseline)
CONTAINERS = ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "Trainer", "Evaluator",
              "Pusher")
BUCKET = "tfxd-replays"


# ------------------------------------------------------------------------------------------ taxi, replayed


@pytest.fixture(scope="module")
def taxi(tmp_path_factory):
    """The bucket server holding taxi's data, and the example compiled for both targets onto it."""
    files = compiled_on_bucket(tmp_path_factory, "taxi", BUCKET, targets=("vertex", "kubeflow"))
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(BUCKET)
        server.upload_folder(REPO / "examples" / "data" / "taxi", BUCKET, "data/taxi")
        files["server"] = server
        yield files


@pytest.fixture(scope="module")
def first(taxi) -> tuple[dict, str]:
    """The Vertex PipelineJob replayed as compiled; its summary and output."""
    result, summary = replay_on_bucket(taxi["server"], taxi["vertex"], taxi)
    return summary, result.stdout


@pytest.fixture(scope="module")
def second(taxi, first) -> tuple[dict, str]:
    """The KFP YAML replayed under the same root, 100 training steps, pushing where the first pushed; its
    summary and output (stdout and stderr)."""
    result, summary = replay_on_bucket(taxi["server"], taxi["kubeflow"], taxi, "--param", 'train_args={"numSteps": 100}')
    for task in CONTAINERS:
        assert f"ok {task} ran (" in result.stdout
    assert f"replay {summary['run_id']} of taxi-tips" in result.stdout
    return summary, result.stdout + result.stderr


def _task(summary: dict, name: str) -> dict:
    return next(task for task in summary["tasks"] if task["name"] == name)


def _value(example, name: str) -> float:
    values = example.features.feature[name].float_list.value if name in example.features.feature else []
    return values[0] if values else np.nan


def test_vertex_job_replays_every_task(taxi, first):
    summary, output = first
    root = taxi["root"]
    assert summary["status"] == "ok" and summary["format"] == "vertex" and summary["pipeline"] == "taxi-tips"
    statuses = {task["name"]: task["status"] for task in summary["tasks"]}
    assert statuses == dict.fromkeys((*CONTAINERS, BASELINE_TASK, keys.HISTORY_TASK), "ran")
    order = [task["name"] for task in summary["tasks"]]
    assert order.index("Trainer") < order.index(BASELINE_TASK) < order.index("Evaluator") < order.index("Pusher")
    assert summary["parameters"] == {"train_args": '{"numSteps": 1000}', "eval_args": '{"numSteps": 150}'}
    run_dir = root / summary["run_id"]
    for name in CONTAINERS:
        log = run_dir / "logs" / f"{name}.log"
        assert _task(summary, name)["log"] == str(log) and log.stat().st_size > 0
        assert (run_dir / name / "executor_output.json").is_file()
        assert _task(summary, name)["seconds"] > 0
    started = [line.split()[1] for line in output.splitlines() if line.startswith("> ")]
    assert started == order  # each task started after the one before it ended
    # the data is read where the compiled file says, on the bucket; the Beam flags are the in-memory ones
    executor_input = json.loads((run_dir / "ExampleGen" / "executor_input.json").read_text())
    assert executor_input["inputs"]["parameters"]["input_base"] == {"stringValue": f"gs://{BUCKET}/data/taxi"}
    assert executor_input["inputs"]["parameters"]["span"] == {"intValue": "0"}  # from the driver
    assert "input_fingerprint" in executor_input["inputs"]["parameterValues"]
    assert "--direct_running_mode=in_memory" in (run_dir / "logs" / "Trainer.log").read_text().splitlines()[1]
    examples = json.loads((run_dir / "ExampleGen" / "executor_output.json").read_text())
    metadata = examples["artifacts"]["examples"]["artifacts"][0]["metadata"]
    assert json.loads(metadata["split_names"]) == ["train", "eval"]
    assert sum(json.loads(metadata["tfxd_split_counts"]).values()) == 15002
    # every output artifact is indexed under the root, with a unique name, and is on the bucket under the
    # pipeline root, as on Vertex
    index = json.loads((root / artifacts.INDEX_FILE).read_text())["artifacts"]
    mine = [record for record in index if record["run_id"] == summary["run_id"]]
    assert len({record["name"] for record in mine}) == len(mine) == len(summary["artifacts"])
    assert {record["uri"] for record in mine} == set(summary["artifacts"].values())
    prefix = f"{summary['pipeline_root_on_cluster']}/taxi-tips/{summary['run_id']}/"
    assert prefix.startswith(f"gs://{BUCKET}/pipelines/") and all(uri.startswith(prefix) for uri in summary["artifacts"].values()), summary["artifacts"]
    model = objects(taxi["server"], summary["artifacts"]["Trainer.model"])
    assert any(name.endswith("/Format-Serving/saved_model.pb") for name in model), model


def test_replay_blesses_and_pushes_to_the_bucket(taxi, first):
    summary, _ = first
    assert summary["blessed"] is True and summary["baseline"] is None  # the first model has no baseline
    assert summary["model"] == summary["artifacts"]["Trainer.model"]
    assert summary["pushed"] is True and summary["buckets"] == {}  # nothing mapped to a folder
    pushed = summary["pushed_destination"]
    assert pushed.startswith(f"gs://{BUCKET}/serving/") and summary["pushed_destination_on_cluster"] == pushed
    assert any(name.endswith("/saved_model.pb") for name in objects(taxi["server"], pushed))
    assert summary["pipeline_root_on_cluster"] == f"gs://{BUCKET}/pipelines/taxi-tips/pipeline"
    assert not (taxi["root"] / "bucket").exists()
    assert not list(Path(taxi["project"]).glob("gs:*")) and not list(Path.cwd().glob("gs:*"))


def test_pushed_model_answers_raw_examples(taxi, first, tmp_path):
    summary, _ = first
    server = taxi["server"]
    model = server.download(summary["pushed_destination"], tmp_path / "model")
    examples = server.download(summary["artifacts"]["ExampleGen.examples"], tmp_path / "examples")
    served, expected = served_on_raw_examples(str(model), str(examples))
    accuracy = float(((served > 0.5) == expected).mean())
    assert accuracy >= 0.75, accuracy


def test_evaluator_accuracy_matches_the_local_run(taxi, first, tmp_path):
    import tensorflow_model_analysis as tfma

    summary, _ = first
    evaluation = taxi["server"].download(summary["evaluation"], tmp_path / "evaluation")
    overall = [m for m in tfma.load_metrics(str(evaluation)) if not m.slice_key.single_slice_keys]
    assert len(overall) == 1
    values = {kv.key.name: kv.value.double_value.value for kv in overall[0].metric_keys_and_values}
    assert values["example_count"] == 2988
    # the bar `tfxd run` of the same example meets (unseeded, the model varies by a few points run to run)
    assert TAXI_ACCURACY_FLOOR <= values["binary_accuracy"] <= 1.0, values


def test_kubeflow_yaml_replays_as_the_open_source_backend_runs_it(taxi, second):
    summary, _ = second
    assert summary["format"] == "kubeflow" and summary["status"] == "ok"
    assert summary["parameters"]["train_args"] == '{"numSteps": 100}'
    assert summary["parameters"]["eval_args"] == '{"numSteps": 150}'  # the file's default
    assert {task["name"]: task["status"] for task in summary["tasks"]} == {
        **dict.fromkeys(CONTAINERS, "ran"), BASELINE_TASK: "ran", keys.HISTORY_TASK: "ran"}
    report = json.loads(taxi["server"].read(BUCKET, summary["artifacts"]["Trainer.model"].removeprefix(
        f"gs://{BUCKET}/") + "/tfxd_training.json"))
    assert report["steps_per_epoch"] * report["epochs"] == 100
    assert len(report["history"]) == report["epochs"]
    assert summary["pipeline_root_on_cluster"].startswith(f"gs://{BUCKET}/tfxd/")
    assert all(uri.startswith(f"{summary['pipeline_root_on_cluster']}/taxi-tips/{summary['run_id']}/")
               for uri in summary["artifacts"].values())
    # no driver ran: ExampleGen's executor resolved the span and the input's fingerprint itself
    run_dir = Path(summary["run_dir"])
    assert not (run_dir / "ExampleGen" / "pre_cache_check_output.json").exists()
    examples = json.loads((run_dir / "ExampleGen" / "executor_output.json").read_text())
    metadata = examples["artifacts"]["examples"]["artifacts"][0]["metadata"]
    assert metadata["span"] == 0 and metadata["input_fingerprint"].startswith("split:single_split,num_files:1,")


def test_the_kubeflow_replay_takes_the_vertex_replays_pushed_model_as_baseline(taxi, first, second):
    (vertex, _), (kubeflow, output) = first, second
    server = taxi["server"]
    assert kubeflow["run_id"] != vertex["run_id"]
    baseline = kubeflow["artifacts"][f"{BASELINE_TASK}.model"]
    output_file = Path(kubeflow["run_dir"]) / BASELINE_TASK / "executor_output.json"
    source = json.loads(output_file.read_text())["artifacts"]["model"]["artifacts"][0]["metadata"]["tfxd_baseline_source"]
    assert source == vertex["pushed_destination"]  # the newest model pushed, not this run's candidate
    copied, pushed = (uri.removeprefix(f"gs://{BUCKET}/") for uri in (baseline, vertex["pushed_destination"]))
    assert server.read(BUCKET, f"{copied}/Format-Serving/saved_model.pb") == server.read(BUCKET, f"{pushed}/saved_model.pb")
    assert kubeflow["baseline"] == baseline and kubeflow["model"] == kubeflow["artifacts"]["Trainer.model"]
    evaluator_input = json.loads(
        (Path(kubeflow["run_dir"]) / "Evaluator" / "executor_input.json").read_text())["inputs"]["artifacts"]
    assert [a["uri"] for a in evaluator_input["baseline_model"]["artifacts"]] == [baseline]
    # the Evaluator compared the two models (the max_drop threshold's differences); a model blessed is pushed
    import tensorflow_model_analysis as tfma

    evaluation = server.download(kubeflow["evaluation"], Path(kubeflow["run_dir"]) / "evaluation-copy")
    diffs = {kv.key.name for record in tfma.load_metrics(str(evaluation))
             for kv in record.metric_keys_and_values if kv.key.is_diff}
    assert "binary_accuracy" in diffs
    assert kubeflow["pushed"] is kubeflow["blessed"]
    verdict = "ok blessed; pushed to " if kubeflow["blessed"] else "not blessed, so not pushed"
    assert verdict in output, output[-2000:]


@pytest.mark.xdist_group("tests/kubeflow/test_replay.py: the other examples")  # shares no module fixture
@pytest.mark.parametrize(("example", "pipeline"), [("digits", "digits-cnn")])  # penguin: test_operator_replay.py
def test_the_other_examples_replay_to_a_pushed_model(tmp_path_factory, example, pipeline):
    """Each example as shipped, compiled for Vertex with its data and roots on a bucket and its Trainer a
    custom job of 2 workers, replays end to end: every task ran, the Trainer's custom job went to the
    replay's JobService stand-in through aiplatform's own client (kubeflow/replay/vertex_jobs.py) and ran its
    two pools' replicas, the model is blessed and pushed to the bucket."""
    files = compiled_on_bucket(tmp_path_factory, example, "tfxd-examples", "targets.vertex.trainer.workers=2",
                               targets=("vertex",))
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket("tfxd-examples")
        server.upload_folder(REPO / "examples" / "data" / example, "tfxd-examples", f"data/{example}")
        _, summary = replay_on_bucket(server, files["vertex"], files)
        replicas = sorted(path.name.split("-", 1)[1] for path in (Path(summary["run_dir"]) / "logs" / "vertex-jobs").glob("*.log"))
        assert replicas == ["workerpool0-0.log", "workerpool1-0.log"], replicas
        [note] = [n for n in summary["notes"] if n.startswith("Trainer: its Vertex custom job ran on a local stand-in")]
        assert str(Path(summary["run_dir"]) / "logs" / "vertex-jobs") in note, note
        assert summary["pipeline"] == pipeline and summary["status"] == "ok"
        assert {task["name"]: task["status"] for task in summary["tasks"]} == {
            **dict.fromkeys(CONTAINERS, "ran"), BASELINE_TASK: "ran", keys.HISTORY_TASK: "ran"}
        assert summary["blessed"] is True and summary["pushed"] is True and summary["buckets"] == {}
        pushed = summary["pushed_destination"]
        assert pushed.startswith("gs://tfxd-examples/serving/") and summary["pushed_destination_on_cluster"] == pushed
        assert f"{pushed.removeprefix('gs://tfxd-examples/')}/saved_model.pb" in objects(server, pushed)


def _task_objects(server, run_root: str, task: str) -> list[str]:
    """The objects of ``task``'s outputs under the run's folder on the bucket, in the folder its service
    names (`<task>/<uuid>/` on Kubeflow Pipelines, `<task>_<task id>/` on Vertex: cluster_target.task_folder)."""
    return [name for name in objects(server, run_root) if re.search(rf"/{task}(/|_-?[0-9]+/)", name)]


def test_failing_task_stops_the_replay(taxi, tmp_path):
    job = json.loads(taxi["vertex"].read_text())
    parameters = pipeline_tasks(job["pipelineSpec"])["ExampleGen"]["inputs"]["parameters"]
    parameters["input_base"]["runtimeValue"]["constantValue"]["stringValue"] = f"gs://{BUCKET}/data/missing"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(job))
    root = tmp_path / "root"
    result = taxi["server"].run(TFXD, "replay", str(broken), "--project", str(taxi["project"]), "--root", str(root))
    assert result.returncode == 1, result.stdout + result.stderr
    [summary_file] = root.glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    log = summary_file.parent / "logs" / "ExampleGen.log"
    text = " ".join(result.stderr.split())
    assert "ExampleGen failed: exit code " in text and str(log) in text and log.is_file()
    # the root cause from the log, naming the bucket path the task read
    assert f"InputError: no data file matches gs://{BUCKET}/data/missing" in text
    assert f"gs://{BUCKET}/data/missing" in log.read_text()
    # the failed task ends the pipeline's tasks; the exit task runs after it, as after any end (the page)
    assert [line.split()[1] for line in result.stdout.splitlines() if line.startswith("> ")] == [
        "ExampleGen", keys.HISTORY_TASK]
    statuses = {task["name"]: task["status"] for task in summary["tasks"]}
    assert statuses.pop("ExampleGen") == "failed" and statuses.pop(keys.HISTORY_TASK) == "ran"
    assert set(statuses.values()) == {"not run"}
    bucket, name = posixpath.join(posixpath.dirname(summary["pipeline_root_on_cluster"]), keys.HISTORY_PAGE)[5:].split("/", 1)
    page = taxi["server"].read(bucket, name).decode()  # beside the pipeline root, as for every run
    assert "st-failed" in page and "no data file matches" in page
    assert summary["status"] == "failed" and "Traceback" not in result.stderr
    # a failed task publishes nothing: no artifact of the run indexed, no file under its outputs on the bucket
    # (a folder TensorFlow's makedirs marked with an empty "name/" object may stay, as on the cluster)
    index = json.loads((root / artifacts.INDEX_FILE).read_text())["artifacts"] if (root / artifacts.INDEX_FILE).exists() else []
    assert not [record for record in index if record["run_id"] == summary["run_id"]
                and record["task"] != keys.HISTORY_TASK]  # the exit task ran after it and left the page
    run_root = f"{summary['pipeline_root_on_cluster']}/taxi-tips/{summary['run_id']}"
    outputs = _task_objects(taxi["server"], run_root, "ExampleGen")
    assert not [name for name in outputs if not name.endswith("/")], outputs
    # what the task recorded for `tfxd history` (components/cluster_task.py), beside the run's outputs
    record = _record(taxi["server"], run_root, "ExampleGen")
    assert (record["status"], record["artifacts"]) == ("failed", {})
    assert f"InputError: no data file matches gs://{BUCKET}/data/missing" in record["error"]


def test_sigterm_stops_the_replay_with_exit_143_and_removes_the_stopped_tasks_outputs(taxi, tmp_path):
    from tests.pipeline.run.test_crash_resume import _processes_of

    root, server = tmp_path / "root", taxi["server"]
    # `ip netns exec` runs tfxd in its own process (it execs), which the signal goes to
    process = subprocess.Popen(server.command(TFXD, "replay", str(taxi["vertex"]), "--project", str(taxi["project"]),
                                              "--root", str(root)), env=server.env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
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
    # on the bucket: ExampleGen's outputs stay, the stopped task's are gone, its temporary files too
    run_root = f"{summary['pipeline_root_on_cluster']}/taxi-tips/{summary['run_id']}"
    assert _task_objects(server, run_root, "ExampleGen")
    assert not _task_objects(server, run_root, "StatisticsGen")
    assert not [name for name in objects(server, run_root) if ".tmp" in name or "tmp-" in name]
    assert not list(root.glob("**/*.tmp"))
    # the stopped task said so in its record before it ended; the one before it recorded its outputs
    stopped = _record(server, run_root, "StatisticsGen")
    assert (stopped["status"], stopped["error"]) == ("interrupted", "stopped by SIGTERM")
    assert _record(server, run_root, "ExampleGen")["artifacts"]["examples"][0]["uri"].startswith(run_root)


def _record(server, run_root: str, task: str) -> dict:
    """The record ``task`` left in the run's folder on the bucket (keys.TASK_RECORDS)."""
    bucket, prefix, _ = server.under(f"{run_root}/tfxd-records")
    return json.loads(server.read(bucket, f"{prefix}{task}.json"))


def _wait_for_a_forked_task(replay: int, timeout: float = 120) -> None:
    """Until a task the replay's preloader forked (forked_tasks.py: a process under the replay whose parent is
    not the replay itself) is at work: it catches SIGTERM (/proc's SigCgt), which it does from the moment
    cluster_task's main enters stops.handling. Before that a SIGTERM ends it as it would end a container
    still starting on a cluster, with no record (components/cluster_task.py)."""
    deadline = time.monotonic() + timeout
    while True:
        for child in psutil.Process(replay).children(recursive=True):
            with contextlib.suppress(psutil.Error, OSError):  # ended meanwhile
                if child.ppid() != replay and _catches(child.pid, signal.SIGTERM):
                    return
        assert time.monotonic() < deadline, "no forked task began its work"
        time.sleep(0.05)


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (proc(5): SigCgt, a hexadecimal mask)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        [mask] = [line.split()[1] for line in status if line.startswith("SigCgt:")]
    return bool(int(mask, 16) & (1 << (signum - 1)))


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
        print(os.environ.get("LOGGED", ""), file=sys.stderr)
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
    folder = Path(output["uri"]).parent  # Vertex's `<task>_<task id>` (cluster_target.task_folder)
    assert folder.parent == run_dir and re.fullmatch(r"make_[0-9]{19}", folder.name), output["uri"]
    assert output == {"name": f"tfxd-replay/tiny/{summary['run_id']}/make/data",
                      "type": {"schemaTitle": "tfx.Examples"}, "uri": str(folder / "data"), "metadata": {}}
    assert make["input"]["outputs"]["outputFile"] == str(run_dir / "make" / "executor_output.json")
    assert make["input"]["outputs"]["parameters"] == {"note": {"outputFile": str(run_dir / "make" / "parameters" /
                                                                                 "note")}}
    # the Beam flags in memory, the image's project and the bucket mapped, the placeholders filled
    # the image's project and the bucket mapped, the placeholders filled; Beam flags only change for TFX
    assert make["argv"] == ["--runner=DirectRunner", "--direct_num_workers=0", f"--data={project}/data",
                            f"--out={folder / 'data'}", f"--param={project}/data/file.csv",
                            f"--dest={root}/bucket/bucket-a/serving/x"]
    assert make["env"] == {"PYTHONPATH": make["env"]["PYTHONPATH"], "TF_USE_LEGACY_KERAS": "1", "cwd": project,
                           "python": sys.executable}
    assert make["env"]["PYTHONPATH"].split(os.pathsep)[0] == project
    # a consumer gets the producer's artifact as the producer's output metadata described it
    use = _seen(summary, "use")["input"]["inputs"]
    (data,) = use["artifacts"]["data"]["artifacts"]
    assert data["uri"] == str(folder / "data")
    assert data["metadata"] == {"made_by": folder.name, "score": 2.0}
    assert use["parameters"]["note"] == {"stringValue": "made-note"}  # taskOutputParameter
    assert use["parameters"]["where"] == {"stringValue": "chosen"}
    (imported,) = use["artifacts"]["imported"]["artifacts"]
    assert imported["uri"] == f"{project}/schema" and imported["type"] == {"schemaTitle": "tfx.Schema"}
    assert imported["metadata"] == {"origin": f"{root}/bucket/bucket-a/schemas"}
    # the resolver finds this run's model (score 2), newest first
    [found] = _task(summary, "latest")["outputs"]["model"]
    assert found == _task(summary, "use")["outputs"]["data"][0] and found.startswith(f"{run_dir}/use_")
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


def test_a_task_stopped_by_a_validation_gate_gives_the_run_that_status_and_the_gates_verdict(tiny, monkeypatch):
    """The line ExampleValidator logs when a gate stops the run (keys.GATE_VERDICT), in a failed task's log:
    the summary says the run was stopped, by which gate, why, and each column's distance and threshold."""
    verdict = {"gate": "drift", "message": "the data drifted between span 1 and span 2: fare: Jensen-Shannon "
               "distance 0.9000 > threshold 0.2", "span": "2", "previous_span": "1", "beyond": {"fare": {}},
               "columns": {"fare": {"distance": 0.9, "threshold": 0.2, "measure": "Jensen-Shannon"}}}
    monkeypatch.setenv("FAIL", "1")
    monkeypatch.setenv("LOGGED", f"E1203 04:00:00.1 42 executor.py:200] {keys.GATE_VERDICT}{json.dumps(verdict)}")
    with pytest.raises(launcher.TaskFailed) as caught:
        runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]), run_id="r1")
    summary = caught.value.summary
    assert (summary["status"], summary["stopped_by"], summary["reason"]) == ("stopped", "drift", verdict["message"])
    assert summary["drift"] == {key: verdict[key] for key in ("span", "previous_span", "beyond", "columns")}
    monkeypatch.setenv("LOGGED", f"{keys.GATE_VERDICT}{{not json")  # a line cut short: a failure like another
    with pytest.raises(launcher.TaskFailed) as caught:
        runner.replay(str(tiny["json"]), project_dir=str(tiny["project"]), root=str(tiny["root"]), run_id="r2")
    assert caught.value.summary["status"] == "failed" and "stopped_by" not in caught.value.summary


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


def test_the_exit_handlers_sub_dag_is_refused_where_the_engine_could_not_run_it(make_compiled, tmp_path):
    """TFX's compiler nests the tasks in `tfx-dag` for the exit handler and declares the runtime parameters on
    the root alone: a nested task could not read them (tfxd's compile hands them on). Such a file, and a
    sub-DAG that is not an exit handler's, are refused before any task runs."""
    job = json.loads(make_compiled("vertex").read_text())
    spec = job["pipelineSpec"]
    assert spec["components"]["tfx-dag"]["inputDefinitions"]["parameters"]["train_args"] == {"type": "STRING"}
    del spec["root"]["dag"]["tasks"]["tfx-dag"]["inputs"]
    kwargs = {"project_dir": str(tmp_path), "root": str(tmp_path / "root")}
    (tmp_path / "raw.json").write_text(json.dumps(job))
    with pytest.raises(ir.ReplayError, match="task Trainer: parameter eval_args takes its sub-DAG's input "
                                             "'eval_args', which the sub-DAG does not declare or its task"):
        runner.replay(str(tmp_path / "raw.json"), **kwargs)
    del spec["root"]["dag"]["tasks"][keys.HISTORY_TASK]["triggerPolicy"]  # a task after a group, not an exit
    (tmp_path / "group.json").write_text(json.dumps(job))
    with pytest.raises(ir.ReplayError, match=f"task {keys.HISTORY_TASK}: sub-DAGs other than an exit handler's"):
        runner.replay(str(tmp_path / "group.json"), **kwargs)
    assert not list((tmp_path / "root").glob("*/logs/*.log"))  # nothing ran


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

