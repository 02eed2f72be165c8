"""The generic preprocessing_fn on tf.Transform's own Beam implementation, in memory: mean fills,
z-scores, min-max and buckets over the values present, in one analysis phase."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from tfxd.components.transform.preprocessing import preprocessing_fn

# a column with two missing values (sparse, as TFX reads a CSV column that is sometimes empty)
X = [1.0, 2.0, None, 4.0, 5.0, None, 8.0, 10.0]
CONSTANT = [3.0] * len(X)
LABEL = [0, 1, 0, 1, 1, 0, 1, 0]


def transformed(features: list[dict], x: list | None = None, y: list | None = None) -> dict[str, np.ndarray]:
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    rows = [{"x": v if isinstance(v, list) else [] if v is None else [v], "c": [c], "y": [] if label is None else [label]}
            for v, c, label in zip(x or X, CONSTANT, y or LABEL, strict=True)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec({
        "x": tf.io.VarLenFeature(tf.float32), "c": tf.io.VarLenFeature(tf.float32),
        "y": tf.io.VarLenFeature(tf.int64)}))
    config = {"features": features, "label": {"name": "label", "column": "y", "expr": None, "task": "binary"}}
    with tempfile.TemporaryDirectory() as temp, tft_beam.Context(temp_dir=temp, force_tf_compat_v1=False):
        (out, _), _ = ((rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, config), output_record_batches=False))
    return {name: np.array([row[name] for row in out]).reshape(len(out), -1)[:, 0] for name in out[0]}


def feature(name: str, column: str, transform: str, **extra) -> dict:
    return {"name": name, "expr": column, "transform": transform, "fill": None, **extra}


def test_mean_fill_and_statistics_over_the_values_present():
    out = transformed([feature("z", "x", "zscore"), feature("m", "x", "minmax"), feature("i", "x", "identity"),
                       feature("b", "x", "bucketize", buckets=2), feature("zc", "c", "zscore"),
                       feature("mc", "c", "minmax"), {**feature("zf", "x", "zscore"), "fill": 0.0}])
    present = np.array([v for v in X if v is not None])
    mean, std = present.mean(), present.std()
    filled = np.array([mean if v is None else v for v in X])
    np.testing.assert_allclose(out["i"], filled, rtol=1e-6)  # missing values take the mean of those present
    np.testing.assert_allclose(out["z"], (filled - mean) / std, rtol=1e-5, atol=1e-6)
    assert out["z"][2] == pytest.approx(0.0, abs=1e-6) and out["z"][5] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(out["m"], (filled - present.min()) / (present.max() - present.min()), rtol=1e-5)
    assert set(out["b"]) == {0, 1} and out["b"][0] == 0 and out["b"][-1] == 1
    np.testing.assert_allclose(out["zc"], 0.0, atol=1e-6)  # a constant column is centred, not divided by 0
    np.testing.assert_allclose(out["mc"], 0.5)
    np.testing.assert_array_equal(out["label"], LABEL)
    zero_filled = np.array([0.0 if v is None else v for v in X])  # a constant fill is part of the statistics
    np.testing.assert_allclose(out["zf"], (zero_filled - zero_filled.mean()) / zero_filled.std(), rtol=1e-5,
                               atol=1e-6)



def test_a_column_with_several_values_in_a_record_is_refused_by_name():
    with pytest.raises(Exception, match="column x has records with several values; tfxd transforms single values"):
        transformed([feature("z", "x", "zscore")], x=[[1.0, 2.0], *X[1:]])


def test_thirty_numeric_features_are_analyzed_by_one_analyzer_per_figure():
    """tf.Transform builds Beam stages per analyzer: the features' means and variances (and min/max) come
    from one analyzer each over all of them, not three or four per feature."""
    import tensorflow as tf
    from tensorflow_transform import analyzer_nodes

    names = [f"x{i}" for i in range(30)]
    config = {"features": [feature(name, name, "zscore" if i % 3 else "minmax") for i, name in enumerate(names)],
              "label": {"name": "label", "column": "y", "expr": None, "task": "regression"}}
    with tf.compat.v1.Graph().as_default() as graph:
        inputs = {name: tf.compat.v1.placeholder(tf.float32, [None]) for name in [*names, "y"]}
        outputs = preprocessing_fn(inputs, config)
        analyzers = graph.get_collection(analyzer_nodes.TENSOR_REPLACEMENTS)
    assert set(outputs) == {*names, "label"}
    scopes = sorted(sink.tensor.name.split("/")[0] for sink in analyzers)  # an analyzer has two outputs
    assert scopes == ["max", "max", "mean", "mean", "min", "min", "var", "var"], scopes


def test_a_negative_value_under_log_is_refused_by_name():
    with pytest.raises(Exception, match="feature l: log needs values >= 0 and found a negative one"):
        transformed([feature("l", "x", "log")], x=[-1.0, *X[1:]])


def test_a_missing_label_is_refused():
    with pytest.raises(Exception, match="label label is missing in some records"):
        transformed([feature("z", "x", "zscore")], y=[None, *LABEL[1:]])


def test_the_graph_holds_what_the_features_use_and_its_checks_no_cond():
    """Every op of the traced graph is written and loaded again (twice per run, and by the Trainer): the
    checks are plain Assert ops (a tf.cond is two functions and a call per batch), a stacked feature has
    no analyzer input of its own (boolean_mask) and its figures come from one Unpack per figure, not a
    slice per feature."""
    import tensorflow as tf

    kinds = ["zscore", "minmax", "log", "bucketize", "identity", "categorical"]
    features = [feature(f"f{i}", f"x{i}", kind, **({"buckets": 4} if kind == "bucketize" else {}),
                        **({"num_buckets": 3} if kind == "categorical" else {}))
                for i, kind in enumerate(kinds * 3)]
    config = {"features": features, "label": {"name": "label", "column": "y", "expr": None, "task": "binary"}}
    with tf.compat.v1.Graph().as_default() as graph:
        inputs = {f"x{i}": tf.compat.v1.sparse_placeholder(tf.float32, [None, None]) for i in range(len(features))}
        inputs["y"] = tf.compat.v1.placeholder(tf.int64, [None, 1])
        preprocessing_fn(inputs, config)
    ops = graph.get_operations()
    assert not graph.as_graph_def().library.function
    assert not [op.name for op in ops if op.type in ("If", "StatelessIf")]
    assert len([op for op in ops if op.type == "Assert"]) == len(features) + 3 + 2  # columns, logs, label
    masks = {op.name.split("/")[0] for op in ops if "boolean_mask" in op.name}
    assert len(masks) == 1, masks  # the label check's values that are not classes; none per feature
    assert sorted(op.name for op in ops if op.type == "Unpack") == ["unstack", "unstack_1", "unstack_2", "unstack_3"]
    assert not [op.name for op in ops if op.type == "StridedSlice" and op.inputs[0].op.type == "Reshape"]  # figures
