"""Keras's train and test steps traced once a fit, where they were traced four times and twice.

With several steps per call of the compiled step (the plan's steps_per_execution), tf_keras's
train_function is ``for _ in tf.range(steps): outputs = step_function(...)`` (tf_keras
engine/training.py, make_train_function; make_test_function likewise). ``outputs`` is undefined before
the loop, so AutoGraph stages the loop body once in a scratch graph to learn its type
(autograph/operators/control_flow.py, _try_handling_undefineds) and then again as the while loop's body.
And the train function's first trace makes variables (the optimizer's slots, the compiled loss's and
metrics'), so TensorFlow traces it again, where none may be made (polymorphic_function.py, _call): the
whole train step (forward, gradients, optimizer) was traced four times and the test step twice, about a
quarter of the taxi Trainer's time (bench/RESULTS.md).

So, for the fit: the model's own steps are tf.functions, traced at AutoGraph's first staging and called
again at the second (a tf.function's cache key holds no outer graph: it keys on the context under
init_scope, eager here); and those variables are made before it, as Keras makes them (the optimizer's
``build`` over the trainable variables, the loss and metrics containers' ``build`` from one prediction), on
an example of zeros shaped as the data's (dense features only; otherwise Keras makes them).

Only where one replica runs the step without a cross-replica merge (TensorFlow's default strategy and
OneDevice): under Mirrored, MultiWorkerMirrored and ParameterServer strategies the optimizer's gradient
aggregation is a merge_call, which TensorFlow refuses inside a nested tf.function. Not for a model that
runs eagerly (the function would compile it) or compiles its step with XLA (Keras wraps it itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tfxd.trainer_module.planner import Strategy

ONE_REPLICA_STRATEGIES = frozenset({Strategy.DEFAULT, Strategy.ONE_DEVICE})
STEPS = ("train_step", "test_step")


def applies(model: Any, strategy: Strategy) -> bool:
    """Whether ``model``'s steps are traced once under ``strategy`` (the docstring's conditions)."""
    return strategy in ONE_REPLICA_STRATEGIES and not model.run_eagerly and not model.jit_compile


@contextlib.contextmanager
def steps_traced_once(model: Any, strategy: Strategy, data: Any) -> Iterator[None]:
    """Within the block, ``model``'s train and test steps are tf.functions of its own and its training's
    variables are made (``data``: the train dataset, for the shapes); after it, the model's methods again
    (set past Keras's attribute tracking, so that nothing of them is saved with the model)."""
    if not applies(model, strategy):
        yield
        return
    import tensorflow as tf

    _variables_made(model, data)
    for name in STEPS:
        object.__setattr__(model, name, tf.function(getattr(model, name), reduce_retracing=True))
    try:
        yield
    finally:
        for name in STEPS:
            model.__dict__.pop(name, None)


def _variables_made(model: Any, data: Any) -> None:
    """The variables the train step's first trace would make, made now as Keras makes them; nothing where
    the optimizer is not Keras's own kind (a legacy one builds otherwise) or a feature is not dense."""
    import tensorflow as tf

    features, label = data.element_spec[:2]
    specs = tf.nest.flatten((features, label))
    if not isinstance(model.optimizer, tf.keras.optimizers.Optimizer) or not all(
            type(spec) is tf.TensorSpec and spec.shape.rank and spec.shape[1:].is_fully_defined() for spec in specs):
        return
    zeros = tf.nest.map_structure(lambda spec: tf.zeros([1, *spec.shape[1:]], spec.dtype), (features, label))
    model.optimizer.build(model.trainable_variables)  # as apply_gradients does on its first call
    predicted = model(zeros[0])
    model.compiled_loss.build(predicted)  # as their first call does (tf_keras engine/compile_utils.py)
    model.compiled_metrics.build(predicted, zeros[1])
