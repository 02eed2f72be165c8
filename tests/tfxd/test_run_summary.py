"""A run's summary: one core and one status rule for `tfxd run` and `tfxd replay`, each side's part under
its own keys, and one reader of a summary.json that tolerates a short or odd file (report.html is drawn
from what it reads)."""

from __future__ import annotations

import pytest

from tfxd.run_summary import LocalRun, ReplayRun, run_status

CORE = {"pipeline": "taxi", "run_id": "20261126-1", "status": "ok", "examples": {"splits": {"train": 8}},
        "strategy": {"strategy": "default", "replicas": 1}, "artifacts": {"model": "/r/model"}, "blessed": True}


@pytest.mark.parametrize(("interrupted", "failed", "not_run", "skipped", "status"), [
    (True, True, True, True, "interrupted"), (False, True, True, True, "failed"),
    (False, False, True, True, "not run"), (False, False, False, True, "skipped"), (False, False, False, False, "ok"),
])
def test_one_rule_for_the_status(interrupted, failed, not_run, skipped, status):
    assert run_status(interrupted=interrupted, failed=failed, not_run=not_run, skipped=skipped) == status


def test_a_local_summary_is_read_back_as_written():
    summary = LocalRun(**CORE, components=[{"name": "Trainer", "status": "ran", "seconds": 2.0}],
                       metrics={"auc": 0.9}, training={"epochs": 2}, evaluation={"blessed": True},
                       anomalies=[], drift=None, skew={"columns": {}}, pushed_to="/serving/1", report="/r/report.html",
                       seconds=12.5)
    data = summary.to_json()
    assert set(data) == {*CORE, "components", "metrics", "training", "evaluation", "anomalies", "drift", "skew",
                         "pushed_to", "report", "seconds", "history"}  # reason, signal, stopped_by: when there is one
    assert LocalRun.from_json(data) == summary
    stopped = LocalRun(pipeline="p", run_id="r", status="interrupted", signal="SIGTERM").to_json()
    assert (stopped["signal"], "reason" in stopped, "stopped_by" in stopped) == ("SIGTERM", False, False)
    gated = LocalRun(pipeline="p", run_id="r", status="stopped", stopped_by="skew", reason="the splits differ")
    assert LocalRun.from_json(gated.to_json()) == gated


@pytest.mark.parametrize("odd", [None, [], "text", {"components": "x", "examples": [1], "blessed": "yes",
                                                    "anomalies": "none", "pipeline": 7}])
def test_an_odd_summary_reads_as_empty_parts(odd):
    summary = LocalRun.from_json(odd)
    assert (summary.components, summary.examples, summary.blessed, summary.strategy) == ([], {}, None, None)
    assert summary.anomalies in (None, [])  # None: not checked; a list that is not one reads as no anomalies
    assert summary.pipeline in ("", "7")


def test_a_replay_summary_writes_the_core_and_its_own_part():
    replay = ReplayRun(**CORE, file="/p/taxi.yaml", format="kubeflow", root="/r", run_dir="/r/1", logs="/r/1/logs",
                       parameters={}, beam="as compiled", tasks=[], skew={"columns": {}})
    data = replay.to_json()
    assert {key: data[key] for key in CORE} == CORE
    assert "skew" in data and "drift" not in data and "warm_start" not in data  # a gate only where it ran
    assert data["notes"] == [] and data["pushed"] is None
