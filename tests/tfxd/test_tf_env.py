"""AutoGraph leaves tf_keras's and tf.Transform's own code alone (as it does the `keras` package) and
still converts user code."""

from __future__ import annotations

import os

from tfxd import tf_env


def user_layer_call(x):
    return x


def test_graph_libraries_are_not_converted_and_user_code_is(monkeypatch):
    import tensorflow as tf
    import tf_keras
    from tensorflow.python.autograph.core import config
    from tensorflow.python.autograph.impl import conversion
    from tensorflow_transform.output_wrapper import TransformFeaturesLayer

    assert os.environ["TF_USE_LEGACY_KERAS"] == "1" and tf.keras.layers.Dense is tf_keras.layers.Dense
    # before (as if no run had left them alone in this process yet): AutoGraph would transpile the
    # tf.Transform layer the Trainer's export signatures call
    monkeypatch.setattr(config, "CONVERSION_RULES", tuple(
        rule for rule in config.CONVERSION_RULES
        if not any(rule.matches(name) for name in tf_env.LEFT_TO_THEMSELVES)))
    assert not conversion.is_allowlisted(TransformFeaturesLayer.call)
    tf_env.leave_graph_libraries_to_themselves()
    tf_env.leave_graph_libraries_to_themselves()  # once is enough: no rule is added twice
    assert [sum(rule.matches(name) for rule in config.CONVERSION_RULES)
            for name in ("tf_keras", "tensorflow_transform")] == [1, 1]
    assert conversion.is_allowlisted(tf_keras.layers.Dense.call)
    assert conversion.is_allowlisted(tf_keras.Model.train_step)
    assert conversion.is_allowlisted(TransformFeaturesLayer.call)
    assert not conversion.is_allowlisted(user_layer_call)
