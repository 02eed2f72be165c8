"""tfxd's baseline finder component: the candidate model and the push destination in, the baseline
model (or an empty one) out."""

from __future__ import annotations

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, component_spec, standard_artifacts

from tfxd.components.baseline import executor


class LatestPushedModelSpec(component_spec.ComponentSpec):
    PARAMETERS = {executor.PUSH_DESTINATION_KEY: component_spec.ExecutionParameter(type=str)}
    INPUTS = {executor.CANDIDATE_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model, optional=True)}
    OUTPUTS = {executor.MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model)}


class LatestPushedModel(base_component.BaseComponent):
    """The newest model pushed to ``push_destination`` other than ``candidate``: the Evaluator's baseline
    where TFX's resolver cannot run (the open-source Kubeflow Pipelines backend); without a candidate,
    the Trainer's base model for training.warm_start."""

    SPEC_CLASS = LatestPushedModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, candidate, push_destination: str) -> None:
        super().__init__(spec=LatestPushedModelSpec(
            **{executor.CANDIDATE_KEY: candidate, executor.PUSH_DESTINATION_KEY: push_destination,
               executor.MODEL_KEY: channel.Channel(type=standard_artifacts.Model)}))
