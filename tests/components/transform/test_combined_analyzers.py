"""The analyzers of the generic preprocessing_fn are combined across features (one per figure over the features
stacked as columns; quantiles one per bucket count) and give what one analyzer per feature gave: the outputs of a
spec of every transform kind, on data with missing values in several batches, equal those of a reference with
analyzers of their own per feature (the implementation before they were combined), value for value, and so do
the vocabulary files (one analyzer for every vocabulary), byte for byte, with their registered names and sizes."""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path
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
# tokens tft.vocabulary leaves out of a text file (a line break in them), ties broken by the tokens' bytes
U = ["a\nb", "b", "c\r", "b", "a", "c", "a", "é", "b", "é", "a", "c"]
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
    feature("vsf", "s", "vocabulary", fill="none", frequency_threshold=2), feature("vu", "u", "vocabulary"),
    feature("vk", "k", "vocabulary", top_k=3), feature("ve", "e", "vocabulary", oov_buckets=1),
    feature("vs9", "s", "vocabulary", frequency_threshold=9),
    feature("hs", "s", "hash", buckets=5), feature("ht", "t", "hash", fill="?", buckets=7),
]
CONFIG = {"features": EVERY_KIND, "label": {"name": "label", "column": "y", "expr": None, "task": "binary"}}
# a label of string classes: its classes are a vocabulary too
STRING_CLASSES = {"features": [f for f in EVERY_KIND if f["transform"] == "vocabulary"],
                  "label": {"name": "label", "column": "u", "expr": None, "task": "multiclass", "num_classes": 9}}


def reference_fn(inputs: dict[str, Any], config: dict[str, Any], boundaries_over_filled: bool = False) -> dict:
    """The preprocessing_fn with analyzers of their own per feature, as before they were combined (with
    ``boundaries_over_filled``, a deliberate mistake: quantiles over the mean-filled values)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from tfxd.components.transform.expressions_tf import compile_expression
    from tfxd.components.transform.preprocessing import _checked, _Columns, _label, _strings

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
    raw = columns.get(label["column"])
    if raw.dtype == tf.string:
        ids = tft.compute_and_apply_vocabulary(raw, num_oov_buckets=0, default_value=-1, vocab_filename=label["name"])
        outputs[label["name"]] = _checked(label, ids < label["num_classes"], raw, "has more classes", ids)
    else:
        outputs[label["name"]] = _label(label, raw)
    return outputs


def transformed(preprocessing_fn: Any, tf_compat_v1: bool = False) -> dict[str, Any]:
    """Every output of ``preprocessing_fn`` on the data above, by tf.Transform's Beam implementation in
    batches of 5 (so the analyzers merge what they accumulated over several batches); in tf.Transform's
    TF1 graph mode when ``tf_compat_v1``, as the pipeline runs the generic preprocessing_fn. Under
    VOCABULARIES, by name: the file's name, its bytes and the vocabulary's size, as TFTransformOutput finds
    them in the transform graph WriteTransformFn wrote."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from tfxd.direct_runner import direct_args

    def listed(value: Any) -> list:
        return [] if value is None else [value]

    rows = [{"a": listed(a), "b": listed(b), "c": [c], "e": listed(e), "k": listed(k), "s": listed(s),
             "t": listed(t), "u": u.encode(), "v": v, "y": [y]}
            for a, b, c, e, k, s, t, u, v, y in zip(A, B, C, E, K, S, T, U, V, Y, strict=True)]
    numbers = {column: tf.io.VarLenFeature(tf.float32) for column in "abcek"}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec({
        **numbers, "s": tf.io.VarLenFeature(tf.string), "t": tf.io.VarLenFeature(tf.string),
        "u": tf.io.FixedLenFeature([], tf.string),
        "v": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.VarLenFeature(tf.int64)}))
    with tempfile.TemporaryDirectory() as temp, tft_beam.Context(temp_dir=temp, desired_batch_size=5,
                                                                 force_tf_compat_v1=tf_compat_v1):
        with beam.Pipeline(argv=direct_args("in_memory", 1)) as pipeline:
            (out, _), transform_fn = ((pipeline | beam.Create(rows, reshuffle=False), metadata)
                                      | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn,
                                                                            output_record_batches=False))
            _ = out | beam.combiners.ToList() | beam.Map(_keep, temp)
            _ = transform_fn | tft_beam.WriteTransformFn(f"{temp}/output")
        with open(f"{temp}/rows.pickle", "rb") as handle:
            out = pickle.load(handle)
        graph = tft.TFTransformOutput(f"{temp}/output")
        asset_map = Path(temp, "output", "transformed_metadata", graph.ASSET_MAP)
        names = sorted(json.loads(asset_map.read_text())) if asset_map.exists() else []
        vocabularies = {}
        for name in names:
            with open(graph.vocabulary_file_by_name(name), "rb") as handle:
                vocabularies[name] = (os.path.basename(handle.name), handle.read(), graph.vocabulary_size_by_name(name))
    return {**{name: np.array([row[name] for row in out]) for name in out[0]}, VOCABULARIES: vocabularies}


