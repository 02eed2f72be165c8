"""tfxd's ExampleValidator component: TFX's interface plus ``fail_on_anomalies`` and the drift and skew gates."""

from __future__ import annotations

import json

from tfx.components.example_validator.component import ExampleValidator as TfxExampleValidator
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, component_spec, standard_artifacts, standard_component_specs

from tfxd.components.example_validator import executor


class ExampleValidatorSpec(standard_component_specs.ExampleValidatorSpec):
    PARAMETERS = {**standard_component_specs.ExampleValidatorSpec.PARAMETERS,
                  executor.FAIL_ON_ANOMALIES_KEY: component_spec.ExecutionParameter(type=int),
                  executor.GATED_COLUMNS_KEY: component_spec.ExecutionParameter(type=str),
                  executor.DRIFT_KEY: component_spec.ExecutionParameter(type=str, optional=True),
                  executor.SKEW_KEY: component_spec.ExecutionParameter(type=str, optional=True),
                  executor.LABEL_KEY: component_spec.ExecutionParameter(type=str, optional=True)}
    INPUTS = {**standard_component_specs.ExampleValidatorSpec.INPUTS,
              executor.EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples, optional=True)}


class ExampleValidator(TfxExampleValidator):
    """Validates statistics against the schema; with fail_on_anomalies, anomalies in ``gated_columns``
    (the columns the pipeline reads; all columns when empty) stop the run, the others are logged. With
    ``drift`` (validation.drift, plus the ``store`` of statistics per span) and the ``examples`` (whose
    spans it reads), the train statistics are compared with the previous span's (drift.py); with ``skew``
    (validation.skew), with the eval split's. With ``label`` (a multiclass label's column and num_classes),
    its classes are checked split by split (classes.py)."""

    SPEC_CLASS = ExampleValidatorSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, statistics, schema, fail_on_anomalies: bool, gated_columns: list[str],
                 drift: dict | None = None, examples=None, skew: dict | None = None,
                 label: dict | None = None) -> None:
        spec = ExampleValidatorSpec(
            statistics=statistics, schema=schema, exclude_splits="[]", custom_validation_config=None,
            anomalies=channel.Channel(type=standard_artifacts.ExampleAnomalies),
            **{executor.FAIL_ON_ANOMALIES_KEY: int(fail_on_anomalies),
               executor.GATED_COLUMNS_KEY: json.dumps(sorted(gated_columns)),
               executor.DRIFT_KEY: json.dumps(drift, sort_keys=True) if drift else None,
               executor.SKEW_KEY: json.dumps(skew, sort_keys=True) if skew else None,
               executor.LABEL_KEY: json.dumps(label, sort_keys=True) if label else None,
               **({executor.EXAMPLES_KEY: examples} if examples is not None else {})})
        base_component.BaseComponent.__init__(self, spec=spec)
