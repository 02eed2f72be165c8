"""The Evaluator's results read back in plain words: metrics per slice, and why a model was not
blessed (each failed check as a sentence)."""

from __future__ import annotations

from typing import Any

import tensorflow_model_analysis as tfma

OVERALL = "Overall"


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
    slices: list[dict[str, Any]] = []
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
