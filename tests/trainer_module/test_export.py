"""trainer_module.export: the saved serving signature predicts as the model does, traced without AutoGraph
for a model of Keras' own layers (tfxd's model types) and with it for a custom model's layers."""

from __future__ import annotations

import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)

# isort: split
import numpy as np
import pytest
import tensorflow as tf

from tfxd import keys
from tfxd.trainer_module import export


class _Passing(tf.keras.layers.Layer):
    """Transform's layer, standing in: the raw features as they were parsed."""

    def call(self, features):
        return dict(features)


class _Transformed:
    """What the export asks of TFTransformOutput: its layer and the raw feature spec."""

    @staticmethod
    def transform_features_layer() -> tf.keras.layers.Layer:
        return _Passing()

    @staticmethod
    def raw_feature_spec() -> dict:
        return {"x": tf.io.FixedLenFeature([3], tf.float32), "y": tf.io.FixedLenFeature([], tf.float32)}


class _Doubling(tf.keras.layers.Layer):
    """A user's own layer: Keras converts its call under AutoGraph."""

    def call(self, inputs):
        return inputs * 2.0


def _model(custom: bool) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(7)
    inputs = tf.keras.Input(shape=(3,), name="x")
    hidden = _Doubling()(inputs) if custom else tf.keras.layers.Dense(4, activation="relu")(inputs)
    return tf.keras.Model({"x": inputs}, tf.keras.layers.Dense(1, activation="sigmoid")(hidden))


def _examples(rows: np.ndarray) -> tf.Tensor:
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in rows])


@pytest.mark.parametrize("custom", [False, True])
def test_the_saved_serving_signature_predicts_as_the_model_does(tmp_path, custom):
    model, rows = _model(custom), np.random.default_rng(3).normal(size=(5, 3)).astype("float32")
    export.save(model, _Transformed(), "y", ["y"], str(tmp_path / "model"), is_chief=True,
                builtin_layers=not custom)
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures[keys.SERVING_SIGNATURE]
    np.testing.assert_allclose(serve(examples=_examples(rows))["outputs"].numpy(), model({"x": rows}).numpy(),
                               rtol=1e-6)

