"""Validation in fewer, larger batches (run_fn.eval_schedule): the spec's eval_steps batches of the global batch
read as whole multiples of it, and Keras' own metrics over them the same as at the spec's batch size."""

from __future__ import annotations

import numpy as np
import pytest

from tfxd.trainer_module.run_fn import EVAL_BATCH_EXAMPLES, eval_schedule


@pytest.mark.parametrize(("eval_steps", "global_batch", "expected"), [
    (150, 40, (400, 15)),  # taxi: the most that divides 150 within 512 examples is 10
    (7, 40, (280, 1)),  # a prime number of steps: all of them, within the limit
    (7, 100, (100, 7)),  # 2 x 100 is within 512 but 2 does not divide 7: as the spec says
    (10, 256, (512, 5)),
    (10, 1024, (1024, 10)),  # a batch larger than the limit is never split nor merged
    (1, 40, (40, 1)),
])
def test_the_same_examples_in_fewer_batches(eval_steps, global_batch, expected):
    batch, steps = eval_schedule(eval_steps, global_batch)
    assert (batch, steps) == expected
    assert batch * steps == global_batch * eval_steps and batch % global_batch == 0
    assert batch <= max(global_batch, EVAL_BATCH_EXAMPLES)


def _validation(batch: int, steps: int) -> dict[str, float]:
    """Keras' own evaluate of a compiled model on a repeated dataset, as fit validates (validation_steps of an
    endless dataset): its loss, binary accuracy and AUC."""
    import tensorflow as tf

    rng = np.random.default_rng(7)
    features = rng.normal(size=(2988, 6)).astype("float32")  # taxi's eval split size: batches cross its end
    labels = (features[:, 0] + rng.normal(scale=0.5, size=2988) > 0).astype("float32")
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(6,),
                                                       kernel_regularizer=tf.keras.regularizers.l2(0.01)),
                                 tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(loss="binary_crossentropy", metrics=["binary_accuracy", tf.keras.metrics.AUC(name="auc")])
    data = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(batch)
    return model.evaluate(data, steps=steps, verbose=0, return_dict=True)


def test_keras_metrics_are_the_same_over_the_merged_batches():
    """The judge is Keras' evaluate itself; it bites on a schedule that reads other examples (one batch more)."""
    asked = _validation(40, 150)
    merged = _validation(*eval_schedule(150, 40))
    assert set(merged) == {"loss", "binary_accuracy", "auc"}
    for name, value in asked.items():
        assert merged[name] == pytest.approx(value, rel=1e-6, abs=1e-7), name
    other = _validation(400, 16)
    assert other["loss"] != pytest.approx(asked["loss"], rel=1e-6)
