"""The analyzers of the generic preprocessing_fn are combined across features (one per figure over the features
stacked as columns; quantiles one per bucket count) and give what one analyzer per feature gave: the outputs of a
spec of every transform kind, on data with missing values in several batches, equal those of a reference with
analyzers of their own per feature (the implementation before they were combined), value for value."""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pytest

from tfxd.transforms import TRANSFORMS

A = [1.0, 2.0, None, 4.0, 5.0, None, 8.0, 10.0, 3.5, None, 7.25, 6.0]
B = [0.5, None, 9.0, 2.0, 2.0, 7.0, None, 1.0, 4.0, 3.0, 8.0, 6.5]
C = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0]  # never missing
E = [None] * len(A)  # no value at all: its quantiles are zeros, whether alone or among others
K = [0, 1, 2, 2, 5, 1, None, 3, 0, 4, 9, 1]
S = ["red", "blue", None, "red", "green", "red", "blue", None, "red", "teal", "blue", "red"]
T = ["x", None, "y", "x", "z", "x", "y", "x", None, "w", "y", "x"]
V = [[float(i), float(i * i % 7)] for i in range(len(A))]  # a fixed-length list: analyzers of its own
Y = [0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 0]


def feature(name: str, expr: str, transform: str, fill: Any = None, **options: Any) -> dict:
    return {"name": name, "expr": expr, "transform": transform, "fill": fill,
            **{**TRANSFORMS[transform].options, **options}}


EVERY_KIND = [
    feature("za", "a", "zscore"), feature("zb", "b", "zscore", fill=0.0), feature("zc", "c", "zscore"),
    feature("zv", "v", "zscore"), feature("mv", "v", "minmax"), feature("bv", "v", "bucketize", buckets=3),
    feature("ma", "a", "minmax"), feature("mb", "b", "minmax", fill=20.0), feature("mab", "a + b", "minmax"),
    feature("la", "a", "log"), feature("lb", "b", "log", fill=1.0),
    feature("ba", "a", "bucketize", buckets=3), feature("bb", "b", "bucketize", buckets=3),
    feature("bc", "c", "bucketize", buckets=4), feature("bb4", "b", "bucketize", fill=2.0, buckets=4),
    feature("ba5", "a", "bucketize", buckets=5), feature("be", "e", "bucketize", buckets=3),
    feature("ia", "a", "identity"), feature("ib", "b", "identity", fill=-1.0),
    feature("ck", "k", "categorical", num_buckets=6), feature("ck0", "k", "categorical", fill=0, num_buckets=6),
    feature("vs", "s", "vocabulary"), feature("vt", "t", "vocabulary", top_k=2, oov_buckets=2),
    feature("vsf", "s", "vocabulary", fill="none", frequency_threshold=2),
    feature("hs", "s", "hash", buckets=5), feature("ht", "t", "hash", fill="?", buckets=7),
]
CONFIG = {"features": EVERY_KIND, "label": {"name": "label", "column": "y", "expr": None, "task": "binary"}}


