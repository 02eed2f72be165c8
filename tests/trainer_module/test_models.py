"""The spec's models read their features in few layers (models._floats, _ids, _one_hot): consecutive
single-valued ids as one multi-hot over shifted ids, consecutive floats as one Concatenate.

The judge is Keras's own one-hot, a CategoryEncoding per feature (and a Flatten per float), the way the
models were built before: the same weights in the same order, the same predictions from the same
weights, the same refusal of an id outside its feature's range, and a checkpoint of the per-feature model
that warm-starts the new one (tf_keras's load_weights, as trainer_module.warm_start does)."""

from __future__ import annotations

import numpy as np
import pytest

from tfxd.trainer_module import models

# floats, ids with and without a cardinality, an embedding-sized id and a vector, interleaved
FEATURES = {
    "fare": {"kind": "float", "shape": [], "cardinality": None},
    "miles": {"kind": "float", "shape": [1], "cardinality": None},
    "hour": {"kind": "id", "shape": [], "cardinality": 24},
    "pixels": {"kind": "float", "shape": [2, 3], "cardinality": None},
    "day": {"kind": "id", "shape": [], "cardinality": 7},
    "count": {"kind": "id", "shape": [], "cardinality": None},
    "company": {"kind": "id", "shape": [], "cardinality": 120},
    "payment": {"kind": "id", "shape": [1], "cardinality": 5},
    "month": {"kind": "id", "shape": [], "cardinality": 13},
}
INFO = {"features": FEATURES, "label": {"name": "tip", "task": "binary", "num_classes": None}}
SPEC = {"hidden_units": [8, 4], "dropout": 0.0, "optimizer": {"name": "adam", "learning_rate": 0.01},
        "metrics": ["binary_accuracy"]}


def _keras_reference(kind: str, order: list[str] | None = None):
    """The model of ``kind`` with a layer of Keras's own per feature: a Flatten per float, a Reshape and
    a one-hot CategoryEncoding per id (``order``: the wide ids' order, to show the judge biting)."""
    import tensorflow as tf

    inputs = models._inputs(FEATURES)
    floats = [tf.keras.layers.Flatten()(inputs[n]) for n, f in FEATURES.items() if f["kind"] == "float"]

    def one_hot(name: str):
        return tf.keras.layers.CategoryEncoding(num_tokens=FEATURES[name]["cardinality"], output_mode="one_hot")(
            tf.keras.layers.Reshape((1,))(inputs[name]))

    ids = [n for n, f in FEATURES.items() if f["kind"] == "id"]
    if kind == "wide_deep":
        wide = [one_hot(n) if FEATURES[n]["cardinality"] else tf.keras.layers.Flatten()(tf.cast(inputs[n], tf.float32))
                for n in (order or ids)]
        deep = models._stack(tf.keras.layers.concatenate(floats), SPEC["hidden_units"], 0.0)
        hidden = tf.keras.layers.concatenate([deep, *wide])
    else:  # dnn: ids without a cardinality left out, large ones embedded
        parts = []
        for name in (n for n in ids if FEATURES[n]["cardinality"]):
            size = FEATURES[name]["cardinality"]
            if size > models.EMBEDDING_FROM:
                width = min(32, max(4, int(round(size ** 0.25 * 4))))
                parts.append(tf.keras.layers.Flatten()(tf.keras.layers.Embedding(size, width)(inputs[name])))
            else:
                parts.append(one_hot(name))
        hidden = models._stack(tf.keras.layers.concatenate(floats + parts), SPEC["hidden_units"], 0.0)
    return tf.keras.Model(inputs, models._output(hidden, INFO["label"]))


def _batch(rows: int = 64, **overrides) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    batch = {}
    for name, feature in FEATURES.items():
        shape = (rows, *(feature["shape"] or [1]))
        if feature["kind"] == "float":
            batch[name] = rng.normal(size=shape).astype("float32")
        else:
            batch[name] = rng.integers(0, feature["cardinality"] or 50, size=shape).astype("int64")
    return {**batch, **overrides}


def _built(kind: str):
    return models.build({"model": {**SPEC, "type": kind}}, INFO)


@pytest.mark.parametrize("kind", ["wide_deep", "dnn"])
def test_the_same_columns_as_a_one_hot_per_feature(kind):
    model, reference = _built(kind), _keras_reference(kind)
    assert [list(w.shape) for w in model.weights[:len(reference.weights)]] == \
        [list(w.shape) for w in reference.weights]
    reference.set_weights(model.get_weights()[:len(reference.weights)])
    batch = _batch()
    np.testing.assert_allclose(model.predict(batch, verbose=0), reference.predict(batch, verbose=0), rtol=1e-6)
    # wide_deep: hour, day | count (no cardinality) | company, payment, month; dnn: hour, day | company
    # (embedded) | payment, month. An encoder (its checks, its one-hot) cost most of a feature's tracing.
    assert [_encoders(model), _encoders(reference)] == [2, 5 if kind == "wide_deep" else 4]


def _encoders(model) -> int:
    return sum(layer.__class__.__name__ == "CategoryEncoding" for layer in model.layers)


def test_the_judge_bites_on_ids_in_another_order():
    model = _built("wide_deep")
    order = ["day", "hour", "count", "company", "payment", "month"]
    reference = _keras_reference("wide_deep", order)
    reference.set_weights(model.get_weights()[:len(reference.weights)])
    batch = _batch()
    assert not np.allclose(model.predict(batch, verbose=0), reference.predict(batch, verbose=0), rtol=1e-3)


@pytest.mark.parametrize("bad", [-1, 24])
def test_an_id_outside_its_range_is_refused_as_keras_refuses_it(bad):
    """-1 (a vocabulary's unknown value without oov_buckets) or 24 for 24 hours: shifted past the features
    before it, it would have been another feature's column."""
    import tensorflow as tf

    batch = _batch(hour=np.full((64, 1), bad, dtype="int64"))
    for model in (_built("wide_deep"), _keras_reference("wide_deep")):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Input values must be in the range"):
            model.predict(batch, verbose=0)


def test_a_per_feature_models_checkpoint_warm_starts_it_and_a_saved_model_reloads(tmp_path):
    """An exported model of the per-feature layers (a base model of an earlier tfxd) restores into the new
    layers by warm_start's call; the new model saved as the Trainer saves it (no layer traces) is rebuilt
    by Keras from its config, as the Evaluator loads it, and predicts the same."""
    import tensorflow as tf

    reference, model = _keras_reference("wide_deep"), _built("wide_deep")
    reference.compile(optimizer="adam", loss="binary_crossentropy")
    reference.save_weights(str(tmp_path / "base" / "variables"))
    status = model.load_weights(str(tmp_path / "base" / "variables"))
    status.expect_partial()
    status.assert_existing_objects_matched()
    for mine, theirs in zip(model.weights, reference.weights, strict=False):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    model.save(str(tmp_path / "serving"), save_format="tf", save_traces=False)
    loaded = tf.keras.models.load_model(str(tmp_path / "serving"))
    batch = _batch()
    np.testing.assert_allclose(loaded.predict(batch, verbose=0), model.predict(batch, verbose=0), rtol=1e-6)
