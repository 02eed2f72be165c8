"""Why the Evaluator did not bless a model, read back in plain words (each failed check as a sentence); the
metrics per slice are components/evaluator/slices.py's."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from tfxd.components.evaluator.slices import double_value, slice_name


def not_blessed_because(evaluation_uri: str) -> list[str]:
    """Why the Evaluator did not bless the model, one plain sentence per failed check."""
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
            value = double_value(failure.metric_value)
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