def reference_fn(inputs: dict[str, Any], config: dict[str, Any], boundaries_over_filled: bool = False) -> dict:
    """The preprocessing_fn with analyzers of their own per feature, as before they were combined (with
    ``boundaries_over_filled``, a deliberate mistake: quantiles over the mean-filled values)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from tfxd.components.transform.expressions_tf import compile_expression
    from tfxd.components.transform.preprocessing import _Columns, _label, _strings

    columns = _Columns(inputs)
    outputs = {}
    for f in config["features"]:
        name, kind, fill, raw = f["name"], f["transform"], f["fill"], compile_expression(f["expr"], columns.get)
        if kind == "vocabulary":
            outputs[name] = tft.compute_and_apply_vocabulary(
                _strings(raw, fill), top_k=f["top_k"] or None, frequency_threshold=f["frequency_threshold"] or None,
                num_oov_buckets=f["oov_buckets"], vocab_filename=name)
            continue
        if kind == "hash":
            outputs[name] = tf.strings.to_hash_bucket_fast(_strings(raw, fill), f["buckets"])
            continue
        values = tf.cast(raw, tf.float64)
        missing = tf.math.is_nan(values)
        seen = tf.where(missing, tf.constant(float(fill), tf.float64), values) if fill is not None \
            else tf.boolean_mask(values, tf.logical_not(missing))
        mean = tf.cast(tft.mean(seen), tf.float64)
        filled = seen if fill is not None else tf.where(missing, mean, values)
        if kind == "zscore":
            deviation = tf.sqrt(tf.cast(tft.var(seen), tf.float64))
            centred = filled - mean
            outputs[name] = tf.cast(tf.where(deviation > 0, centred / tf.where(deviation > 0, deviation, 1.0),
                                             centred), tf.float32)
        elif kind == "minmax":
            low, high = tf.cast(tft.min(seen), tf.float64), tf.cast(tft.max(seen), tf.float64)
            span = high - low
            outputs[name] = tf.cast(tf.where(span > 0, (filled - low) / tf.where(span > 0, span, 1.0),
                                             tf.fill(tf.shape(filled), tf.constant(0.5, tf.float64))), tf.float32)
        elif kind == "log":
            outputs[name] = tf.cast(tf.math.log1p(filled), tf.float32)
        elif kind == "bucketize":
            buckets = f["buckets"]
            boundaries = tft.quantiles(filled if boundaries_over_filled else seen, buckets,
                                       epsilon=min(1.0 / buckets, 0.01))
            outputs[name] = tft.apply_buckets(filled, boundaries)
        elif kind == "categorical":
            outputs[name] = tf.clip_by_value(tf.cast(tf.round(filled), tf.int64), 0, f["num_buckets"] - 1)
        else:
            outputs[name] = tf.cast(filled, tf.float32)
    label = config["label"]
    outputs[label["name"]] = _label(label, columns.get(label["column"]))
    return outputs


def transformed(preprocessing_fn: Any, tf_compat_v1: bool = False) -> dict[str, np.ndarray]:
    """Every output of ``preprocessing_fn`` on the data above, by tf.Transform's Beam implementation in
    batches of 5 (so the analyzers merge what they accumulated over several batches); in tf.Transform's
    TF1 graph mode when ``tf_compat_v1``, as the pipeline runs the generic preprocessing_fn."""
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    def listed(value: Any) -> list:
        return [] if value is None else [value]

    rows = [{"a": listed(a), "b": listed(b), "c": [c], "e": listed(e), "k": listed(k), "s": listed(s),
             "t": listed(t), "v": v, "y": [y]} for a, b, c, e, k, s, t, v, y in zip(A, B, C, E, K, S, T, V, Y, strict=True)]
    numbers = {column: tf.io.VarLenFeature(tf.float32) for column in "abcek"}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec({
        **numbers, "s": tf.io.VarLenFeature(tf.string), "t": tf.io.VarLenFeature(tf.string),
        "v": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.VarLenFeature(tf.int64)}))
    with tempfile.TemporaryDirectory() as temp, tft_beam.Context(temp_dir=temp, desired_batch_size=5,
                          force_tf_compat_v1=tf_compat_v1):
        (out, _), _ = ((rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing_fn, output_record_batches=False))
    return {name: np.array([row[name] for row in out]) for name in out[0]}


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    return transformed(lambda inputs: reference_fn(inputs, CONFIG))


def assert_same(outputs: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert set(outputs) == set(expected)
    for name in sorted(expected):
        np.testing.assert_array_equal(outputs[name], expected[name], err_msg=f"feature {name}")


@pytest.mark.parametrize("tf_compat_v1", [False, True], ids=["tf2", "tf1-graph"])
def test_every_kind_gives_what_analyzers_per_feature_gave(reference, tf_compat_v1):
    """In both of tf.Transform's modes: the pipeline runs the generic preprocessing_fn in TF1 graph mode
    (pipeline/assembly/dag.py), the reference runs per-feature analyzers in TF2 mode."""
    from tfxd.components.transform.preprocessing import preprocessing_fn

    assert {f["transform"] for f in EVERY_KIND} == set(TRANSFORMS)
    outputs = transformed(lambda inputs: preprocessing_fn(inputs, CONFIG), tf_compat_v1)
    assert_same(outputs, reference)
    assert len(set(reference["ba"])) == 3 and len(set(reference["bc"])) == 4  # the buckets are used
    assert set(reference["be"]) == {2}  # zero boundaries, a NaN fill: the last bucket


def test_the_comparison_sees_boundaries_computed_over_the_filled_values(reference):
    """The comparison bites: quantiles over the mean-filled values instead of those present move buckets."""
    config = {**CONFIG, "features": [f for f in EVERY_KIND if f["name"] == "bb"]}
    mistaken = transformed(lambda inputs: reference_fn(inputs, config, boundaries_over_filled=True))
    with pytest.raises(AssertionError, match="feature bb"):
        assert_same(mistaken, {name: reference[name] for name in ("bb", "label")})


def analyzer_scopes(features: list[dict]) -> list[str]:
    """The name scope of every analyzer tf.Transform finds in the traced preprocessing_fn."""
    import tensorflow as tf
    from tensorflow_transform import analyzer_nodes

    from tfxd.components.transform.preprocessing import preprocessing_fn

    config = {"features": features, "label": {"name": "label", "column": "y", "expr": None, "task": "regression"}}
    with tf.compat.v1.Graph().as_default() as graph:
        inputs = {column: tf.compat.v1.placeholder(tf.float32, [None]) for column in "abceky"}
        inputs.update(s=tf.compat.v1.placeholder(tf.string, [None]), t=tf.compat.v1.placeholder(tf.string, [None]))
        preprocessing_fn(inputs, config)
        sinks = graph.get_collection(analyzer_nodes.TENSOR_REPLACEMENTS)
    # an analyzer's outputs share its scope: "mean", "quantiles_1", "compute_and_apply_vocabulary_2/vocabulary"
    return sorted({"/".join(sink.tensor.name.split("/")[:2 if "vocabulary" in sink.tensor.name else 1])
                   for sink in sinks})


@pytest.mark.parametrize("copies", [1, 10])
def test_numeric_analyzers_do_not_grow_with_the_features(copies):
    """Every numeric figure is one analyzer for all features, quantiles one per bucket count; vocabularies keep
    one each (tf.Transform has no combined form that gives the same ids and files)."""
    numeric = [dict(f, name=f"{f['name']}_{i}") for i in range(copies) for f in EVERY_KIND
               if f["expr"] != "v" and TRANSFORMS[f["transform"]].reads == "number"]
    vocabularies = [f for f in EVERY_KIND if f["transform"] == "vocabulary"]
    scopes = analyzer_scopes(numeric + vocabularies)
    numeric_scopes = [scope for scope in scopes if "vocabulary" not in scope]
    assert numeric_scopes == ["max", "mean", "min", "quantiles", "quantiles_1", "quantiles_2", "var"], scopes
    assert len(scopes) - len(numeric_scopes) == len(vocabularies)
    assert len(scopes) < len(numeric) + len(vocabularies)