VOCABULARIES = "(vocabularies)"


def _keep(rows: list, folder: str) -> None:
    with open(f"{folder}/rows.pickle", "wb") as handle:
        pickle.dump(rows, handle)


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    return transformed(lambda inputs: reference_fn(inputs, CONFIG))


def assert_same(outputs: dict[str, Any], expected: dict[str, Any]) -> None:
    assert set(outputs) == set(expected)
    assert outputs[VOCABULARIES] == expected[VOCABULARIES]
    for name in sorted(set(expected) - {VOCABULARIES}):
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
    files = {name: contents for name, (_, contents, _) in reference[VOCABULARIES].items()}
    assert files["vu"] == "b\na\né\nc\n".encode()  # no line breaks; ties: the larger token first
    assert files["vk"] == b"1\n2\n0\n"  # numbers as tokens, the top 3
    assert files["ve"] == files["vs9"] == b"49d0cd50-04bb-48c0-bc6f-5b575dce351a\n"  # none: tf.Transform's token
    assert reference[VOCABULARIES]["ve"][2] == 1 and set(reference["ve"]) == {1}  # all out of it: the oov bucket


@pytest.mark.parametrize("tf_compat_v1", [False, True], ids=["tf2", "tf1-graph"])
def test_string_classes_are_numbered_as_before(tf_compat_v1):
    """A label of string classes shares the one vocabulary analyzer with the features and keeps its ids and file."""
    from tfxd.components.transform.preprocessing import preprocessing_fn

    expected = transformed(lambda inputs: reference_fn(inputs, STRING_CLASSES))
    assert_same(transformed(lambda inputs: preprocessing_fn(inputs, STRING_CLASSES), tf_compat_v1), expected)
    assert list(expected["label"]) == [-1, 0, -1, 0, 1, 3, 1, 2, 0, 2, 1, 3]  # b, a, é, c; -1 where filtered out


def test_the_comparison_sees_boundaries_computed_over_the_filled_values(reference):
    """The comparison bites: quantiles over the mean-filled values instead of those present move buckets."""
    config = {**CONFIG, "features": [f for f in EVERY_KIND if f["name"] == "bb"]}
    mistaken = transformed(lambda inputs: reference_fn(inputs, config, boundaries_over_filled=True))
    with pytest.raises(AssertionError, match="feature bb"):
        assert_same(mistaken, {"bb": reference["bb"], "label": reference["label"], VOCABULARIES: {}})


