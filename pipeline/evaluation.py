"""The spec's `evaluation` section as a TFMA EvalConfig, and the Evaluator's results read back in plain
words (metrics per slice, and why a model was not blessed)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.spec import LOWER_IS_BETTER, Spec

# spec metric name -> (TFMA / Keras class name, extra config), for a task
_CLASSES: dict[str, Any] = {
    "accuracy": lambda task: ("BinaryAccuracy" if task == "binary" else "SparseCategoricalAccuracy", {}),
    "binary_accuracy": lambda task: ("BinaryAccuracy", {}),
    "categorical_accuracy": lambda task: ("SparseCategoricalAccuracy", {}),  # labels are class ids
    "sparse_categorical_accuracy": lambda task: ("SparseCategoricalAccuracy", {}),
    "sparse_top_k_categorical_accuracy": lambda task: ("SparseTopKCategoricalAccuracy", {}),
    "auc": lambda task: ("AUC", {}),
    "auc_pr": lambda task: ("AUC", {"curve": "PR"}),
    "precision": lambda task: ("Precision", {}),
    "recall": lambda task: ("Recall", {}),
    "binary_crossentropy": lambda task: ("BinaryCrossentropy", {}),
    "sparse_categorical_crossentropy": lambda task: ("SparseCategoricalCrossentropy", {}),
    "mean_squared_error": lambda task: ("MeanSquaredError", {}),
    "mean_absolute_error": lambda task: ("MeanAbsoluteError", {}),
    "root_mean_squared_error": lambda task: ("RootMeanSquaredError", {}),
    "mean_absolute_percentage_error": lambda task: ("MeanAbsolutePercentageError", {}),
    "example_count": lambda task: ("ExampleCount", {}),
    "mean_label": lambda task: ("MeanLabel", {}),
    "mean_prediction": lambda task: ("MeanPrediction", {}),
}
OVERALL = "Overall"
# the transform graph inside the exported model turns raw examples into the label and features
PREPROCESSING_SIGNATURE = "transform_features"


def eval_config(spec: Spec):
    """Metrics by name (each under the spec's name), `min`/`max` as value thresholds, `max_drop` as a
    change threshold against the blessed baseline, `slices` as feature lists; the label is read from
    the transformed features, so the Evaluator takes raw examples."""
    import tensorflow_model_analysis as tfma

    task = spec.label.task
    metrics = list(spec.evaluation.metrics or [])
    if "example_count" not in metrics:
        metrics.append("example_count")
    configs = []
    for name in metrics:
        class_name, options = _CLASSES[name](task)
        config = tfma.MetricConfig(class_name=class_name, config=json.dumps({**options, "name": name}))
        threshold = spec.evaluation.thresholds.get(name)
        if threshold is not None:
            config.threshold.CopyFrom(_threshold(name, threshold))
        configs.append(config)
    return tfma.EvalConfig(
        # the Trainer always exports a Keras model: saying so spares TFMA a trial load to find out
        model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key=spec.label.name,
                                    model_type=tfma.constants.TF_KERAS,
                                    preprocessing_function_names=[PREPROCESSING_SIGNATURE])],
        slicing_specs=[tfma.SlicingSpec(feature_keys=list(keys)) for keys in spec.evaluation.slices],
        metrics_specs=[tfma.MetricsSpec(metrics=configs)])


def _threshold(name: str, threshold) -> Any:
    import tensorflow_model_analysis as tfma

    result = tfma.MetricThreshold()
    if threshold.min is not None:
        result.value_threshold.lower_bound.value = threshold.min
    if threshold.max is not None:
        result.value_threshold.upper_bound.value = threshold.max
    if threshold.max_drop is not None:
        lower = name in LOWER_IS_BETTER
        result.change_threshold.direction = (tfma.MetricDirection.LOWER_IS_BETTER if lower
                                             else tfma.MetricDirection.HIGHER_IS_BETTER)
        # TFMA compares strictly; a max_drop of 0 means "not worse than the baseline"
        allowed = max(threshold.max_drop, 1e-10)
        result.change_threshold.absolute.value = allowed if lower else -allowed
    return result


def slice_name(slice_key) -> str:
    """'Overall', or 'feature=value' joined by ', '."""
    parts = []
    for key in slice_key.single_slice_keys:
        kind = key.WhichOneof("kind")
        value = getattr(key, kind) if kind else ""
        value = value.decode() if isinstance(value, bytes) else value
        parts.append(f"{key.column}={value}")
    return ", ".join(parts) or OVERALL


def _double(value) -> float | None:
    return value.double_value.value if value.HasField("double_value") else None


def metrics_per_slice(evaluation_uri: str) -> list[dict[str, Any]]:
    """[{"slice": "Overall" | "feature=value", "metrics": {name: value}}], the candidate model's, overall
    first."""
    import tensorflow_model_analysis as tfma

    slices = []
    for record in tfma.load_metrics(evaluation_uri):
        values = {}
        for item in record.metric_keys_and_values:
            key = item.key
            if key.is_diff or key.model_name not in ("", "candidate"):
                continue
            number = _double(item.value)
            if number is not None:
                values[key.name] = number
        slices.append({"slice": slice_name(record.slice_key), "metrics": dict(sorted(values.items()))})
    slices.sort(key=lambda s: (s["slice"] != OVERALL, _natural(s["slice"])))
    return slices


def _natural(text: str) -> tuple:
    """'hour=10' after 'hour=9'."""
    name, _, value = text.rpartition("=")
    try:
        return (name, float(value), "")
    except ValueError:
        return (name, float("inf"), value)


def not_blessed_because(evaluation_uri: str) -> list[str]:
    """Why the Evaluator did not bless the model, one plain sentence per failed check."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    if result.validation_ok:
        return []
    reasons = []
    if result.missing_thresholds:
        reasons.append("evaluation.thresholds is empty, and the Evaluator blesses only a model that passes a "
                       "threshold: add one, e.g. thresholds: {binary_accuracy: {min: 0.6}}")
    for per_slice in result.metric_validations_per_slice:
        where = slice_name(per_slice.slice_key)
        for failure in per_slice.failures:
            key = failure.metric_key
            value = _double(failure.metric_value)
            shown = f"{value:.4f}" if value is not None else "missing"
            what = f"{key.name} change against the baseline" if key.is_diff else key.name
            reasons.append(f"{what} on {where} is {shown}, outside the threshold "
                           f"({_describe(failure.metric_threshold)})")
    for missing in result.missing_slices:
        reasons.append(f"slice {slice_name(missing)} has no examples to check a threshold on")
    if not reasons:
        reasons.append("the Evaluator did not validate the model (see the run log)")
    return reasons


def _describe(threshold) -> str:
    parts = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound"):
            parts.append(f"min {bounds.lower_bound.value:g}")
        if bounds.HasField("upper_bound"):
            parts.append(f"max {bounds.upper_bound.value:g}")
    if threshold.HasField("change_threshold"):
        change = threshold.change_threshold.absolute.value
        parts.append(f"allowed change {change:+g} against the blessed baseline")
    return ", ".join(parts) or "no bound"
