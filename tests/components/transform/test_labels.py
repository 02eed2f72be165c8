"""Labels in Transform: a value that is not a class of the task stops the run, naming the label, where
it comes from (column or expr) and the values. ExampleGen already refuses label columns of numbers
that are not classes (tests/components/example_gen/test_bad_data.py); this is where labels computed by
an expr, and string classes of a multiclass task, are checked."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest


def transformed_labels(label: dict, values: list) -> list:
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from tfxd.components.transform.preprocessing import preprocessing_fn

    dtype = tf.string if isinstance(values[0], str) else tf.int64
    rows = [{"x": [1.0], "y": [value.encode() if isinstance(value, str) else value]} for value in values]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec({
        "x": tf.io.VarLenFeature(tf.float32), "y": tf.io.VarLenFeature(dtype)}))
    config = {"features": [{"name": "f", "expr": "x", "transform": "identity", "fill": None}],
              "label": {"name": "outcome", "column": "y", "expr": None, "num_classes": None, **label}}
    with tempfile.TemporaryDirectory() as temp, tft_beam.Context(temp_dir=temp, force_tf_compat_v1=False):
        (out, _), _ = ((rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, config), output_record_batches=False))
    return [int(np.asarray(row["outcome"]).reshape(-1)[0]) for row in out]


BINARY = {"task": "binary"}
BY_EXPR = {"column": None}
MULTICLASS = {"task": "multiclass", "num_classes": 3}
NOT_CLASSES = "values that are not classes:"

# (id, label section, raw values of y, the labels, or a regex of the error)
LABEL_CASES = [
    ("binary-0-1", BINARY, [0, 1, 1, 0], [0, 1, 1, 0]),
    ("binary-2", BINARY, [0, 1, 2, 0],
     rf"label outcome \(column y\) is a binary label: 0 or 1 .* {NOT_CLASSES}\] \[2\]"),
    ("binary-expr-comparison", {**BINARY, **BY_EXPR, "expr": "y > 1"}, [0, 2, 5, 1], [0, 1, 1, 0]),
    ("binary-expr-of-numbers", {**BINARY, **BY_EXPR, "expr": "y * 3"}, [0, 1, 1, 0],
     rf"label outcome \(expr y \* 3\) is a binary label: 0 or 1 .*label\.expr \(e\.g\. tips > 0\).* "
     rf"{NOT_CLASSES}\] \[3"),
    ("binary-expr-of-halves", {**BINARY, **BY_EXPR, "expr": "y / 2"}, [0, 2, 5, 2],
     rf"label outcome \(expr y / 2\) is a binary label: 0 or 1 .* {NOT_CLASSES}\] \[2\.5\]"),
    ("multiclass-ids", MULTICLASS, [0, 1, 2, 1], [0, 1, 2, 1]),
    ("multiclass-id-beyond-num-classes", MULTICLASS, [0, 1, 2, 3],
     rf"label outcome \(column y\) is a multiclass label with num_classes 3: class ids 0 to 2.*"
     rf"raise label\.num_classes.* {NOT_CLASSES}\] \[3\]"),
    ("multiclass-strings", MULTICLASS, ["a", "b", "c", "a", "a", "b"], [0, 1, 2, 0, 0, 1]),
    ("multiclass-more-strings-than-classes", MULTICLASS, ["a", "b", "c", "d", "a", "a", "b", "b", "c"],
     rf"label outcome \(column y\) is a multiclass label with num_classes 3, and has more classes than "
     rf"that.* {NOT_CLASSES}\] \[d\]"),
]


@pytest.mark.parametrize(("label", "values", "expected"), [
    pytest.param(*case[1:], id=case[0], marks=[pytest.mark.reliability("bad data")] if isinstance(case[-1], str) else [])
    for case in LABEL_CASES])
def test_labels(label, values, expected):
    if isinstance(expected, str):
        with pytest.raises(Exception, match=expected):  # Beam re-raises as RuntimeError: match the message
            transformed_labels(label, values)
    else:
        assert transformed_labels(label, values) == expected
