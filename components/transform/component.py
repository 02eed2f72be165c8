"""tfxd's Transform component: TFX's Transform interface, with tfxd's executor."""

from __future__ import annotations

from tfx.components.transform.component import Transform as TfxTransform
from tfx.dsl.components.base import executor_spec

from tfxd.components.transform import executor


class Transform(TfxTransform):
    """Runs the spec's features (or the user's preprocessing_fn) on Beam; records feature kinds."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
