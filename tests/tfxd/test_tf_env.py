"""AutoGraph leaves tf_keras's own code alone (as it does the `keras` package) and still converts
user code."""

from __future__ import annotations

import os

from tfxd import tf_env


def user_layer_call(x):
    return x


def test_tf_keras_is_not_converted_and_user_code_is():
    import tensorflow as tf
    import tf_keras
    from tensorflow.python.autograph.core import config
    from tensorflow.python.autograph.impl import conversion

    assert os.environ["TF_USE_LEGACY_KERAS"] == "1" and tf.keras.layers.Dense is tf_keras.layers.Dense
    tf_env.leave_tf_keras_to_itself()
    tf_env.leave_tf_keras_to_itself()  # once is enough: the rule is not added twice
    assert sum(rule.matches("tf_keras") for rule in config.CONVERSION_RULES) == 1
    assert conversion.is_allowlisted(tf_keras.layers.Dense.call)
    assert conversion.is_allowlisted(tf_keras.Model.train_step)
    assert not conversion.is_allowlisted(user_layer_call)
