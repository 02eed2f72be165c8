"""`tfxd history --target kubeflow|vertex`: the runs of a compiled pipeline, read from the records its tasks
leave in each run's folder (components/cluster_task.py, pipeline/run/cluster_history.py). Three daily runs of
each target's file, replayed as the engine runs them (every task's container command as compiled): a day
trained, blessed and pushed; the same day again (no new data: skipped); a day whose fares moved (stopped by
the drift gate, the real ExampleValidator's verdict in its task's record). And the odd records a user meets:
a run no task recorded the end of, a record cut short, a task that failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import write_spec
from tests.kubeflow.conftest import TARGETS
from tests.pipeline.run.test_retraining import SPEC, add_day, shift_fare
from tests.pipeline.run.test_run_taxi import tfxd
from tfxd import keys
from tfxd.kubeflow.compile import compile_to
from tfxd.kubeflow.targets import cluster_target
from tfxd.pipeline.spec.load import load_spec
from tfxd.task_record import TaskRecord, dumps, run_folder

DAILY = SPEC + "validation:\n  drift: {threshold: 0.9, features: {fare: 0.2}}\n" + TARGETS.replace(
    "    schedule: {cron: \"0 3 * * 1\", timezone: UTC, max_concurrent_runs: 2}\n", "    root: gs://demo-bucket/kfp\n")
DAYS = ("2026-11-20", "2026-11-21", "2026-11-22")


def _project(folder: Path) -> Path:
    for index, day in enumerate(DAYS):
        add_day(folder, day, index)
    shift_fare(folder / "data" / DAYS[2] / "trips.csv")  # the meter changed on the third day
    write_spec(folder, DAILY)
    return folder


def _replay(folder: Path, compiled: Path, root: Path, day: str) -> str:
    done = tfxd("replay", str(compiled), "--project", str(folder), "--root", str(root), "--param", f"span={day}",
                "--param", 'train_args={"numSteps": 10}', cwd=folder)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("target", [  # a group each, so that two workers may take them side by side
    pytest.param(target, marks=pytest.mark.xdist_group(f"tests/kubeflow/test_cluster_history.py: {target}"))
    for target in ("kubeflow", "vertex")])
def test_three_daily_runs_on_each_target_read_back_from_their_tasks_records(tmp_path, target):
    folder = _project(tmp_path)
    compiled = tmp_path / f"daily.{target}"
    compile_to(load_spec(str(folder / "spec.yaml"), target=target), target, str(compiled))  # in this process
    root = tmp_path / "replays"
    said = [_replay(folder, compiled, root, day) for day in (DAYS[0], DAYS[0], DAYS[2])]
    page = root / keys.HISTORY_PAGE
    assert all(f"history: {page}" in text for text in said)  # every replay ends naming the page

    done = tfxd("history", "spec.yaml", "--target", target, "--root", str(root), "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    stopped, skipped, trained = json.loads(done.stdout)  # newest first
    assert (trained["status"], trained["spans"], trained["blessed"]) == ("ok", [DAYS[0]], True)
    assert set(trained["examples"]) == {"train", "eval"} and sum(trained["examples"].values()) == 400
    assert (trained["strategy"], trained["replicas"]) == ("default", 1)
    assert 0.3 <= trained["metrics"]["binary_accuracy"] <= 1 and trained["metrics"]["example_count"] > 0
    assert "/serving/" in trained["pushed"] and trained["seconds"] > 0
    assert trained["drift"] == {"verdict": "nothing to compare", "span": DAYS[0], "previous_span": None}
    assert (skipped["status"], skipped["spans"], skipped["blessed"], skipped["pushed"]) == (
        "skipped", [DAYS[0]], None, None)
    assert skipped["reason"].startswith(f"no new data: the spans to read ({DAYS[0]}) are the ones the latest")
    assert (stopped["status"], stopped["spans"], stopped["metrics"]) == ("stopped", [DAYS[2]], {})
    assert stopped["reason"].startswith(f"the data drifted between span {DAYS[1]} and span {DAYS[2]}: fare: ")
    drift = stopped["drift"]
    assert (drift["verdict"], drift["feature"], drift["threshold"], drift["span"]) == ("stopped", "fare", 0.2, DAYS[2])
    assert drift["distance"] > 0.2

    _the_pushed_version_says_where_it_came_from(trained)

    table = tfxd("history", "spec.yaml", "--target", target, "--root", str(root), "--last", "2", cwd=folder).stdout
    assert "2 runs, newest first" in table and "stopped" in table and "skipped" in table
    html = page.read_text()
    assert html.count('class="st-ok"') == 1 and "stopped by fare" in html and "runs/" not in html
    _the_exit_task_rewrote_the_page_beside_the_pipeline_root(root)


def _the_exit_task_rewrote_the_page_beside_the_pipeline_root(root: Path) -> None:
    """Each run ended with its exit task (TFX's exit handler, after the tasks whatever their end: the drift
    stop too), which rewrote history.html where the cluster keeps it, beside the pipeline root (the bucket
    mapped into the replay's root), thresholds drawn, and left this run's copy as its output."""
    [page] = (root / "bucket").rglob(keys.HISTORY_PAGE)
    assert page.parent.name == "daily-tips" and (page.parent / "pipeline").is_dir()
    html = page.read_text()
    assert html.count('class="st-ok"') == 1 and "stopped by fare" in html and 'class="threshold"' in html
    summaries = sorted((json.loads(path.read_text()) for path in root.glob("2*/summary.json")),
                       key=lambda summary: summary["run_id"])
    for summary in summaries:
        assert summary["tasks"][-1]["name"] == keys.HISTORY_TASK and summary["tasks"][-1]["status"] == "ran"
    assert summaries[-1]["status"] == "stopped"
    copy = Path(summaries[-1]["artifacts"][f"{keys.HISTORY_TASK}.page"]) / keys.HISTORY_PAGE
    assert copy.read_text() == html  # the last run's copy is the page as it left it


def _the_pushed_version_says_where_it_came_from(trained: dict) -> None:
    """Beside the pushed model (assets.extra, which TF Serving ignores): its training report and the evaluation
    that blessed it; read back as the run that pushed it where its records are gone (cluster_history.py)."""
    from tfxd.pipeline.run.cluster_history import pushed_runs

    version = Path(trained["pushed"])
    extra = version / "assets.extra"
    assert json.loads((extra / "tfxd_evaluation.json").read_text())["metrics"] == trained["metrics"]
    assert json.loads((extra / "tfxd_training.json").read_text())["plan"]["strategy"] == "default"
    [(line, _)] = pushed_runs(str(version.parent), "daily-tips", set())
    assert (line.run_id, line.status, line.spans, line.strategy) == (f"pushed {version.name}", "ok", [DAYS[0]], "default")
    assert line.metrics == trained["metrics"] and line.blessed and line.pushed == str(version)
    assert pushed_runs(str(version.parent), "daily-tips", {version.name}) == []  # its run's records name it


def test_a_record_finds_its_runs_folder_wherever_the_service_puts_a_tasks_outputs():
    """KFP 2.17's driver provisions a task's outputs under `<run folder>/<task>/<a new UUID>/<key>` (kubeflow/
    pipelines backend/src/v2/driver/driver.go, provisionOutputs), Vertex under `<run folder>/<task>_<task id>/
    <key>`; replay names them so, and a record finds its run's folder from either. An artifact a resolver
    found (made by another task, in another run) names no folder of the resolver's."""
    kfp, vertex = (cluster_target(name).task_folder("Trainer") for name in ("kubeflow", "vertex"))
    assert re.fullmatch(r"Trainer/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", kfp), kfp
    assert re.fullmatch(r"Trainer_[0-9]{19}", vertex) and cluster_target("vertex").task_folder("Trainer") != vertex
    for folder in (kfp, vertex, "Trainer_-6391851938208366592"):
        assert run_folder(f"gs://b/root/daily-tips/run-1/{folder}/model/", "Trainer") == "gs://b/root/daily-tips/run-1"
    assert run_folder(f"gs://b/root/daily-tips/run-0/{kfp}/model", "latest_blessed_model_resolver") is None


def _record(folder: Path, task: str, status: str = "ok", **fields) -> None:
    record = TaskRecord(pipeline=fields.pop("pipeline", "daily-tips"), task=task, status=status,
                        started=fields.pop("started", "2026-11-20T03:00:00.000+00:00"),
                        ended=fields.pop("ended", "2026-11-20T03:00:05.500+00:00"), **fields)
    (folder / keys.TASK_RECORDS).mkdir(parents=True, exist_ok=True)
    (folder / keys.TASK_RECORDS / f"{task}.json").write_text(dumps(record))


def test_odd_records_a_run_unfinished_a_failed_task_a_record_cut_short_another_pipeline(tmp_path):
    folder = _project(tmp_path)
    root = tmp_path / "pipeline-root"
    nothing = tfxd("history", "spec.yaml", "--target", "kubeflow", "--root", str(root), cwd=folder)
    assert nothing.returncode == 0 and "no runs of daily-tips yet under" in nothing.stdout
    assert "`tfxd submit spec.yaml --target kubeflow` or a replay of its compiled file makes the first" in (
        " ".join(nothing.stdout.split()))
    running = root / "daily-tips" / "run-b"  # `<root>/<pipeline>/<run id>` as on Kubeflow Pipelines
    _record(running, "ExampleGen", started="2026-11-21T03:00:00.000+00:00", ended="2026-11-21T03:00:09.000+00:00")
    failed = root / "123456" / "daily-tips-20261120030000"  # `<root>/<project number>/<job id>` as on Vertex
    _record(failed, "ExampleGen")
    _record(failed, "Trainer", "failed", error="ValueError: the label column is empty",
            started="2026-11-20T03:01:00.000+00:00", ended="2026-11-20T03:01:30.000+00:00")
    (failed / keys.TASK_RECORDS / "Transform.json").write_text('{"pipeline": "daily-tips", "task": "Tr')  # cut short
    _record(root / "other" / "run-c", "Pusher", pipeline="other")  # another pipeline under the same root
    done = tfxd("history", "spec.yaml", "--target", "kubeflow", "--root", str(root), "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    newest, oldest = json.loads(done.stdout)
    assert (newest["run_id"], newest["status"]) == ("run-b", "unfinished")
    assert newest["reason"].startswith("no task recorded the run's end: it is running, or it ended where")
    assert (oldest["run_id"], oldest["status"]) == ("daily-tips-20261120030000", "failed")
    assert oldest["reason"] == "Trainer: ValueError: the label column is empty" and oldest["seconds"] == 90.0
    assert oldest["started"].startswith("2026-11-20T") or oldest["started"].startswith("2026-11-19T")


def test_the_engine_says_what_no_record_could(tmp_path, fake_kfp, fake_vertex, credentials):
    """With --ask-engine, a run no task recorded the end of takes the service's state (kfp's client and
    aiplatform asking the loopback stand-ins), and a run none of whose tasks began is listed from it."""
    from tfxd.kubeflow.vertex import VertexPipelines
    from tfxd.pipeline.run.cluster_history import runs, with_engine
    from tfxd.pipeline.spec.load import load_spec

    folder = _project(tmp_path)
    root = tmp_path / "pipeline-root"
    _record(root / "daily-tips" / "run-2", "ExampleGen", started="2026-11-21T03:00:00.000+00:00")
    _record(root / "daily-tips" / "run-1", "Pusher")  # ended ok: the records' word stands
    # Kubeflow Pipelines: the runs of the experiment named after the pipeline (tfxd submit puts them there)
    fake_kfp.experiments["experiment-1"] = {"experiment_id": "experiment-1", "display_name": "daily-tips"}
    fake_kfp.run_states = ["RUNNING", "FAILED"]  # a run's state is the one at its count of GETs
    for run_id, polls, created in (("run-1", 1, "2026-11-20T03:00:00Z"), ("run-2", 0, "2026-11-21T03:00:00Z"),
                                   ("run-3", 1, "2026-11-22T03:00:00Z")):
        fake_kfp.runs[run_id] = {"run_id": run_id, "experiment_id": "experiment-1", "display_name": run_id,
                                 "created_at": created, "_polls": polls}
    fake_kfp.runs["run-9"] = {"run_id": "run-9", "experiment_id": "experiment-2", "created_at": "2026-11-23T03:00:00Z",
                              "_polls": 0}  # another pipeline's
    done = tfxd("history", "spec.yaml", "--target", "kubeflow", "--root", str(root), "--json", "--ask-engine",
                "--endpoint", fake_kfp.url, cwd=folder)
    assert done.returncode == 0, done.stderr
    lines = {line["run_id"]: line for line in json.loads(done.stdout)}
    assert [line["run_id"] for line in json.loads(done.stdout)] == ["run-3", "run-2", "run-1"]
    assert (lines["run-3"]["status"], lines["run-3"]["engine"]) == ("failed", "FAILED")
    assert lines["run-3"]["reason"] == "Kubeflow Pipelines says FAILED; none of its tasks left a record"
    assert (lines["run-2"]["status"], lines["run-2"]["engine"]) == ("running", "RUNNING")
    assert (lines["run-1"]["status"], lines["run-1"]["engine"]) == ("ok", "FAILED")  # its Pusher said ok
    local = tfxd("history", "spec.yaml", "--ask-engine", cwd=folder)
    assert local.returncode == 2 and "--ask-engine asks Kubeflow Pipelines or Vertex AI" in local.stderr

    # Vertex AI: the jobs labelled with the pipeline, by job id (`<root>/<project number>/<job id>`)
    parent = "projects/demo-project/locations/europe-west4/pipelineJobs"
    fake_vertex.job_states = ["PIPELINE_STATE_CANCELLED", "PIPELINE_STATE_RUNNING"]
    fake_vertex.jobs[f"{parent}/daily-tips-1"] = {"name": f"{parent}/daily-tips-1", "displayName": "daily-tips",
                                                  "labels": {"tfxd-pipeline": "daily-tips"},
                                                  "createTime": "2026-11-24T03:00:00Z", "_polls": 0}
    fake_vertex.jobs[f"{parent}/other-1"] = {"name": f"{parent}/other-1", "labels": {"tfxd-pipeline": "other"},
                                             "createTime": "2026-11-24T03:00:00Z", "_polls": 1}
    _record(root / "123456" / "daily-tips-1", "ExampleGen", started="2026-11-24T03:00:00.000+00:00")
    loaded = load_spec(str(folder / "spec.yaml"), [], target="vertex")
    states = VertexPipelines().run_states(loaded.spec, endpoint=fake_vertex.url, credentials=credentials)
    assert set(states) == {"daily-tips-1"} and states["daily-tips-1"].state == "CANCELLED"
    [line, *_] = [line for line, _ in with_engine(runs(str(root), "daily-tips"), states, "Vertex AI Pipelines")]
    assert (line.run_id, line.status, line.engine) == ("daily-tips-1", "interrupted", "CANCELLED")
