"""tfxd's Evaluator component: TFX's Evaluator interface, with tfxd's executor."""

from __future__ import annotations

from tfx.components.evaluator.component import Evaluator as TfxEvaluator
from tfx.dsl.components.base import executor_spec

from tfxd.components.evaluator import executor


class Evaluator(TfxEvaluator):
    """Evaluates the candidate against its thresholds and, when there is one, the baseline."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