def test_the_comparison_sees_a_vocabulary_ordered_otherwise(reference, monkeypatch):
    """The comparison bites on files too: ties broken the other way (smaller token first) give another file."""
    from tfxd.components.transform import analyzers
    from tfxd.components.transform.preprocessing import preprocessing_fn

    def ties_ascending(pairs, key=None, reverse=False):
        return sorted(pairs, key=key or (lambda pair: (-pair[0], pair[1])), reverse=bool(key) and reverse)

    monkeypatch.setattr(analyzers, "sorted", ties_ascending, raising=False)
    mistaken = transformed(lambda inputs: preprocessing_fn(inputs, {**CONFIG, "features": [
        f for f in EVERY_KIND if f["name"] == "vu"]}))
    assert mistaken[VOCABULARIES]["vu"][1] == "a\nb\nc\né\n".encode()
    with pytest.raises(AssertionError):
        assert_same(mistaken, {"vu": reference["vu"], "label": reference["label"],
                               VOCABULARIES: {"vu": reference[VOCABULARIES]["vu"]}})


def analyzer_scopes(features: list[dict]) -> list[str]:
    """The name scope of every analyzer tf.Transform finds in the traced preprocessing_fn."""
    import tensorflow as tf
    from tensorflow_transform import analyzer_nodes

    from tfxd.components.transform.preprocessing import preprocessing_fn

    config = {"features": features, "label": {"name": "label", "column": "y", "expr": None, "task": "regression"}}
    with tf.compat.v1.Graph().as_default() as graph:
        inputs = {column: tf.compat.v1.placeholder(tf.float32, [None]) for column in "abceky"}
        inputs.update({column: tf.compat.v1.placeholder(tf.string, [None]) for column in "stu"})
        preprocessing_fn(inputs, config)
        sinks = graph.get_collection(analyzer_nodes.TENSOR_REPLACEMENTS)
    # an analyzer's outputs share its scope: "mean", "quantiles_1", "vocabularies"
    return sorted({sink.tensor.name.split("/")[0] for sink in sinks})


@pytest.mark.parametrize("copies", [1, 10])
def test_analyzers_do_not_grow_with_the_features(copies):
    """Every numeric figure is one analyzer for all features, quantiles one per bucket count, every vocabulary
    one analyzer for all, however many features there are."""
    features = [dict(f, name=f"{f['name']}_{i}") for i in range(copies) for f in EVERY_KIND if f["expr"] != "v"]
    scopes = analyzer_scopes(features)
    assert scopes == ["max", "mean", "min", "quantiles", "quantiles_1", "quantiles_2", "var", "vocabularies"]
    assert sum(f["transform"] == "vocabulary" for f in features) == 7 * copies


@pytest.mark.parametrize(("top_k", "threshold"), [(None, 0), (3, 0), (3, 4), (50, 2), (1, 0)])
def test_a_vocabulary_is_pruned_as_if_sorted_whole_however_it_is_combined(top_k, threshold):
    """Counts added and merged in any grouping keep what sorting them all and cutting would: the tokens at or
    above the threshold, largest (count, token) first, the first top_k (a heap of top_k while combining)."""
    import random

    from tfxd.components.transform.analyzers import _Pruned

    draw = random.Random(7)
    counted = [(0, draw.randint(1, 9), f"t{i}".encode()) for i in range(40)]
    pruned = _Pruned([("v", top_k, threshold)])
    expected = sorted(((count, token) for _, count, token in counted if count >= threshold), reverse=True)[:top_k]
    for _ in range(5):
        draw.shuffle(counted)
        parts = [counted[i::3] for i in range(3)] + [[None]]  # several accumulators, the every-vocabulary marker
        accumulators = []
        for part in parts:
            kept = pruned.create_accumulator()
            for value in part:
                kept = pruned.add_input(kept, value)
            accumulators.append(kept)
        merged = pruned.merge_accumulators([pruned.merge_accumulators(accumulators[:2]), *accumulators[2:]])
        assert pruned.extract_output(merged) == expected
    assert pruned.extract_output(pruned.add_input(pruned.create_accumulator(), None)) == []
