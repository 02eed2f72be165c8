"""tfxd's Trainer component: TFX's Trainer interface with tfxd's executor and run_fn."""

from __future__ import annotations

from tfx.components.trainer.component import Trainer as TfxTrainer
from tfx.dsl.components.base import executor_spec

from tfxd.components.trainer import executor


class Trainer(TfxTrainer):
    """Trains the spec's model with the strategy the planner picks where it runs."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
