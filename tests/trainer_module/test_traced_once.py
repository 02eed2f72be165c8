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


class _Counting(tf.keras.Model):
    """A functional model (built from inputs and outputs, as tfxd's are) that counts its steps' traces:
    a step's Python body runs once per trace."""

    traces: Counter

    def train_step(self, data):
        self.traces["train_step"] += 1
        return super().train_step(data)

    def test_step(self, data):
        self.traces["test_step"] += 1
        return super().test_step(data)


def _model(steps_per_execution: int = 4) -> _Counting:
    tf.keras.utils.set_random_seed(7)
    inputs = tf.keras.Input(shape=(3,))
    hidden = tf.keras.layers.Dense(8, activation="relu")(inputs)
    model = _Counting(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(hidden))
    model.traces = Counter()
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="binary_crossentropy",
                  metrics=["binary_accuracy"], steps_per_execution=steps_per_execution)
    return model


def _data() -> tf.data.Dataset:
    features = np.random.default_rng(3).normal(size=(256, 3)).astype("float32")
    labels = (features.sum(axis=1) > 0).astype("float32")
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16)


def _fit(model: _Counting, strategy: Strategy, data: tf.data.Dataset | None = None) -> tf.keras.callbacks.History:
    data = data or _data()
    with steps_traced_once(model, strategy, data):
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


def test_with_a_feature_that_is_not_dense_keras_makes_the_variables_and_the_step_is_still_staged_once():
    ragged = _data().map(lambda x, y: ({"x": tf.RaggedTensor.from_tensor(x)}, y))
    inputs = tf.keras.Input(shape=(None,), ragged=True, name="x")
    model = _Counting(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(inputs.to_tensor(shape=[None, 3])))
    model.traces = Counter()
    model.compile(optimizer="adam", loss="binary_crossentropy", steps_per_execution=4)
    _fit(model, Strategy.DEFAULT, ragged)
    assert model.traces == {"train_step": 2, "test_step": 1}  # made by Keras's first trace, traced again


def test_after_the_fit_the_model_has_its_own_steps_and_saves_none_of_the_mends(tmp_path):
    model = _model()
    _fit(model, Strategy.ONE_DEVICE)
    assert "train_step" not in vars(model) and "test_step" not in vars(model)
    model.save(str(tmp_path / "model"), save_format="tf", save_traces=False)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    assert not hasattr(loaded, "train_step") and not hasattr(loaded, "test_step")
    model.traces.clear()
    model.compile(optimizer=model.optimizer, loss="binary_crossentropy", steps_per_execution=4)
    # Keras's own step loop again: one trace (the optimizer's variables exist now), the step staged twice
    model.fit(_data(), epochs=1, steps_per_epoch=4, verbose=0)
    assert model.traces == {"train_step": 2}


def test_the_steps_are_the_models_own_again_when_the_fit_fails():
    model = _model()
    with pytest.raises(ValueError, match="stopped"), steps_traced_once(model, Strategy.DEFAULT, _data()):
        assert isinstance(vars(model)["train_step"], tf.types.experimental.GenericFunction)
        raise ValueError("stopped")
    assert "train_step" not in vars(model) and "test_step" not in vars(model)


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
