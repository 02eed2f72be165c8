"""The analyzers of the generic preprocessing_fn, each over all the features that need it at once.

tf.Transform builds Beam stages per analyzer call, so with one call per feature those stages, not the data,
were most of Transform's time (30 z-scores: 30 means and 30 variances). Here every single-valued numeric feature
is a column of one stacked matrix, and each figure (mean, variance, min, max, quantile boundaries) comes from
one analyzer over its columns with ``reduce_instance_dims=False``: tf.Transform reduces each column on its own,
so each feature's figure is the one an analyzer of its own would give.

Not combined: vocabularies (tf.Transform has no analyzer that computes several vocabularies, each with its own
top_k, frequency threshold and file, in one call; one vocabulary over feature-prefixed tokens applies top_k
across all of them and numbers the tokens across all of them, so its ids and files would differ) and the
figures of fixed-length list features (reduced over all their values; rare, so they keep analyzers of their
own, see preprocessing._filled).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import analyzer_nodes
from tensorflow_transform import analyzers as tft_analyzers

NUMERIC = ("zscore", "minmax", "log", "bucketize", "categorical", "identity")


class Statistics:
    """The mean, variance, min, max and quantile boundaries of every single-valued numeric feature, from one
    analyzer per figure over all of them stacked as columns (one quantiles analyzer per bucket count: it
    takes one count for all its columns). NaN stands for a missing value: mean, variance and quantiles pass
    over it, so each column's figures are over the values present, as the analyzers of one feature over its
    present values; min and max see it as +inf / -inf."""

    def __init__(self, features: list[dict[str, Any]], raws: dict[str, tf.Tensor]) -> None:
        self._index: dict[str, int] = {}
        columns: list[tf.Tensor] = []
        by_buckets: dict[int, list[str]] = {}
        for feature in features:
            name, raw = feature["name"], raws[feature["name"]]
            if feature["transform"] in NUMERIC and raw.dtype != tf.string and raw.shape.rank == 1:
                self._index[name] = len(columns)
                columns.append(analyzed(tf.cast(raw, tf.float64), feature.get("fill")))
                if feature["transform"] == "bucketize":
                    by_buckets.setdefault(feature["buckets"], []).append(name)
        self._figures: dict[str, tf.Tensor] = {}
        self._boundaries: dict[str, tf.Tensor] = {}
        if not columns:
            return
        stacked = tf.stack(columns, axis=1)
        self._figures = {"mean": _columnwise(tft.mean, stacked), "variance": _columnwise(tft.var, stacked)}
        if any(feature["transform"] == "minmax" and feature["name"] in self._index for feature in features):
            # unlike mean and var, min and max keep NaN: a missing value is made one they pass over
            missing = tf.math.is_nan(stacked)
            self._figures["min"] = _columnwise(tft.min, tf.where(missing, tf.constant(math.inf, tf.float64), stacked))
            self._figures["max"] = _columnwise(tft.max, tf.where(missing, tf.constant(-math.inf, tf.float64), stacked))
        for buckets, names in sorted(by_buckets.items()):
            matrix = tf.stack([columns[self._index[name]] for name in names], axis=1)
            boundaries = _quantiles(matrix, buckets)
            for i, name in enumerate(names):  # [1, buckets - 1]: one feature's boundaries, as tft.apply_buckets takes them
                self._boundaries[name] = boundaries[i:i + 1]

    def of(self, name: str) -> dict[str, tf.Tensor] | None:
        """The feature's figures (scalars; its quantile boundaries under "boundaries", shaped [1, buckets - 1]
        for a bucketized one), or None for a feature that is not among the stacked ones."""
        if name not in self._index:
            return None
        i = self._index[name]
        figures = {figure: values[i] for figure, values in self._figures.items()}
        if name in self._boundaries:
            figures["boundaries"] = self._boundaries[name]
        return figures


def epsilon(buckets: int) -> float:
    """The quantiles' error tolerance for ``buckets`` buckets, tft.bucketize's."""
    return min(1.0 / buckets, 0.01)


def _quantiles(matrix: tf.Tensor, buckets: int) -> tf.Tensor:
    """tft.quantiles(matrix, buckets, epsilon(buckets), reduce_instance_dims=False), with its combiner made to
    give a column without any value the zero boundaries tft.quantiles gives one such feature (see
    _QuantilesCombiner)."""
    columns = int(matrix.shape[1])
    combiner = _QuantilesCombiner(buckets, epsilon(buckets), np.float32, output_shape=[columns, buckets - 1],
                                  feature_shape=[columns])
    with tf.compat.v1.name_scope(None, "quantiles"):  # tf.Transform labels an analyzer's nodes by its scope
        (boundaries,) = tft_analyzers.apply_cacheable_combine_operation(combiner, matrix)
        return analyzer_nodes.wrap_as_tensor(boundaries)


class _QuantilesCombiner(tft_analyzers.QuantilesCombiner):
    """tf.Transform's quantiles combiner that also keeps which columns had a value. Its sketch (tfx_bsl's
    QuantilesSketch) leaves a column without any value (every one missing) out of its quantiles, so those of
    the columns after it would no longer line up and tf.Transform would fail to shape them; here such a column
    gets zero boundaries in its place, as tft.quantiles gives a feature of its own without any value."""

    def create_accumulator(self) -> tuple[Any, np.ndarray]:
        return super().create_accumulator(), np.zeros(self._num_features, bool)

    def add_input(self, accumulator: tuple[Any, np.ndarray], next_input: list[np.ndarray]) -> tuple[Any, np.ndarray]:
        sketch, valued = accumulator
        valued = valued | ~np.isnan(np.reshape(next_input[0], [-1, self._num_features])).all(axis=0)
        return super().add_input(sketch, next_input), valued

    def merge_accumulators(self, accumulators: Any) -> tuple[Any, np.ndarray]:
        sketches, valued = zip(*accumulators, strict=True)
        return super().merge_accumulators(sketches), np.logical_or.reduce(valued)

    def compact(self, accumulator: tuple[Any, np.ndarray]) -> tuple[Any, np.ndarray]:
        sketch, valued = accumulator
        return super().compact(sketch), valued

    def extract_output(self, accumulator: tuple[Any, np.ndarray]) -> list[np.ndarray]:
        sketch, valued = accumulator
        quantiles = iter(sketch.GetQuantiles(self._num_quantiles).to_pylist())  # those of valued columns only
        inner = self._num_quantiles - 1  # without the min and the max, as tft.quantiles
        rows = [next(quantiles)[1:-1] if has_values else [0.0] * inner for has_values in valued]
        return [np.reshape(np.array(rows, self._bucket_numpy_dtype), self._output_shape)]


def _columnwise(analyzer: Any, stacked: tf.Tensor) -> tf.Tensor:
    """One figure per column of ``stacked``, as a vector even for one column (tf.Transform hands the
    value of a one-column analyzer back as a scalar)."""
    return tf.reshape(tf.cast(analyzer(stacked, reduce_instance_dims=False), tf.float64), [-1])


def analyzed(values: tf.Tensor, fill: Any) -> tf.Tensor:
    """What the analyzers see: the values with a constant fill in place (it is part of the statistics),
    or with NaN where missing (left out of them)."""
    if fill is None:
        return values
    return tf.where(tf.math.is_nan(values), tf.constant(float(fill), tf.float64), values)
