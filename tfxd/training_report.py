"""What the Trainer's chief leaves beside the model (keys.TRAINING_REPORT_FILE in the model artifact's
folder): the plan it trained under, the epochs, the final metrics and the per-epoch history, and the warm
start. trainer_module/run_fn.py writes it; `tfxd run`'s and `tfxd replay`'s summaries read it. One type,
one writer, one reader, so both sides agree on what the file holds.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from tfxd import keys
from tfxd.files import file_reader


@dataclass(frozen=True)
class PlanRecord:
    """trainer_module.planner.Plan as it is recorded and shown (`tfxd plan --json` prints the same): the
    strategy chosen and why, for this task of the cluster."""

    strategy: str  # a planner.Strategy's name, never auto
    replicas: int
    is_chief: bool
    task: dict[str, Any]  # {type, index}
    global_batch_size: int
    shard_policy: str  # off | file | data
    precision: str  # float32 | mixed_float16 | mixed_bfloat16
    devices: dict[str, Any]  # what the planner saw: gpus, cpu_devices, tpu, per_host_replicas...
    reason: str
    role: str = "train"  # train | serve (ps and non-chief workers under ParameterServer) | evaluate
    communication: str = "auto"
    device: str | None = None  # for one_device
    steps_per_execution: int = 1  # training steps per call of Keras's compiled step (1 in older reports)
    execution_reason: str = ""

    @property
    def writes_the_model(self) -> bool:
        """Only the chief of the tasks that train saves the model."""
        return self.is_chief and self.role != "serve"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanRecord:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class TrainingReport:
    plan: PlanRecord
    epochs: int  # the epochs trained
    steps_per_epoch: int
    replicas_in_sync: int
    weights_checksum: float  # the sum of every weight (trainer_module/run_fn.py: weights_checksum)
    history: list[dict[str, float]]  # per epoch: its number, the metrics and the seconds it took
    metrics: dict[str, float]  # the last epoch's
    warm_start: dict[str, Any] | None = None  # {from, started, reason, weights_checksum} with training.warm_start

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # the plan too, as PlanRecord.to_json() writes it
        if self.warm_start is None:
            data.pop("warm_start")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingReport:
        fields = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**{**fields, "plan": PlanRecord.from_json(data["plan"])})

    def for_summary(self) -> dict[str, Any]:
        """The part a run's summary.json shows under `training` (the plan is its `strategy`)."""
        shown = {"epochs": self.epochs, "steps_per_epoch": self.steps_per_epoch, "metrics": self.metrics,
                 "history": self.history}
        return {**shown, "warm_start": self.warm_start} if self.warm_start is not None else shown


def write(model_dir: str, report: TrainingReport) -> str:
    """The report beside the model in the model artifact's folder ``model_dir``; its path."""
    from tfx.dsl.io import fileio  # start-up: the ground loads TFX's file systems only when asked

    path = os.path.join(model_dir, keys.TRAINING_REPORT_FILE)
    with fileio.open(path, "w") as handle:
        handle.write(json.dumps(report.to_json(), indent=2, sort_keys=True, default=str))
    return path


def read(model_dir: str) -> TrainingReport | None:
    """The report beside the model in ``model_dir``; None when the Trainer wrote none (a model of an older
    tfxd, or one that did not come from tfxd's Trainer)."""
    path = os.path.join(model_dir, keys.TRAINING_REPORT_FILE)
    reader = file_reader(path)
    if not reader.exists(path):
        return None
    with reader.open(path, "r") as handle:
        return TrainingReport.from_json(json.loads(handle.read()))
