"""The generic preprocessing_fn: the spec's `features` and `label` (from Transform's custom_config) as tf.Transform.

Imported by dotted path (``tfxd.components.transform.preprocessing.preprocessing_fn``)
from the pipeline image, so no user module is packaged or staged. Every transform of tfxd.transforms
is implemented in ``_transform``.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from tfxd import keys
from tfxd.components.transform.analyzers import (
    Statistics,
    Vocabulary,
    analyzed,
    epsilon,
    vocabularies,
)
from tfxd.components.transform.expressions_tf import compile_expression


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, tf.Tensor]:
    columns = _Columns(inputs)
    features = custom_config[keys.FEATURES]
    raws = {feature["name"]: compile_expression(feature["expr"], columns.get) if feature.get("expr")
            else columns.get(feature["name"]) for feature in features}
    label = custom_config[keys.LABEL]
    raw_label = compile_expression(label["expr"], columns.get) if label.get("expr") else columns.get(label["column"])
    strings = {feature["name"]: _strings(raws[feature["name"]], feature.get("fill"))
               for feature in features if feature["transform"] == "vocabulary"}
    wanted = [Vocabulary(feature["name"], strings[feature["name"]], feature["top_k"] or None,
                         feature["frequency_threshold"] or None) for feature in features if feature["name"] in strings]
    if _string_classes_wanted(label, raw_label):
        wanted.append(Vocabulary(label["name"], raw_label, None, None))
    files = vocabularies(wanted)
    statistics = Statistics(features, raws)
    outputs: dict[str, tf.Tensor] = {}
    for feature in features:
        name = feature["name"]
        if name in strings:
            outputs[name] = tft.apply_vocabulary(strings[name], files[name], num_oov_buckets=feature["oov_buckets"])
        else:
            outputs[name] = _transform(name, raws[name], feature, statistics)
    outputs[label["name"]] = _string_classes(label, raw_label, files[label["name"]]) \
        if label["name"] in files else _label(label, raw_label)
    return outputs


class _Columns:
    """Raw inputs made dense: numbers as float64 (exact for integers below 2**53) with NaN where missing,
    strings with "" where missing."""

    def __init__(self, inputs: dict[str, Any]) -> None:
        self._inputs = inputs
        self._dense: dict[str, tf.Tensor] = {}

    def get(self, name: str) -> tf.Tensor:
        if name not in self._dense:
            if name not in self._inputs:
                known = ", ".join(sorted(self._inputs))
                raise KeyError(f"column {name!r} is not in the data; the data has: {known}")
            self._dense[name] = _dense(name, self._inputs[name])
        return self._dense[name]


def _dense(name: str, tensor: Any) -> tf.Tensor:
    string = tensor.dtype == tf.string
    default = b"" if string else float("nan")
    if not string:
        tensor = _cast_values(tensor, tf.float64)
    if isinstance(tensor, tf.SparseTensor):  # a column that may be empty: at most one value per record
        one_at_most = _assert(tensor.dense_shape[1] <= 1, f"column {name} has records with several values; "
                              "tfxd transforms single values and fixed-length lists")
        with tf.control_dependencies([one_at_most]):
            single = tf.SparseTensor(tensor.indices, tensor.values, [tensor.dense_shape[0], 1])
            return tf.squeeze(tf.sparse.to_dense(single, default_value=default), axis=1)
    if isinstance(tensor, tf.RaggedTensor):
        too_many = _assert(tf.reduce_all(tensor.row_lengths() <= 1), f"column {name} has records with several "
                           "values; tfxd transforms single values and fixed-length lists")
        with tf.control_dependencies([too_many]):
            tensor = tensor.to_tensor(default_value=default, shape=[None, 1])
    if tensor.shape.rank == 2 and tensor.shape[1] == 1:
        tensor = tf.squeeze(tensor, axis=1)
    return tensor


def _assert(condition: tf.Tensor, message: str) -> tf.Operation:
    """A check that stops the run with ``message`` where ``condition`` is false. Its data is the message alone:
    tf.Assert guards data of other types with a tf.cond (two functions in the graph per check, which every
    load of the transform graph imports and each batch calls), and tf.debugging's assert_* add their operands.
    (No quotes in messages: TensorFlow escapes them in assertion messages.)"""
    return tf.debugging.Assert(condition, [message])


def _cast_values(tensor: Any, dtype: tf.DType) -> Any:
    if isinstance(tensor, tf.SparseTensor):
        return tf.SparseTensor(tensor.indices, tf.cast(tensor.values, dtype), tensor.dense_shape)
    if isinstance(tensor, tf.RaggedTensor):
        return tensor.with_flat_values(tf.cast(tensor.flat_values, dtype))
    return tf.cast(tensor, dtype)


def _filled(name: str, values: tf.Tensor, feature: dict[str, Any], figures: dict[str, tf.Tensor] | None
            ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """(values with missing numbers (NaN) replaced by the feature's ``fill``, their figures).

    Filled by default with the mean of the values present; then the analyzers (z-score, min/max,
    quantiles) see the values present, not the filled ones. The mean is the same either way and
    min/max too, while tf.Transform needs no second pass over the data for analyzers that would
    otherwise depend on the mean: one analysis phase instead of two. A feature outside the stacked
    statistics (a fixed-length list) gets analyzers of its own, only those its transform needs."""
    if values.dtype == tf.string:
        raise ValueError(f"feature {name!r}: this transform needs numbers, and the column holds strings; "
                         "use vocabulary or hash")
    kind, fill = feature["transform"], feature.get("fill")
    values = tf.cast(values, tf.float64)
    # only what the feature needs is built: every op left in the graph is traced, written and loaded again
    filled = analyzed(values, fill) if fill is not None else None
    if figures is None:
        seen = filled if filled is not None else tf.boolean_mask(values, tf.logical_not(tf.math.is_nan(values)))
        wanted = {"mean": tft.mean, **({"variance": tft.var} if kind == "zscore" else {}),
                  **({"min": tft.min, "max": tft.max} if kind == "minmax" else {})}
        figures = {figure: tf.cast(analyzer(seen), tf.float64) for figure, analyzer in wanted.items()}
        if kind == "bucketize":
            figures["boundaries"] = tft.quantiles(seen, feature["buckets"], epsilon(feature["buckets"]))
    if filled is None:
        filled = tf.where(tf.math.is_nan(values), figures["mean"], values)
    return filled, figures


def _z_score(values: tf.Tensor, figures: dict[str, tf.Tensor]) -> tf.Tensor:
    """(values - mean) / standard deviation; centred only where it is constant."""
    centred = values - figures["mean"]
    deviation = tf.sqrt(figures["variance"])
    return tf.where(deviation > 0, centred / tf.where(deviation > 0, deviation, 1.0), centred)


def _zero_one(values: tf.Tensor, figures: dict[str, tf.Tensor]) -> tf.Tensor:
    """(values - min) / (max - min); 0.5 throughout where it is constant."""
    low, high = figures["min"], figures["max"]
    span = high - low
    half = tf.fill(tf.shape(values), tf.constant(0.5, tf.float64))
    return tf.where(span > 0, (values - low) / tf.where(span > 0, span, 1.0), half)


def _strings(values: tf.Tensor, fill: Any) -> tf.Tensor:
    if values.dtype != tf.string:
        number = tf.cast(values, tf.float64)
        integral = tf.equal(tf.floor(number), number)
        text = tf.where(integral, tf.strings.as_string(tf.cast(tf.where(integral, number, 0.0), tf.int64)),
                        tf.strings.as_string(number))
        values = tf.where(tf.math.is_nan(number), tf.constant(b""), text)
    if fill is not None:
        values = tf.where(tf.equal(values, b""), tf.constant(str(fill).encode("utf-8")), values)
    return values


def _transform(name: str, raw: tf.Tensor, feature: dict[str, Any], statistics: Statistics) -> tf.Tensor:
    """Every transform but vocabulary (preprocessing_fn applies the vocabularies, computed together)."""
    kind, fill = feature["transform"], feature.get("fill")
    if kind == "hash":
        return tf.strings.to_hash_bucket_fast(_strings(raw, fill), feature["buckets"])
    values, figures = _filled(name, raw, feature, statistics.of(name))
    if kind == "zscore":
        return tf.cast(_z_score(values, figures), tf.float32)
    if kind == "minmax":
        return tf.cast(_zero_one(values, figures), tf.float32)
    if kind == "log":
        check = _assert(tf.reduce_all(values >= 0.0), f"feature {name}: log needs values >= 0 and found a "
                        "negative one; use zscore, or an expr such as log(abs(x) + 1)")
        with tf.control_dependencies([check]):
            return tf.cast(tf.math.log1p(values), tf.float32)
    if kind == "bucketize":
        return tft.apply_buckets(values, figures["boundaries"])
    if kind == "categorical":
        ids = tf.cast(tf.round(values), tf.int64)
        return tf.clip_by_value(ids, 0, feature["num_buckets"] - 1)
    if kind == "identity":
        return tf.cast(values, tf.float32)
    raise ValueError(f"feature {name!r}: transform {kind!r} is in tfxd.transforms but not implemented here")


def _label(label: dict[str, Any], raw: tf.Tensor) -> tf.Tensor:
    """The label as the Trainer reads it; a value that is not a class of the task stops the run, naming
    the label, where it comes from and the values (ExampleGen checks label columns of numbers already;
    these checks cover expr labels and string classes)."""
    name, task = label["name"], label["task"]
    if raw.dtype == tf.string:
        raise ValueError(f"label {name!r}: a {task} label needs numbers; for strings use an expr "
                         "such as \"answer == 'yes'\" (binary) or task multiclass")
    values = tf.cast(raw, tf.float64)
    present = _assert(tf.logical_not(tf.reduce_any(tf.math.is_nan(values))),
                      f"label {name} is missing in some records; drop them or compute the label with an expr")
    with tf.control_dependencies([present]):
        values = tf.identity(values)
    if task == "regression":
        return tf.cast(values, tf.float32)
    if task == "binary":
        is_class = tf.logical_or(tf.equal(values, 0.0), tf.equal(values, 1.0))
        why = ("is a binary label: 0 or 1 (false or true), and has other values; compute it with a comparison "
               "in label.expr (e.g. tips > 0), or use task multiclass")
        return _checked(label, is_class, values, why, tf.cast(tf.equal(values, 1.0), tf.int64))
    classes = label["num_classes"]
    is_class = (tf.equal(tf.floor(values), values)) & (values >= 0.0) & (values < float(classes))
    why = (f"is a multiclass label with num_classes {classes}: class ids 0 to {classes - 1}, and has other "
           "values; fix the data or raise label.num_classes")
    return _checked(label, is_class, values, why, tf.cast(values, tf.int64))


def _string_classes_wanted(label: dict[str, Any], raw: tf.Tensor) -> bool:
    """Whether the label is string classes, numbered by a vocabulary of the training data."""
    return label["task"] == "multiclass" and raw.dtype == tf.string


def _string_classes(label: dict[str, Any], raw: tf.Tensor, vocabulary: tf.Tensor) -> tf.Tensor:
    """String classes -> ids by their vocabulary (most frequent first): more classes than num_classes stop
    the run. (A class the training data lacks gets -1, which the Trainer refuses; it is not checked here:
    while tf.Transform analyzes, every id is -1.)"""
    classes = label["num_classes"]
    ids = tft.apply_vocabulary(raw, vocabulary, default_value=-1, num_oov_buckets=0)
    why = (f"is a multiclass label with num_classes {classes}, and has more classes than that; raise "
           "label.num_classes or fix the data")
    return _checked(label, ids < classes, raw, why, ids)


def _checked(label: dict[str, Any], is_class: tf.Tensor, values: tf.Tensor, why: str,
             result: tf.Tensor) -> tf.Tensor:
    """``result``, once every value is a class; else the run stops showing up to 10 values that are not.
    (No quotes in the message: TensorFlow escapes them in assertion messages.)"""
    source = f"column {label['column']}" if label.get("column") else f"expr {label.get('expr')}"
    others = tf.boolean_mask(values, tf.logical_not(is_class))
    # shown as strings (no tf.cond, see _assert); numbers as a person writes them: 2.5, not 2.500000
    shown = others if others.dtype == tf.string else tf.strings.as_string(tf.cast(others, tf.float64),
                                                                          shortest=True, precision=15)
    check = tf.debugging.Assert(tf.reduce_all(is_class),
                                [f"label {label['name']} ({source}) {why}; values that are not classes:", shown],
                                summarize=10)
    with tf.control_dependencies([check]):
        return tf.identity(result)
