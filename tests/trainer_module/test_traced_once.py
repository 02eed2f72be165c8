"""trainer_module.traced_once: with several steps per call, Keras's train and test steps are traced once a
fit, not four times and twice (AutoGraph's scratch staging of the step loop: tf_keras training.py
make_train_function / make_test_function, autograph control_flow.py _try_handling_undefineds; and the
train function traced again after a first trace that made variables: polymorphic_function.py _call), and
the model trains to the same weights."""

from __future__ import annotations

from collections import Counter

import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)

# isort: split
import numpy as np
import pytest
import tensorflow as tf

from tfxd.trainer_module.planner import Strategy
from tfxd.trainer_module.traced_once import applies, steps_traced_once


class _Counting(tf.keras.layers.Layer):
    """Counts the traces of the steps it is called in: a layer's Python runs once per trace of a step
    (training=True in the train step, False in the test step), not when called eagerly."""

    def __init__(self, traces: Counter) -> None:
        super().__init__()
        self.traces = traces

    def call(self, inputs, training=None):
        if not tf.executing_eagerly():
            self.traces["train_step" if training else "test_step"] += 1
        return inputs


def _model(steps_per_execution: int = 4) -> tf.keras.Model:
    """A functional model, as tfxd's are, with ``traces``: its steps' traces."""
    tf.keras.utils.set_random_seed(7)
    traces: Counter = Counter()
    inputs = tf.keras.Input(shape=(3,))
    hidden = tf.keras.layers.Dense(8, activation="relu")(_Counting(traces)(inputs))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(hidden))
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="binary_crossentropy",
                  metrics=["binary_accuracy"], steps_per_execution=steps_per_execution)
    traces.clear()  # the functional model's construction called the layer on symbolic inputs
    model.traces = traces
    return model


def _data() -> tf.data.Dataset:
    features = np.random.default_rng(3).normal(size=(256, 3)).astype("float32")
    labels = (features.sum(axis=1) > 0).astype("float32")
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16)


def _fit(model: tf.keras.Model, strategy: Strategy, data: tf.data.Dataset | None = None,
         autograph: bool = False) -> tf.keras.callbacks.History:
    data = data or _data()
    with steps_traced_once(model, strategy, data, autograph):
        return model.fit(data, epochs=3, steps_per_epoch=8, validation_data=data, validation_steps=4, verbose=0)


def test_keras_traces_the_train_step_four_times_and_the_test_step_twice_mended_once_to_the_same_weights():
    keras_own, mended = _model(), _model()
    own_history = _fit(keras_own, Strategy.MIRRORED)  # not mended there: Keras's own fit
    mended_history = _fit(mended, Strategy.DEFAULT)
    # Keras traces its train function twice, since its first trace makes variables (the optimizer's slots,
    # the metrics'), and each trace stages the step twice
    assert keras_own.traces == {"train_step": 4, "test_step": 2}
    assert mended.traces == {"train_step": 1, "test_step": 1}

    def slots(model):  # the optimizer's variables' shapes (their names hold the layers', which differ)
        return sorted(tuple(v.shape) for v in model.optimizer.variables)

    assert slots(keras_own) == slots(mended) and len(slots(mended)) == 9  # iteration, m and v of 4 weights
    assert [m.name for m in keras_own.metrics] == [m.name for m in mended.metrics] == ["loss", "binary_accuracy"]
    for own, once in zip(keras_own.get_weights(), mended.get_weights(), strict=True):
        np.testing.assert_array_equal(own, once)
    assert own_history.history == mended_history.history


class _Branching(tf.keras.layers.Layer):
    """A user's layer with control flow on a tensor: Python's `if` on a tensor needs AutoGraph in a graph."""

    def call(self, inputs):
        if tf.reduce_sum(inputs) > 0:
            return inputs
        return -inputs


