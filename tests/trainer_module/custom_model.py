"""A user's model builder, as `model.builder: tests.trainer_module.custom_model:build` names it."""

from __future__ import annotations


def build(spec, info):
    import tensorflow as tf

    inputs = {name: tf.keras.Input(shape=(1,), name=name, dtype=tf.float32)
              for name, feature in info["features"].items() if feature["kind"] == "float"}
    output = tf.keras.layers.Dense(1, activation="sigmoid")(tf.keras.layers.concatenate(list(inputs.values())))
    return tf.keras.Model(inputs, output)


def build_compiled(spec, info):
    """A builder that compiles its model itself (its own optimizer and loss; Keras's one step per call)."""
    model = build(spec, info)
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    return model
