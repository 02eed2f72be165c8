"""`tfxd schedule` against local fakes: apply is idempotent by name and writes only what differs."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.kubeflow.kfp_rules import same_pipeline_spec
from tfxd.kubeflow import schedules
from tfxd.kubeflow.clients import compiled_hash, spec_hash
from tfxd.kubeflow.kubeflow_pipelines import kfp_cron
from tfxd.kubeflow.schedules import ScheduleError
from tfxd.pipeline.spec.targets import Schedule

PARENT = "/v1/projects/demo-project/locations/europe-west4"


@pytest.fixture
def vertex(fake_vertex, credentials):
    """Keyword arguments that aim schedules.* at the fake Vertex AI."""
    return {"credentials": credentials, "endpoint": fake_vertex.url}


@pytest.fixture
def kfp(fake_kfp):
    return {"endpoint": fake_kfp.url}


def _summary(requests):
    return [(r.method, r.path) for r in requests]


# ---------------------------------------------------------------------------- Vertex AI


def test_vertex_first_apply_creates(fake_vertex, vertex, make_spec, make_compiled):
    spec = make_spec()
    path = make_compiled("vertex")
    result = schedules.apply(spec, "vertex", str(path), **vertex)

    assert result.startswith("created Vertex AI schedule demo (projects/demo-project/locations/europe-west4/")
    [create] = fake_vertex.writes()
    assert (create.method, create.path) == ("POST", f"{PARENT}/schedules")
    body = create.body
    assert body["displayName"] == "demo"
    assert body["cron"] == "TZ=Europe/Berlin 0 3 * * *"
    assert body["maxConcurrentRunCount"] == "2"  # int64: a string in JSON
    request = body["createPipelineJobRequest"]
    assert request["parent"] == "projects/demo-project/locations/europe-west4"
    job = request["pipelineJob"]
    assert job["serviceAccount"] == "runner@demo-project.iam.gserviceaccount.com"
    assert job["labels"]["tfxd-spec"] == spec_hash(spec)
    assert job["labels"]["tfxd-compiled"] == compiled_hash(str(path))
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://demo-bucket/pipelines/demo/pipeline"
    assert job["pipelineSpec"]["pipelineInfo"] == {"name": "demo"}
    assert len(fake_vertex.schedules) == 1


def test_vertex_second_apply_writes_nothing(fake_vertex, vertex, make_spec, make_compiled):
    path = str(make_compiled("vertex"))
    schedules.apply(make_spec(), "vertex", path, **vertex)
    fake_vertex.clear()

    result = schedules.apply(make_spec(), "vertex", path, **vertex)

    assert result.startswith("unchanged: Vertex AI schedule demo")
    assert fake_vertex.writes() == []
    assert fake_vertex.calls("GET", f"{PARENT}/schedules")  # it did look


@pytest.mark.parametrize(("change", "cron", "runs"), [
    ("targets.vertex.schedule.cron='0 4 * * *'", "TZ=Europe/Berlin 0 4 * * *", "2"),
    ("targets.vertex.schedule.timezone=UTC", "TZ=UTC 0 3 * * *", "2"),
    ("targets.vertex.schedule.max_concurrent_runs=3", "TZ=Europe/Berlin 0 3 * * *", "3"),
])
def test_vertex_changed_options_update_in_place(fake_vertex, vertex, make_spec, make_compiled, change, cron, runs):
    path = str(make_compiled("vertex"))
    schedules.apply(make_spec(), "vertex", path, **vertex)
    [name] = fake_vertex.schedules
    fake_vertex.clear()

    result = schedules.apply(make_spec(change), "vertex", path, **vertex)

    assert result.startswith("updated Vertex AI schedule demo")
    [patch] = fake_vertex.writes()
    assert (patch.method, patch.path) == ("PATCH", f"/v1/{name}")
    assert set(patch.query["updateMask"].split(",")) == {"cron", "maxConcurrentRunCount"}
    assert patch.body["cron"] == cron
    assert patch.body["maxConcurrentRunCount"] == runs
    assert list(fake_vertex.schedules) == [name]
    assert fake_vertex.schedules[name]["cron"] == cron


def test_vertex_changed_pipeline_replaces(fake_vertex, vertex, make_spec, make_compiled):
    schedules.apply(make_spec(), "vertex", str(make_compiled("vertex", "a")), **vertex)
    [old] = fake_vertex.schedules
    fake_vertex.clear()
    changed = make_compiled("vertex", "b")

    result = schedules.apply(make_spec(), "vertex", str(changed), **vertex)

    assert result.startswith("replaced Vertex AI schedule demo")
    assert _summary(fake_vertex.writes()) == [("POST", f"{PARENT}/schedules"), ("DELETE", f"/v1/{old}")]
    [new] = fake_vertex.schedules.values()
    assert new["name"] != old
    assert new["createPipelineJobRequest"]["pipelineJob"]["labels"]["tfxd-compiled"] == compiled_hash(str(changed))
    assert new["state"] == "ACTIVE"


def test_vertex_changed_service_account_replaces(fake_vertex, vertex, make_spec, make_compiled):
    path = str(make_compiled("vertex"))
    schedules.apply(make_spec(), "vertex", path, **vertex)
    fake_vertex.clear()
    schedules.apply(make_spec("targets.vertex.service_account=other@demo-project.iam.gserviceaccount.com"),
                    "vertex", path, **vertex)
    assert [r.method for r in fake_vertex.writes()] == ["POST", "DELETE"]


def test_vertex_replace_keeps_a_paused_schedule_paused(fake_vertex, vertex, make_spec, make_compiled):
    schedules.apply(make_spec(), "vertex", str(make_compiled("vertex", "a")), **vertex)
    schedules.pause(make_spec(), "vertex", **vertex)
    fake_vertex.clear()

    result = schedules.apply(make_spec(), "vertex", str(make_compiled("vertex", "b")), **vertex)

    assert "kept paused" in result
    assert [r.method for r in fake_vertex.writes()] == ["POST", "POST", "DELETE"]
    assert fake_vertex.writes()[1].path.endswith(":pause")
    [new] = fake_vertex.schedules.values()
    assert new["state"] == "PAUSED"


def test_vertex_pause_resume_list_delete(fake_vertex, vertex, make_spec, make_compiled):
    spec = make_spec()
    path = str(make_compiled("vertex"))
    schedules.apply(spec, "vertex", path, **vertex)
    [name] = fake_vertex.schedules
    fake_vertex.clear()

    assert schedules.pause(spec, "vertex", **vertex).startswith("paused Vertex AI schedule demo")
    assert _summary(fake_vertex.writes()) == [("POST", f"/v1/{name}:pause")]
    assert fake_vertex.schedules[name]["state"] == "PAUSED"
    fake_vertex.clear()
    assert schedules.pause(spec, "vertex", **vertex).startswith("unchanged")  # already paused: no call
    assert fake_vertex.writes() == []

    assert schedules.resume(spec, "vertex", **vertex).startswith("resumed Vertex AI schedule demo")
    assert _summary(fake_vertex.writes()) == [("POST", f"/v1/{name}:resume")]
    assert fake_vertex.schedules[name]["state"] == "ACTIVE"

    [row] = schedules.list_(spec, "vertex", **vertex)
    assert row == {"name": name, "display_name": "demo", "cron": "TZ=Europe/Berlin 0 3 * * *", "state": "ACTIVE",
                   "next_run_time": "2030-01-01T03:00:00+00:00", "max_concurrent_runs": 2,
                   "spec_hash": spec_hash(spec), "compiled_hash": compiled_hash(path)}
    fake_vertex.clear()

    assert schedules.delete(spec, "vertex", **vertex).startswith("deleted Vertex AI schedule demo")
    assert _summary(fake_vertex.writes()) == [("DELETE", f"/v1/{name}")]
    assert fake_vertex.schedules == {}
    assert schedules.list_(spec, "vertex", **vertex) == []


@pytest.mark.parametrize("verb", ["pause", "resume", "delete"])
def test_vertex_missing_schedule_is_a_clear_error(fake_vertex, vertex, make_spec, verb):
    with pytest.raises(ScheduleError, match="no Vertex AI schedule named 'demo' in project demo-project, "
                                            "region europe-west4; create it with `tfxd schedule apply`"):
        getattr(schedules, verb)(make_spec(), "vertex", **vertex)
    assert fake_vertex.writes() == []


def test_vertex_leaves_other_schedules_alone(fake_vertex, vertex, make_spec, make_compiled):
    other = fake_vertex.add_schedule("projects/demo-project/locations/europe-west4",
                                     {"displayName": "other", "cron": "0 1 * * *"})
    schedules.apply(make_spec(), "vertex", str(make_compiled("vertex")), **vertex)
    schedules.delete(make_spec(), "vertex", **vertex)
    assert list(fake_vertex.schedules) == [other["name"]]


def test_apply_needs_a_schedule_section(fake_vertex, vertex, make_spec, make_compiled):
    with pytest.raises(ScheduleError, match=r"no targets\.vertex\.schedule"):
        schedules.apply(make_spec("targets.vertex.schedule=null"), "vertex", str(make_compiled("vertex")), **vertex)
    assert fake_vertex.requests == []


def test_schedules_are_for_remote_targets_only(make_spec, make_compiled):
    with pytest.raises(ValueError, match="not 'local'"):
        schedules.apply(make_spec(), "local", str(make_compiled("kubeflow")))


# ---------------------------------------------------------------------------- Kubeflow Pipelines


def test_kfp_first_apply_creates_with_a_six_field_cron(fake_kfp, kfp, make_spec, make_compiled):
    spec = make_spec()
    path = make_compiled("kubeflow")
    result = schedules.apply(spec, "kubeflow", str(path), **kfp)

    assert result.startswith("created Kubeflow recurring run demo (recurring-")
    [experiment] = fake_kfp.calls("POST", "/experiments")
    assert experiment.body["display_name"] == "demo"
    [create] = fake_kfp.calls("POST", "/recurringruns")
    body = create.body
    assert body["display_name"] == "demo"
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * 1"}}
    assert int(body["max_concurrency"]) == 2
    assert body["mode"] == "ENABLE"
    assert body["no_catchup"] is True
    assert body["experiment_id"] == next(iter(fake_kfp.experiments))
    assert same_pipeline_spec(body["pipeline_spec"], yaml.safe_load(path.read_text()))
    assert body["description"].endswith(f"[tfxd-spec={spec_hash(spec)} tfxd-compiled={compiled_hash(str(path))}]")
    assert "pipeline_root" not in body["runtime_config"]


def test_kfp_recurring_run_gets_the_compilers_pipeline_root(fake_kfp, kfp, make_spec, make_compiled):
    spec = make_spec("targets.kubeflow.root=gs://kfp-bucket/runs")
    path = str(make_compiled("kubeflow"))
    schedules.apply(spec, "kubeflow", path, **kfp)
    [create] = fake_kfp.calls("POST", "/recurringruns")
    assert create.body["runtime_config"]["pipeline_root"] == "gs://kfp-bucket/runs/demo/pipeline"
    fake_kfp.clear()
    assert schedules.apply(spec, "kubeflow", path, **kfp).startswith("unchanged")
    assert fake_kfp.writes() == []


def test_kfp_second_apply_writes_nothing(fake_kfp, kfp, make_spec, make_compiled):
    path = str(make_compiled("kubeflow"))
    schedules.apply(make_spec(), "kubeflow", path, **kfp)
    fake_kfp.clear()

    result = schedules.apply(make_spec(), "kubeflow", path, **kfp)

    assert result.startswith("unchanged: Kubeflow recurring run demo")
    assert fake_kfp.writes() == []
    assert fake_kfp.calls("GET", "/recurringruns")


@pytest.mark.parametrize(("change", "variant"), [
    ("targets.kubeflow.schedule.cron='0 4 * * 1'", "a"),
    ("targets.kubeflow.schedule.max_concurrent_runs=1", "a"),
    ("tfxd=1", "b"),  # same spec, another compiled pipeline
    ("targets.kubeflow.root=gs://kfp-bucket/runs", "a"),  # another pipeline root
])
def test_kfp_any_change_replaces(fake_kfp, kfp, make_spec, make_compiled, change, variant):
    schedules.apply(make_spec(), "kubeflow", str(make_compiled("kubeflow", "a")), **kfp)
    [old] = fake_kfp.recurring_runs
    fake_kfp.clear()

    result = schedules.apply(make_spec(change), "kubeflow", str(make_compiled("kubeflow", variant)), **kfp)

    assert result.startswith("replaced Kubeflow recurring run demo")
    assert _summary(fake_kfp.writes()) == [("POST", "/apis/v2beta1/recurringruns"),
                                           ("DELETE", f"/apis/v2beta1/recurringruns/{old}")]
    assert len(fake_kfp.recurring_runs) == 1


def test_kfp_pause_resume_list_delete(fake_kfp, kfp, make_spec, make_compiled):
    spec = make_spec()
    path = str(make_compiled("kubeflow"))
    schedules.apply(spec, "kubeflow", path, **kfp)
    [run_id] = fake_kfp.recurring_runs
    fake_kfp.clear()

    assert schedules.pause(spec, "kubeflow", **kfp).startswith("paused Kubeflow recurring run demo")
    assert _summary(fake_kfp.writes()) == [("POST", f"/apis/v2beta1/recurringruns/{run_id}:disable")]
    fake_kfp.clear()
    assert schedules.resume(spec, "kubeflow", **kfp).startswith("resumed Kubeflow recurring run demo")
    assert _summary(fake_kfp.writes()) == [("POST", f"/apis/v2beta1/recurringruns/{run_id}:enable")]

    [row] = schedules.list_(spec, "kubeflow", **kfp)
    assert row == {"name": run_id, "display_name": "demo", "cron": "0 0 3 * * 1", "state": "ENABLED",
                   "next_run_time": None, "max_concurrent_runs": 2, "spec_hash": spec_hash(spec),
                   "compiled_hash": compiled_hash(path)}
    fake_kfp.clear()

    assert schedules.delete(spec, "kubeflow", **kfp).startswith("deleted Kubeflow recurring run demo")
    assert _summary(fake_kfp.writes()) == [("DELETE", f"/apis/v2beta1/recurringruns/{run_id}")]
    assert fake_kfp.recurring_runs == {}


def test_kfp_missing_recurring_run_is_a_clear_error(fake_kfp, kfp, make_spec):
    with pytest.raises(ScheduleError, match="no Kubeflow recurring run named 'demo'"):
        schedules.pause(make_spec(), "kubeflow", **kfp)
    assert fake_kfp.writes() == []


def test_kfp_refuses_a_time_zone(fake_kfp, kfp, make_spec, make_compiled):
    spec = make_spec("targets.kubeflow.schedule.timezone=Europe/Berlin")
    with pytest.raises(ScheduleError, match="no time zone"):
        schedules.apply(spec, "kubeflow", str(make_compiled("kubeflow")), **kfp)
    assert fake_kfp.requests == []


@pytest.mark.parametrize(("cron", "expected"), [
    ("0 3 * * 1", "0 0 3 * * 1"),
    ("*/15 8-18 * * 1-5", "0 */15 8-18 * * 1-5"),
    ("0 3 * * 7", "0 0 3 * * 0"),
    ("0 3 1 JAN,JUL 5-7", "0 0 3 1 JAN,JUL 5-6,0"),
])
def test_kfp_cron_has_a_seconds_field(cron, expected):
    assert kfp_cron(Schedule(cron=cron)) == expected


def test_kfp_refuses_what_robfig_cron_cannot_parse_and_too_much_concurrency(fake_kfp):
    base = {"display_name": "x", "mode": "ENABLE"}
    status, answer = fake_kfp.dispatch("POST", "/apis/v2beta1/recurringruns", json.dumps(
        {**base, "max_concurrency": "2", "trigger": {"cron_schedule": {"cron": "0 0 3 * * 7"}}}).encode())
    assert status == 400 and "Schedule cron is not a supported format" in answer["message"]
    status, answer = fake_kfp.dispatch("POST", "/apis/v2beta1/recurringruns", json.dumps(
        {**base, "max_concurrency": "11", "trigger": {"cron_schedule": {"cron": "0 0 3 * * 0"}}}).encode())
    assert status == 400 and "at most 10. Received 11" in answer["message"]
    assert fake_kfp.recurring_runs == {}
