"""The drift gate between spans: the train statistics of the newest span read against those of the newest
span present before it, by TFDV; and the skew gate between the train and eval splits, by the same
distances.

StatisticsGen's artifacts live per run, and on Kubeflow no resolver can find the previous run's, so the
gate keeps its own record in the pipeline root, which every runner writes: `<store>/<span>/` holds a
span's train statistics. Which two spans it compares is ExampleGen's decision, made from the spans
present, not from what earlier runs kept (keys.DRIFT_SPANS_PROPERTY): a span whose statistics the store
lacks (the gate was off when it was read, or it was read in a window, or never alone) is computed here
from its train examples, which ExampleGen wrote for it (keys.DRIFT_EXAMPLES_DIR), and kept. A run that
read one span has that span's statistics already (StatisticsGen's train split). Distances are TFDV's
drift comparator's: L-infinity for string columns, Jensen-Shannon divergence for numbers.
"""

from __future__ import annotations

import os
from typing import Any

from tfx.dsl.io import fileio

from tfxd import keys
from tfxd.direct_runner import direct_args

STATISTICS_FILE = keys.DRIFT_STATISTICS_FILE
TRAIN = "train"
EVAL = "eval"


def _order(label: str) -> tuple[int, str]:
    """Spans as stored (2026-11-23, or 42) in their order."""
    return (int(label), "") if label.isdigit() else (0, label)


def previous_span(store: str, newest: str) -> str | None:
    if not fileio.exists(store):
        return None
    spans = [name.rstrip("/") for name in fileio.listdir(store)]
    older = [span for span in spans if _order(span) < _order(newest)
             and fileio.exists(os.path.join(store, span, STATISTICS_FILE))]
    return max(older, key=_order) if older else None


def span_statistics(store: str, examples, span: str) -> str | None:
    """The path of ``span``'s train statistics in the store, computed (and kept) from the train examples
    ExampleGen wrote for it beside ``examples`` when the store lacks them; None when neither is there."""
    kept = os.path.join(store, span, STATISTICS_FILE)
    if fileio.exists(kept):
        return kept
    written = os.path.join(examples.uri, keys.DRIFT_EXAMPLES_DIR, span)
    if not fileio.glob(os.path.join(written, "*.gz")):
        return None
    import tempfile

    import tensorflow_data_validation as tfdv
    from apache_beam.options.pipeline_options import PipelineOptions

    with tempfile.TemporaryDirectory(prefix="tfxd-drift-") as scratch:
        # TFDV writes its own copy to a temporary folder it leaves unless told where (stats_gen_lib.py),
        # on Beam's default runner unless given options
        computed = tfdv.generate_statistics_from_tfrecord(
            os.path.join(written, "*.gz"), output_path=os.path.join(scratch, "tfdv-output.tfrecord"),
            pipeline_options=PipelineOptions(direct_args("in_memory", 1)))
        path = os.path.join(scratch, STATISTICS_FILE)
        with open(path, "wb") as handle:
            handle.write(computed.SerializeToString())
        keep(store, span, path)
    return kept


def keep(store: str, span: str, statistics_path: str) -> None:
    """Record this span's train statistics, written whole before they are seen (a copy, then a rename)."""
    target = os.path.join(store, span)
    fileio.makedirs(target)
    partial = os.path.join(target, f".{STATISTICS_FILE}.partial")
    fileio.copy(statistics_path, partial, overwrite=True)
    fileio.rename(partial, os.path.join(target, STATISTICS_FILE), overwrite=True)


def distances(current, other, schema, threshold: float, per_column: dict[str, float],
              columns: set[str] | None, skew: bool = False) -> dict[str, Any]:
    """{column: {distance, threshold, measure}} for the ``columns`` (those the pipeline reads; None: every
    column of ``schema``) both statistics describe: a column nothing reads may move freely. ``other`` is
    the previous span's statistics (drift), or with ``skew`` the eval split's (as TFDV's serving data)."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema.FromString(schema.SerializeToString())  # a copy to set comparators on
    for feature in schema.feature:
        if columns is not None and feature.name not in columns:
            continue
        limit = per_column.get(feature.name, threshold)
        comparator = feature.skew_comparator if skew else feature.drift_comparator
        if feature.type == schema_pb2.BYTES:
            comparator.infinity_norm.threshold = limit
        elif feature.type in (schema_pb2.INT, schema_pb2.FLOAT):
            comparator.jensen_shannon_divergence.threshold = limit
    anomalies = tfdv.validate_statistics(current, schema, **{"serving_statistics" if skew else "previous_statistics":
                                                              other})
    found = {}
    for info in anomalies.drift_skew_info:
        column = ".".join(info.path.step)
        for measurement in info.skew_measurements if skew else info.drift_measurements:
            found[column] = {"distance": round(measurement.value, 6), "threshold": measurement.threshold,
                             "measure": "L-infinity" if measurement.type == measurement.L_INFTY
                             else "Jensen-Shannon"}
    return found


def beyond(found: dict[str, Any]) -> dict[str, Any]:
    return {column: value for column, value in found.items() if value["distance"] > value["threshold"]}
