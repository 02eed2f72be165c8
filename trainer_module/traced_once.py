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

So, for the fit: Keras's Model.train_step and test_step call a tf.function of themselves for the model
being fit (tfxd/patches.py, keras.steps_traced_once), traced at AutoGraph's first staging and called again
at the second (a tf.function's cache key holds no outer graph: it keys on the context under init_scope,
eager here); and those variables are made before it, as Keras makes them (the optimizer's ``build`` over
the trainable variables, the loss and metrics containers' ``build`` from one prediction), on an example of
zeros shaped as the data's (dense features only; otherwise Keras makes them). A model whose class has its
own steps keeps them (a custom model's train_step that calls Keras's gets it).

Only where one replica runs the step without a cross-replica merge (TensorFlow's default strategy and
OneDevice): under Mirrored, MultiWorkerMirrored and ParameterServer strategies the optimizer's gradient
aggregation is a merge_call, which TensorFlow refuses inside a nested tf.function. Not for a model that
runs eagerly (the function would compile it) or compiles its step with XLA (Keras wraps it itself).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from tfxd import patches
from tfxd.trainer_module.planner import Strategy

ONE_REPLICA_STRATEGIES = frozenset({Strategy.DEFAULT, Strategy.ONE_DEVICE})
STEPS = ("train_step", "test_step")


def applies(model: Any, strategy: Strategy) -> bool:
    """Whether ``model``'s steps are traced once under ``strategy`` (the docstring's conditions)."""
    return strategy in ONE_REPLICA_STRATEGIES and not model.run_eagerly and not model.jit_compile


@contextlib.contextmanager
def steps_traced_once(model: Any, strategy: Strategy, data: Any, autograph: bool) -> Iterator[None]:
    """Within the block, Keras's train and test steps of ``model`` are tf.functions and its training's
    variables are made (``data``: the train dataset, for the shapes); after it, Keras's steps again. Other
    models keep Keras's steps in the block too (another model's steps are not this fit's). Without
    ``autograph`` the steps are traced without AutoGraph's transpiling of their source, for a model of
    Keras' own layers: Keras's steps have no control flow of their own, and under a function traced without
    AutoGraph Keras converts no layer's call either, which a custom model's layers may need."""
    if not applies(model, strategy):
        yield
        return
    import tensorflow as tf

    _variables_made(model, data)
    with contextlib.ExitStack() as stack:
        for name in STEPS:
            keras_step = getattr(tf.keras.Model, name)  # Keras's own (tf_keras's Model: legacy Keras, tfxd.tf_env)
            stack.enter_context(patches.applied("keras.steps_traced_once", _traced(model, keras_step, autograph),
                                                name))
        yield


def _traced(model: Any, keras_step: Any, autograph: bool) -> Any:
    """Keras's ``keras_step`` (Model.train_step or test_step), for ``model`` a tf.function of itself."""
    import tensorflow as tf

    function = tf.function(functools.partial(keras_step, model), reduce_retracing=True, autograph=autograph)

    def step(self: Any, data: Any) -> Any:
        return function(data) if self is model else keras_step(self, data)

    return step


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
