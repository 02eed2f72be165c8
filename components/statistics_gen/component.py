"""tfxd's StatisticsGen component: TFX's StatisticsGen interface, with tfxd's executor."""

from __future__ import annotations

from tfx.components.statistics_gen.component import StatisticsGen as TfxStatisticsGen
from tfx.dsl.components.base import executor_spec

from tfxd.components.statistics_gen import executor


class StatisticsGen(TfxStatisticsGen):
    """TFDV's statistics of every split, as TFX's StatisticsGen computes them (same artifact, same files)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
