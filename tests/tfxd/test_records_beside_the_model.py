"""The two files the Trainer's chief leaves with the model, each through its one writer and one reader:
tfxd_training.json (tfxd.training_report) and assets.extra/tfxd_data.json (tfxd.pushed). The runs that
write them for real are tests/pipeline/run/test_retraining.py and tests/kubeflow/test_replay.py."""

from __future__ import annotations

import json

import pytest

from tfxd import keys, pushed, training_report
from tfxd.trainer_module.planner import Devices, Strategy, plan
from tfxd.training_report import PlanRecord, TrainingReport

PLAN = PlanRecord(strategy="mirrored", replicas=2, is_chief=True, task={"type": None, "index": 0},
                  global_batch_size=128, shard_policy="off", precision="float32",
                  devices={"gpus": 0, "cpu_devices": 2}, reason="2 logical CPU devices")


def _report(warm_start=None) -> TrainingReport:
    return TrainingReport(plan=PLAN, epochs=2, steps_per_epoch=10, replicas_in_sync=2, weights_checksum=1.5,
                          history=[{"epoch": 1, "loss": 0.7}, {"epoch": 2, "loss": 0.5}], metrics={"loss": 0.5},
                          warm_start=warm_start)


def test_the_training_report_reads_back_as_written(tmp_path):
    warm = {"from": "/serving/1", "started": True, "reason": None, "weights_checksum": 1.0}
    path = training_report.write(str(tmp_path), _report(warm))
    assert path == str(tmp_path / keys.TRAINING_REPORT_FILE)
    assert training_report.read(str(tmp_path)) == _report(warm)
    assert json.loads((tmp_path / keys.TRAINING_REPORT_FILE).read_text())["plan"] == PLAN.to_json()


def test_a_report_without_a_warm_start_has_none_in_the_file_or_the_summary(tmp_path):
    training_report.write(str(tmp_path), _report())
    assert "warm_start" not in json.loads((tmp_path / keys.TRAINING_REPORT_FILE).read_text())
    assert training_report.read(str(tmp_path)).for_summary() == {
        "epochs": 2, "steps_per_epoch": 10, "metrics": {"loss": 0.5},
        "history": [{"epoch": 1, "loss": 0.7}, {"epoch": 2, "loss": 0.5}]}


def test_no_report_reads_as_none_and_a_short_one_is_refused(tmp_path):
    assert training_report.read(str(tmp_path)) is None
    (tmp_path / keys.TRAINING_REPORT_FILE).write_text(json.dumps({"plan": PLAN.to_json()}))  # a plan alone
    with pytest.raises(TypeError, match="epochs"):
        training_report.read(str(tmp_path))


def test_the_planner_s_plan_is_recorded_as_tfxd_plan_prints_it():
    chosen = plan({}, Devices(cpu_devices=2), Strategy.MIRRORED)
    assert PlanRecord.from_json(json.loads(json.dumps(chosen.to_json()))) == chosen.record()
    assert chosen.record().strategy == "mirrored" and type(chosen.record().strategy) is str  # the name
    assert chosen.record().steps_per_execution == 32
    # a report of a tfxd from before steps_per_execution: one step per call, as Keras ran it then
    older = {k: v for k, v in PLAN.to_json().items() if k not in ("steps_per_execution", "execution_reason")}
    assert PlanRecord.from_json(older).steps_per_execution == 1
    serving = PlanRecord.from_json({**PLAN.to_json(), "is_chief": False, "role": "serve"})
    assert (PLAN.writes_the_model, serving.writes_the_model) == (True, False)


def test_the_data_record_reads_back_as_written(tmp_path):
    assert pushed.data_record(str(tmp_path)) == pushed.DataRecord()
    pushed.write_data_record(str(tmp_path), pushed.DataRecord({"features": {"x": "float"}}, ["2026-11-23"]))
    assert pushed.data_record(str(tmp_path)) == pushed.DataRecord({"features": {"x": "float"}}, ["2026-11-23"])
    pushed.write_data_record(str(tmp_path), pushed.DataRecord({"features": {}}))
    assert json.loads((tmp_path / pushed.DATA_RECORD_FILE).read_text()) == {"inputs": {"features": {}}}
    assert pushed.data_record(str(tmp_path)).spans is None
