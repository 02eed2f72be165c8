"""The spec's `evaluation` section as a TFMA EvalConfig: metrics by name, thresholds, slices, and the
model's own transform_features signature to read the label from raw examples."""

from __future__ import annotations

import json
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf import wrappers_pb2

from tfxd import keys
from tfxd.metrics import LOWER, METRICS
from tfxd.pipeline.spec.document import Spec


def eval_config(spec: Spec):
    """Metrics by name (each under the spec's name), `min`/`max` as value thresholds, `max_drop` as a
    change threshold against the blessed baseline, `slices` as feature lists; the label is read from
    the transformed features, so the Evaluator takes raw examples."""
    task = spec.label.task
    metrics = list(spec.evaluation.metrics or [])
    if "example_count" not in metrics:
        metrics.append("example_count")
    configs = []
    for name in metrics:
        metric = METRICS[name]
        config = tfma.MetricConfig(class_name=metric.tfma(task), config=json.dumps({**metric.config, "name": name}))
        threshold = spec.evaluation.thresholds.get(name)
        if threshold is not None:
            config.threshold.CopyFrom(_threshold(name, threshold))
        configs.append(config)
    return tfma.EvalConfig(
        # TFMA calls the model's signatures by name, which a plain SavedModel load (tf_generic) gives in
        # half the time tf_keras takes to revive the Keras model around them; naming the type spares TFMA a
        # trial load to find it out
        model_specs=[tfma.ModelSpec(signature_name=keys.SERVING_SIGNATURE, label_key=spec.label.name,
                                    model_type=tfma.constants.TF_GENERIC,
                                    preprocessing_function_names=[keys.TRANSFORM_FEATURES_SIGNATURE])],
        slicing_specs=[tfma.SlicingSpec(feature_keys=list(keys)) for keys in spec.evaluation.slices],
        metrics_specs=[tfma.MetricsSpec(metrics=configs)],
        # no default metrics: the Keras model's compiled loss and metrics would make TFMA load each model
        # a second time, the baseline too, for figures the spec did not ask for
        options=tfma.Options(include_default_metrics=wrappers_pb2.BoolValue(value=False)))


def _threshold(name: str, threshold) -> Any:
    result = tfma.MetricThreshold()
    if threshold.min is not None:
        result.value_threshold.lower_bound.value = threshold.min
    if threshold.max is not None:
        result.value_threshold.upper_bound.value = threshold.max
    if threshold.max_drop is not None:
        lower = METRICS[name].direction == LOWER
        result.change_threshold.direction = (tfma.MetricDirection.LOWER_IS_BETTER if lower
                                             else tfma.MetricDirection.HIGHER_IS_BETTER)
        # TFMA compares strictly; a max_drop of 0 means "not worse than the baseline"
        allowed = max(threshold.max_drop, 1e-10)
        result.change_threshold.absolute.value = allowed if lower else -allowed
    return result
