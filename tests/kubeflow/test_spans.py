"""Spans on the cluster targets: the compiled files carry the span as the `span` parameter and hand
ExampleGen the scheduled time as the placeholder Vertex and KFP substitute; a schedule sends it; a
replay with `--param span=DAY` reads that day, and the same day again trains nothing."""

from __future__ import annotations

import datetime
import functools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kfp import dsl

from tests.buckets.server import bucket_server
from tests.kubeflow.conftest import SPEC_TEXT
from tests.kubeflow.kfp_rules import backend_problems
from tests.kubeflow.on_bucket import TFXD
from tests.pipeline.run.test_retraining import add_day
from tfxd import keys
from tfxd.kubeflow import schedules
from tfxd.kubeflow.cluster_target import pipeline_tasks
from tfxd.kubeflow.compile import compile_to
from tfxd.kubeflow.replay.conditions import Condition, ConditionError, runtime_value
from tfxd.kubeflow.vertex import submit_vertex
from tfxd.pipeline.spec.load import load_spec

DEMO_BUCKET = "demo-bucket"
SCHEDULED = (SPEC_TEXT.replace("path: data.csv", "path: data/{YYYY}-{MM}-{DD}/*.csv\n  spans: {span: scheduled, "
                               "offset_days: -1}")
             .replace("  steps: 10\n", "  steps: 10\n  warm_start: true\n  seed: 42\n")
             + "validation:\n  drift: {threshold: 0.9}\n  skew: {threshold: 0.9, action: warn}\n")


@pytest.fixture
def compiled_spans(tmp_path):
    (tmp_path / "demo.yaml").write_text(SCHEDULED)
    files = {}
    for target, ext in (("kubeflow", "yaml"), ("vertex", "json")):
        loaded = load_spec(str(tmp_path / "demo.yaml"), ["targets.kubeflow.root=gs://demo-bucket/kfp"],
                           target=target, check_files=False)
        files[target] = compile_to(loaded, target, str(tmp_path / f"compiled.{ext}"))
    return tmp_path, files


def _example_gen(pipeline_spec: dict) -> dict:
    return pipeline_tasks(pipeline_spec)["ExampleGen"]


