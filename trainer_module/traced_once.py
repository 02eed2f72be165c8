"""Keras's train and test steps traced once a fit instead of twice.

With several steps per call of the compiled step (the plan's steps_per_execution), tf_keras's
train_function is ``for _ in tf.range(steps): outputs = step_function(...)`` (tf_keras
engine/training.py, make_train_function; make_test_function likewise). ``outputs`` is undefined before
the loop, so AutoGraph stages the loop body once in a scratch graph to learn its type
(autograph/operators/control_flow.py, _try_handling_undefineds) and then again as the while loop's body:
the whole train step (forward, gradients, optimizer) and test step were traced twice, about a fifth of
the taxi Trainer's time. Made a ``tf.function`` of the model's own step for the fit, the step is traced
at the first staging and the second calls that same concrete function (its cache key holds no outer
graph: tf.function keys on the context under init_scope, which is eager here).

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
def steps_traced_once(model: Any, strategy: Strategy) -> Iterator[None]:
    """Within the block, ``model``'s train and test steps are tf.functions of its own; after it, the model's
    methods again (set past Keras's attribute tracking, so that nothing of them is saved with the model)."""
    if not applies(model, strategy):
        yield
        return
    import tensorflow as tf

    for name in STEPS:
        object.__setattr__(model, name, tf.function(getattr(model, name), reduce_retracing=True))
    try:
        yield
    finally:
        for name in STEPS:
            model.__dict__.pop(name, None)
