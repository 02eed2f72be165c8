"""The Evaluator's metrics per slice, read back with TFMA's own reader: for a run's summary and report, and
for the evaluation artifact's overall metrics (keys.METRICS_PROPERTY, the executor sets it)."""

from __future__ import annotations

from typing import Any

import tensorflow_model_analysis as tfma

from tfxd import keys


def slice_name(slice_key) -> str:
    """'Overall', or 'feature=value' joined by ', '."""
    parts = []
    for key in slice_key.single_slice_keys:
        kind = key.WhichOneof("kind")
        value = getattr(key, kind) if kind else ""
        value = value.decode() if isinstance(value, bytes) else value
        parts.append(f"{key.column}={value}")
    return ", ".join(parts) or keys.OVERALL_SLICE


def double_value(value) -> float | None:
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
            number = double_value(item.value)
            if number is not None:
                values[key.name] = number
        slices.append({"slice": slice_name(record.slice_key), "metrics": dict(sorted(values.items()))})
    slices.sort(key=lambda s: (s["slice"] != keys.OVERALL_SLICE, _natural(s["slice"])))
    return slices


def _natural(text: str) -> tuple:
    """'hour=10' after 'hour=9'."""
    name, _, value = text.rpartition("=")
    try:
        return (name, float(value), "")
    except ValueError:
        return (name, float("inf"), value)