def test_both_files_carry_the_span_parameter_and_the_scheduled_time(compiled_spans):
    _, files = compiled_spans
    kubeflow = yaml.safe_load(Path(files["kubeflow"]).read_text())
    vertex = json.loads(Path(files["vertex"]).read_text())
    for pipeline_spec in (kubeflow, vertex["pipelineSpec"]):
        task = _example_gen(pipeline_spec)
        assert task["inputs"]["parameters"]["tfxd_span"] == {"componentInputParameter": "span"}
        assert task["inputs"]["parameters"]["tfxd_schedule_time"] == {
            "runtimeValue": {"constant": dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER}}
        assert task["inputs"]["parameters"]["tfxd_create_time"] == {
            "runtimeValue": {"constant": dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER}}
        assert task["cachingOptions"] == {"enableCache": False}  # its input is the data, not the parameters
        span = pipeline_spec["root"]["inputDefinitions"]["parameters"]["span"]
        assert span.get("parameterType", span.get("type")) == "STRING"  # schema 2.1.0 / 2.0.0
    assert kubeflow["root"]["inputDefinitions"]["parameters"]["span"]["defaultValue"] == ""
    assert backend_problems(kubeflow) == []
    reader = json.loads(_example_gen(kubeflow)["inputs"]["parameters"]["reader_config"]["runtimeValue"]["constant"])
    assert reader["spans"]["path"] == "/tfxd/project/data/{YYYY}-{MM}-{DD}/*.csv"  # inside the image
    assert reader["spans"]["choice"] == {"scheduled": -1, "unscheduled": "fail"}  # the default: never guessed
    assert reader["spans"]["pushed_to"] == "gs://demo-bucket/kfp/demo/serving"
    validator = pipeline_tasks(kubeflow)["ExampleValidator"]["inputs"]  # the drift gate reads the spans
    assert validator["artifacts"]["examples"]["taskOutputArtifact"] == {"outputArtifactKey": "examples",
                                                                        "producerTask": "ExampleGen"}
    trainer = pipeline_tasks(kubeflow)["Trainer"]  # warm start: the newest pushed model, found by a task
    assert trainer["inputs"]["artifacts"]["base_model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "model", "producerTask": "warm_start_model_resolver"}
    finder = pipeline_tasks(kubeflow)["warm_start_model_resolver"]
    # no candidate (it runs before the Trainer), only ExampleGen's examples, which its condition reads
    assert list(finder["inputs"]["artifacts"]) == ["_ExampleGen.examples"]
    assert finder["cachingOptions"] == {"enableCache": False}  # it reads the bucket, which no cache key holds
    assert finder["inputs"]["parameters"]["push_destination"]["runtimeValue"]["constant"] == (
        "gs://demo-bucket/kfp/demo/serving")
    # Vertex asks the same question in the same place: the pipeline's own push destination, not a resolver
    # query over the project's metadata store (which every pipeline of the same name shares)
    vertex_dag = pipeline_tasks(vertex["pipelineSpec"])
    assert not [name for name, executor in vertex["pipelineSpec"]["deploymentSpec"]["executors"].items()
                if "resolver" in executor]
    for name in ("warm_start_model_resolver", "latest_blessed_model_resolver"):
        assert vertex_dag[name]["inputs"]["parameters"]["push_destination"]["runtimeValue"] == {
            "constantValue": {"stringValue": "gs://demo-bucket/pipelines/demo/serving"}}  # schema 2.0.0
        assert vertex_dag[name]["cachingOptions"] == {"enableCache": False}
    assert vertex_dag["Trainer"]["inputs"]["artifacts"]["base_model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "model", "producerTask": "warm_start_model_resolver"}
    drift = json.loads(validator["parameters"]["drift"]["runtimeValue"]["constant"])
    assert drift == {"action": "fail", "features": {}, "threshold": 0.9,
                     "store": "gs://demo-bucket/kfp/demo/pipeline/tfxd_span_statistics"}


def test_kfp_and_aiplatform_take_the_span_as_a_run_parameter(compiled_spans, tmp_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from kfp import compiler, components

    _, files = compiled_spans
    component = components.load_component_from_file(files["kubeflow"])
    assert component.component_spec.inputs["span"].default == ""

    def wrapped(span="2026-11-21"):
        component(span=span, train_args=defaults["train_args"], eval_args=defaults["eval_args"])

    defaults = {name: spec.default for name, spec in component.component_spec.inputs.items()}
    wrapped.__annotations__ = {"span": str}  # kfp reads real types, not this module's postponed ones
    again = tmp_path / "wrapped.yaml"
    compiler.Compiler().compile(dsl.pipeline(name="demo-wrapped")(wrapped), str(again))
    assert backend_problems(yaml.safe_load(again.read_text())) == []
    job = aiplatform.PipelineJob(display_name="demo", template_path=files["vertex"], project="demo-project",
                                 location="europe-west4", credentials=AnonymousCredentials(),
                                 parameter_values={"span": "2026-11-21"})
    assert job._gca_resource.runtime_config.parameters["span"].string_value == "2026-11-21"


def test_a_vertex_schedule_sends_the_scheduled_time_placeholder(compiled_spans, fake_vertex, credentials):
    folder, files = compiled_spans
    spec = load_spec(str(folder / "demo.yaml"), check_files=False).spec
    schedules.apply(spec, "vertex", files["vertex"], credentials=credentials, endpoint=fake_vertex.url)
    [create] = fake_vertex.writes()
    task = _example_gen(create.body["createPipelineJobRequest"]["pipelineJob"]["pipelineSpec"])
    assert task["inputs"]["parameters"]["tfxd_schedule_time"]["runtimeValue"]["constant"] == (
        "{{$.pipeline_job_schedule_time_utc}}")


NEW_DATA = "(inputs.artifacts['{key}'].artifacts[0].metadata['tfxd_new_data'] == 1.0)"


def _runtime_examples(new: int, spans: str = '["2026-11-21"]') -> list[dict]:
    """ExampleGen's examples as the driver hands them to a condition: the MLMD custom properties tfxd's
    executor wrote (int and string), through the driver's converter (every number a double)."""
    written = {"tfxd_new_data": new, "tfxd_spans": spans, "span": 20413}
    return [{"uri": "gs://demo-bucket/kfp/run/ExampleGen/examples",
             "metadata": {key: runtime_value(value) for key, value in written.items()}}]


def test_every_task_after_example_gen_carries_the_no_new_data_condition_both_engines_evaluate(compiled_spans):
    """The condition TFX's compiler writes for tfx.dsl.Cond, read as the KFP backend's driver reads it:
    resolved inputs first, then CEL over the ExecutorInput, where ExampleGen's int custom property is a
    double (kubeflow/pipelines backend/src/v2/driver/container.go Container, backend/src/v2/expression/
    expression.go Condition, backend/src/v2/metadata/converter.go toRuntimeArtifact)."""
    _, files = compiled_spans
    kubeflow = yaml.safe_load(Path(files["kubeflow"]).read_text())
    vertex = json.loads(Path(files["vertex"]).read_text())["pipelineSpec"]
    for pipeline_spec in (kubeflow, vertex):
        tasks = pipeline_tasks(pipeline_spec)
        assert "triggerPolicy" not in tasks["ExampleGen"]
        conditioned = {name for name, task in tasks.items() if task.get("triggerPolicy", {}).get("condition")}
        executors = pipeline_spec["deploymentSpec"]["executors"]
        containers = {name for name, task in tasks.items() if name != "ExampleGen" and "container" in executors[
            pipeline_spec["components"][task["componentRef"]["name"]]["executorLabel"]]}
        assert conditioned == containers  # every container task after ExampleGen (Vertex's resolvers: no hook)
        for name in conditioned:
            condition = tasks[name]["triggerPolicy"]["condition"]
            key = re.search(r"inputs\.artifacts\['([^']+)'\]", condition).group(1)
            assert condition == NEW_DATA.format(key=key)
            # the driver resolves the input before evaluating it: the task takes ExampleGen's examples there
            assert tasks[name]["inputs"]["artifacts"][key]["taskOutputArtifact"] == {
                "producerTask": "ExampleGen", "outputArtifactKey": "examples"}
            component = pipeline_spec["components"][tasks[name]["componentRef"]["name"]]
            assert key in component["inputDefinitions"]["artifacts"]
            parsed = Condition(condition)
            assert parsed.evaluate({key: _runtime_examples(1)}) is True
            assert parsed.evaluate({key: _runtime_examples(0)}) is False
    # the judge bites: what CEL refuses fails the driver (a string compared with a number, a missing key)
    with pytest.raises(ConditionError, match="no such overload"):
        Condition("(inputs.artifacts['examples'].artifacts[0].metadata['tfxd_spans'] == 1.0)").evaluate(
            {"examples": _runtime_examples(1)})
    with pytest.raises(ConditionError, match="no such key: tfxd_new"):
        Condition("(inputs.artifacts['examples'].artifacts[0].metadata['tfxd_new'] == 1.0)").evaluate(
            {"examples": _runtime_examples(1)})
    with pytest.raises(ConditionError, match="expected"):
        Condition("inputs.parameters['x'] == 1")


@pytest.mark.parametrize("how", ["submit", "schedule"])
def test_vertex_receives_example_gen_uncached_and_the_rest_cached(compiled_spans, fake_vertex, credentials, how):
    """aiplatform.PipelineJob(enable_caching=True|False) overwrites every task's cachingOptions; tfxd builds
    it with None, so the request Vertex gets keeps the compiled file's (read from what aiplatform sends)."""
    folder, files = compiled_spans
    spec = load_spec(str(folder / "demo.yaml"), check_files=False).spec
    if how == "submit":
        submit_vertex(spec, files["vertex"], credentials=credentials, api_endpoint=fake_vertex.url)
        [request] = fake_vertex.calls("POST", "/pipelineJobs")
        job = request.body
    else:
        schedules.apply(spec, "vertex", files["vertex"], credentials=credentials, endpoint=fake_vertex.url)
        [request] = fake_vertex.writes()
        job = request.body["createPipelineJobRequest"]["pipelineJob"]
    tasks = pipeline_tasks(job["pipelineSpec"])
    compiled = pipeline_tasks(json.loads(Path(files["vertex"]).read_text())["pipelineSpec"])
    assert {name: task.get("cachingOptions") for name, task in tasks.items()} == {
        name: task.get("cachingOptions") for name, task in compiled.items()}  # what compile wrote, untouched
    # ExampleGen reads the data, the finders the push destination: no cache key holds either, and
    # enable_caching=True would have cached them; every other task is cached
    uncached = {"ExampleGen", "warm_start_model_resolver", "latest_blessed_model_resolver"}
    assert {name: task["cachingOptions"] for name, task in tasks.items()} == {
        name: {"enableCache": name not in uncached} for name in tasks}
    assert len(tasks) == 10


def _compile(folder: Path, target: str, output: Path, *sets: str) -> Path:
    """``folder``'s demo.yaml compiled for ``target`` with ``sets``, as `tfxd compile demo.yaml --set ...`
    compiles it (cli/cluster.py; the command itself: tests/kubeflow/test_compile.py), in this process (a
    command's fresh interpreter would import TFX and kfp again for each file); the file written."""
    return Path(compile_to(load_spec(str(folder / "demo.yaml"), list(sets), target=target), target, str(output)))


def _latest_replay(root: Path) -> dict:
    """The summary of the newest replay under ``root``."""
    return json.loads(sorted(root.glob("2*/summary.json"))[-1].read_text())


def _replayed(folder: Path, compiled: Path, replays: Path, *args: str,
              run: Callable[..., subprocess.CompletedProcess]) -> tuple[subprocess.CompletedProcess, dict]:
    """`tfxd replay` of ``compiled`` in ``folder`` by ``run`` (a bucket server's), which succeeds; its output and
    the newest replay's summary."""
    result = run(TFXD, "replay", str(compiled), *args, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    return result, _latest_replay(replays)


def _write_taxi_days(folder: Path, data: str = "data") -> None:
    """Three days of taxi trips under data/ and the scheduled spec over them (read from ``data``, where the
    test puts the days), its features and label the trips' own columns (the scheduled spec's x, city and target
    are the demo data's)."""
    for index, day in enumerate(("2026-11-20", "2026-11-21", "2026-11-22")):
        add_day(folder, day, index)
    text = (SCHEDULED.replace("path: data/{YYYY}", f"path: {data}/{{YYYY}}").replace("features:\n  - name: x\n    transform: zscore\n  - name: city\n    transform: vocabulary\n"
                     "    top_k: 10\n", "features:\n  - {name: fare, transform: zscore}\n"
                     "  - {name: company, transform: hash, buckets: 16}\n")
            .replace("label:\n  name: y\n  column: target\n  task: binary\n",
                     "label: {name: big_tipper, expr: \"tips > fare * 0.2\", task: binary}\n"
                     "evaluation:\n  thresholds: {binary_accuracy: {min: 0.3}}\nbeam: {workers: 1}\n"))
    (folder / "demo.yaml").write_text(text)


def _the_schedule_time_gives_the_day(folder: Path, compiled: Path, replays: Path, replay) -> dict:
    """A scheduled run reads its day, here the day just trained on: nothing new, so green and skipped; its
    summary."""
    again, summary = replay(folder, compiled, replays, "--schedule-time", "2026-11-22T03:00:00Z")
    assert summary["status"] == "skipped" and summary["examples"] == {
        "spans": ["2026-11-21"], "span_day": {"day": "2026-11-21", "why": "the scheduled time, 2026-11-22, -1 day"}}
    assert summary["reason"].startswith(
        "no new data: the spans to read (2026-11-21) are the ones the latest blessed model")
    tasks = {task["name"]: task for task in summary["tasks"]}
    assert tasks["ExampleGen"]["status"] == "ran"  # it read nothing and said why, as it would on the cluster
    assert tasks.pop("ExampleGen")["status"] == tasks.pop(keys.HISTORY_TASK)["status"] == "ran"  # the exit task too
    assert {task["status"] for task in tasks.values()} == {"skipped"}
    assert tasks["StatisticsGen"]["why"].startswith("its condition is false: (inputs.artifacts['examples']")
    assert tasks["Trainer"]["why"].startswith("omitted: it depends on ")  # as Argo omits a skipped task's consumers
    assert "the tasks after ExampleGen were skipped by their condition, and the run succeeds" in again.stdout
    return summary


@pytest.mark.xdist_group("tests/kubeflow/test_spans.py: by hand")  # shares nothing with the replays above
def test_a_run_by_hand_is_refused_a_day_unless_the_spec_asks_for_the_day_it_was_created(tmp_path, tmp_path_factory):
    """A run started by hand, whose schedule time the engine leaves unfilled, is refused, never guessed,
    unless the spec asks for the day the run was created (its root on the bucket, the replays in its
    namespace)."""
    _write_taxi_days(tmp_path)
    compiled = _compile(tmp_path, "kubeflow", tmp_path / "demo.yaml.kfp", "targets.kubeflow.root=gs://demo-bucket/kfp")
    created = _compile(tmp_path, "kubeflow", tmp_path / "created.yaml.kfp", "targets.kubeflow.root=gs://demo-bucket/kfp",
                       "data.spans.unscheduled=creation_time")
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(DEMO_BUCKET)
        by_hand = server.run(TFXD, "replay", str(compiled), cwd=tmp_path)
        fallback = server.run(TFXD, "replay", str(created), cwd=tmp_path)
        left = server.objects(DEMO_BUCKET)
    assert by_hand.returncode == 1
    refusal = " ".join(by_hand.stderr.split())
    assert "ExampleGen failed: " in refusal and "the placeholder was left unfilled" in refusal
    assert "give the day with the run parameter span=YYYY-MM-DD, or set data.spans.unscheduled: creation_time" in (
        refusal)
    yesterday = datetime.datetime.now(datetime.timezone.utc).date() - datetime.timedelta(days=1)
    assert fallback.returncode == 1 and f"no data for span {yesterday}" in " ".join(fallback.stderr.split())
    assert not [name for name in left if "/ExampleGen/" in name], left  # the refused task published nothing


def _another_pipeline_finds_none_of_demos_models(folder: Path, replays: Path, replay) -> None:
    """Another pipeline replayed under the same root (one artifact index, as one Vertex metadata store)
    finds none of demo's models: not as its warm start, not as its baseline. It reads a window of the two
    newest days on the bucket, no span given."""
    other = _compile(folder, "vertex", folder / "other.json", "name=other", "data.spans={window: 2}")
    index = json.loads((replays / "artifacts.json").read_text())["artifacts"]
    assert any(record["pipeline"] == "demo" and record["schemaTitle"] == "tfx.ModelBlessing"
               and record["metadata"].get("blessed") == 1 for record in index)  # a blessed model is there
    _, summary = replay(folder, other, replays, "--root", str(replays))
    assert summary["pipeline"] == "other" and summary["status"] == "ok"
    assert summary["examples"]["spans"] == ["2026-11-21", "2026-11-22"]
    # a window's newest span against the one before it, both computed from the examples ExampleGen wrote
    assert (summary["drift"]["span"], summary["drift"]["previous_span"]) == ("2026-11-22", "2026-11-21")
    assert summary["warm_start"]["reason"] == "no blessed model yet" and summary["baseline"] is None
    assert summary["pushed_destination_on_cluster"].startswith("gs://demo-bucket/pipelines/other/serving/")


def _the_latest_day_rides_out_a_flaky_cloud_storage(folder: Path, replays: Path, replay, front):
    """The next day, read as `data.spans: latest` (the newest day on the bucket), while Cloud Storage answers
    503 to the drift gate's copy and rename of the span's statistics into the store and 429 to the finder
    tasks' listing of the pushed models, which TensorFlow's GCS filesystem retries
    (tsl/platform/cloud/retrying_utils.cc), and 503 to Pusher's copies of the model, which Cloud Storage makes
    (rewrites through google-cloud-storage: components/pusher/executor.py) and google-cloud-storage retries;
    the replay finishes."""
    latest = _compile(folder, "kubeflow", folder / "latest.yaml.kfp", "targets.kubeflow.root=gs://demo-bucket/kfp",
                      "data.spans=latest")
    faults = [front.fail("POST", "tfxd_span_statistics", status=503, count=2, agent_contains="TSL"),
              front.fail("POST", "/rewriteTo/b/demo-bucket/o/kfp%2Fdemo%2Fserving%2F", status=503, count=2,
                         agent_contains="gcloud-python"),
              front.fail("GET", "prefix=kfp%2Fdemo%2Fserving", status=429, count=2, agent_contains="TSL")]
    done = replay(folder, latest, replays)
    assert [len(fault.hits) for fault in faults] == [2, 2, 2], [fault.hits for fault in faults]
    return done


def _the_history_is_read_from_the_bucket(folder: Path, server) -> None:
    """`tfxd history --target kubeflow` reads the records the replays' tasks left in the pipeline root on the
    bucket (gs://demo-bucket/kfp/<pipeline>/<run id>/tfxd-records), through TensorFlow's GCS filesystem as
    anywhere else, and writes the page there too; the other pipeline's runs under the Vertex root are not
    demo's."""
    done = server.run(TFXD, "history", "demo.yaml", "--target", "kubeflow", "--set", "targets.kubeflow.root=gs://demo-bucket/kfp",
                      "--json", "--html", "gs://demo-bucket/kfp/history.html", cwd=folder)
    assert done.returncode == 0, done.stderr
    latest, first = json.loads(done.stdout)
    assert (latest["status"], latest["spans"], latest["blessed"]) == ("ok", ["2026-11-22"], True)
    assert latest["pushed"].startswith(f"gs://{DEMO_BUCKET}/kfp/demo/serving/") and latest["metrics"]
    assert (first["status"], first["spans"], first["strategy"]) == ("ok", ["2026-11-21"], "default")
    assert server.objects(DEMO_BUCKET, "kfp/history") == ["kfp/history.html"]
    # each run's exit task rewrote the page beside the pipeline root, the evaluation's threshold drawn
    exit_page = server.read(DEMO_BUCKET, "kfp/demo/history.html").decode()
    assert exit_page.count('class="st-ok"') == 2 and 'class="threshold"' in exit_page
    # the first run's records removed (a lifecycle rule): its pushed version still says what it was
    for name in server.objects(DEMO_BUCKET, "kfp/"):
        if f"/{first['run_id']}/tfxd-records/" in name:
            server.delete(DEMO_BUCKET, name)
    done = server.run(TFXD, "history", "demo.yaml", "--target", "kubeflow", "--set", "targets.kubeflow.root=gs://demo-bucket/kfp",
                      "--json", cwd=folder)
    *_, left = json.loads(done.stdout)
    assert (left["run_id"], left["status"], left["pushed"]) == (f"pushed {first['pushed'].rsplit('/', 1)[-1]}", "ok",
                                                                first["pushed"])
    assert (left["spans"], left["strategy"], left["metrics"], left["blessed"]) == (
        ["2026-11-21"], "default", first["metrics"], True)
    vertex = server.run(TFXD, "history", "demo.yaml", "--target", "vertex", "--json", cwd=folder)
    [scheduled] = json.loads(vertex.stdout)  # demo's own Vertex replay, by its schedule
    assert (scheduled["status"], scheduled["spans"]) == ("skipped", ["2026-11-21"])


def test_replay_reads_the_day_given_and_the_same_day_again_trains_nothing(tmp_path, tmp_path_factory):
    """On the bucket (tests/buckets/, the replays in its namespace): the days, the pipeline roots and the push
    destination are gs://demo-bucket/..., so ExampleGen lists the spans, the finder tasks read the pushed models
    and the drift gate the previous span's statistics there, as on the cluster. A given day, the same day
    again as the Vertex file's scheduled day (no new data: green, skipped), a window of days (another
    pipeline), and the latest day warm-started and judged for drift against the previous span, through a
    flaky Cloud Storage."""
    _write_taxi_days(tmp_path, data=f"gs://{DEMO_BUCKET}/data")
    replays = tmp_path / "tfxd-runs" / "demo" / "replay"
    compiled = _compile(tmp_path, "kubeflow", tmp_path / "demo.yaml.kfp", "targets.kubeflow.root=gs://demo-bucket/kfp")
    with bucket_server(tmp_path_factory.mktemp("bucket-server")) as server:
        server.create_bucket(DEMO_BUCKET)
        server.upload_folder(tmp_path / "data", DEMO_BUCKET, "data")
        replay = functools.partial(_replayed, run=server.run)
        first = server.run(TFXD, "replay", str(compiled), "--param", "span=2026-11-21", cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        [summary_file] = replays.glob("2*/summary.json")
        summary = json.loads(summary_file.read_text())
        assert summary["examples"] == {"spans": ["2026-11-21"]} and summary["pushed"]
        assert summary["pushed_destination"].startswith(f"gs://{DEMO_BUCKET}/kfp/demo/serving/")
        assert summary["warm_start"]["reason"] == "no blessed model yet"  # training.warm_start, nothing pushed yet
        assert summary["drift"]["span"] == "2026-11-21" and summary["skew"]["columns"]["fare"]["threshold"] == 0.9
        # the Vertex file, pushing where the Kubeflow file pushed, run by its schedule: the day the schedule
        # gives is the day just trained on, no new data there too
        vertex = _compile(tmp_path, "vertex", tmp_path / "demo.json", "push.to=gs://demo-bucket/kfp/demo/serving")
        assert _the_schedule_time_gives_the_day(tmp_path, vertex, replays, replay)["format"] == "vertex"
        _another_pipeline_finds_none_of_demos_models(tmp_path, replays, replay)

        _, summary = _the_latest_day_rides_out_a_flaky_cloud_storage(tmp_path, replays, replay, server.front)
        assert summary["buckets"] == {}  # every replay wrote the bucket itself
        _the_history_is_read_from_the_bucket(tmp_path, server)
    assert summary["examples"]["spans"] == ["2026-11-22"]  # data.spans: latest, the newest day on the bucket
    warm = summary["warm_start"]  # from the model the first replay pushed, which the finder task copied
    assert warm["started"] is True, warm
    assert warm["from"] == summary["artifacts"]["warm_start_model_resolver.model"] + "/Format-Serving"
    assert summary["drift"]["previous_span"] == "2026-11-21" and "fare" in summary["drift"]["columns"]