def _branching_model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(7)
    inputs = tf.keras.Input(shape=(3,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(_Branching()(inputs)))
    model.compile(optimizer="adam", loss="binary_crossentropy", steps_per_execution=4)
    return model


def test_steps_traced_without_autograph_train_the_same_weights_and_a_custom_layer_keeps_it_where_asked():
    with_autograph, without = _model(), _model()
    _fit(with_autograph, Strategy.DEFAULT, autograph=True)
    _fit(without, Strategy.DEFAULT, autograph=False)
    for one, other in zip(with_autograph.get_weights(), without.get_weights(), strict=True):
        np.testing.assert_array_equal(one, other)
    history = _fit(_branching_model(), Strategy.DEFAULT, autograph=True)  # Keras converts the layer's call
    assert len(history.history["loss"]) == 3
    # the bite: without AutoGraph in the step, Keras converts no layer's call, and the `if` cannot be traced
    with pytest.raises(ValueError, match="symbolic `tf.Tensor` as a Python `bool` is not allowed"):
        _fit(_branching_model(), Strategy.DEFAULT, autograph=False)


def test_with_a_feature_that_is_not_dense_keras_makes_the_variables_and_the_step_is_still_staged_once():
    ragged = _data().map(lambda x, y: ({"x": tf.RaggedTensor.from_tensor(x)}, y))
    traces: Counter = Counter()
    inputs = tf.keras.Input(shape=(None,), ragged=True, name="x")
    dense = _Counting(traces)(inputs.to_tensor(shape=[None, 3]))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(dense))
    model.compile(optimizer="adam", loss="binary_crossentropy", steps_per_execution=4)
    traces.clear()
    _fit(model, Strategy.DEFAULT, ragged)
    assert traces == {"train_step": 2, "test_step": 1}  # made by Keras's first trace, traced again


def test_after_the_fit_keras_has_its_own_steps_and_the_model_saves_none_of_the_mends(tmp_path):
    keras_steps = (tf.keras.Model.train_step, tf.keras.Model.test_step)
    model, other = _model(), _model()
    with steps_traced_once(model, Strategy.ONE_DEVICE, _data(), autograph=False):
        assert tf.keras.Model.train_step is not keras_steps[0]
        other.fit(_data(), epochs=1, steps_per_epoch=4, verbose=0)  # another model in the block: Keras's steps
        model.fit(_data(), epochs=1, steps_per_epoch=4, verbose=0)
    assert other.traces == {"train_step": 4} and model.traces == {"train_step": 1}
    assert (tf.keras.Model.train_step, tf.keras.Model.test_step) == keras_steps
    assert "train_step" not in vars(model) and "test_step" not in vars(model)
    model.save(str(tmp_path / "model"), save_format="tf", save_traces=False)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    assert not hasattr(loaded, "train_step") and not hasattr(loaded, "test_step")
    model.traces.clear()
    model.compile(optimizer=model.optimizer, loss="binary_crossentropy", steps_per_execution=4)
    # Keras's own step loop again: one trace (the optimizer's variables exist now), the step staged twice
    model.fit(_data(), epochs=1, steps_per_epoch=4, verbose=0)
    assert model.traces == {"train_step": 2}


def test_keras_has_its_own_steps_again_when_the_fit_fails():
    keras_step = tf.keras.Model.train_step
    with pytest.raises(ValueError, match="stopped"), steps_traced_once(_model(), Strategy.DEFAULT, _data(), autograph=False):
        assert tf.keras.Model.train_step is not keras_step
        raise ValueError("stopped")
    assert tf.keras.Model.train_step is keras_step


@pytest.mark.parametrize("strategy", [Strategy.MIRRORED, Strategy.MULTI_WORKER_MIRRORED,
                                      Strategy.PARAMETER_SERVER, Strategy.TPU])
def test_strategies_that_merge_across_replicas_keep_kerass_steps(strategy):
    assert not applies(_model(), strategy)


def test_a_model_that_runs_eagerly_or_compiles_with_xla_keeps_kerass_steps():
    assert applies(_model(), Strategy.DEFAULT)
    eager = _model()
    eager.run_eagerly = True
    assert not applies(eager, Strategy.DEFAULT)
    xla = _model()
    xla.jit_compile = True
    assert not applies(xla, Strategy.ONE_DEVICE)
