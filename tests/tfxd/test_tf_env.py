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


def _traced_graph():
    """A function's graph as TensorFlow traces it: generated op wrappers (FuncGraph.as_default at each op),
    a device scope (ops.device under a trace), a Keras layer, and the strategy TensorFlow copies into the
    function's graph (FuncGraph.as_default's inner_cm)."""
    import tensorflow as tf

    layer = tf.keras.layers.Dense(3, kernel_initializer="ones", name="layer")
    layer.build([None, 2])
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    seen = []

    @tf.function(autograph=False)
    def step(x):
        seen.append(tf.distribute.get_strategy())
        with tf.device("/cpu:0"):
            y = tf.nn.relu(x * 2.0 + 1.0)
        return layer(y) - tf.reduce_mean(y)

    with strategy.scope():
        concrete = step.get_concrete_function(tf.TensorSpec([None, 2], tf.float32))
    nodes = [(node.name, node.op, node.device, list(node.input)) for node in concrete.graph.as_graph_def().node]
    return nodes, concrete(tf.constant([[1.0, -2.0]])).numpy().tolist(), seen[0] is strategy


def _counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_graphs_built_plainly_are_tensorflows_own_graphs_built_without_the_decorators_work(monkeypatch):
    """TensorFlow's own trace is the judge: the same nodes (names, ops, devices, inputs), the same results
    and the strategy carried into the function's graph, with and without the block. The bite: without it,
    TensorFlow wraps a closure made at each op in its decorator (tf_decorator.make_decorator, per
    tensorflow/python/framework/func_graph.py as_default and ops.py device) and binds create_op's
    arguments (deprecation.py's new_func, tf_inspect.getcallargs) for every op a prune copies
    (eager/lift_to_graph.py _copy_non_source); within it, neither."""
    import tensorflow as tf
    from tensorflow.python.framework import ops
    from tensorflow.python.util import tf_contextlib, tf_decorator, tf_inspect

    decorated = _counting(monkeypatch, tf_decorator, "make_decorator")
    bound = _counting(monkeypatch, tf_inspect, "getcallargs")
    contextmanager, create_op = tf_contextlib.contextmanager, ops.Graph.create_op

    def pruned():
        graph = tf.compat.v1.wrap_function(lambda x: tf.identity(tf.nn.relu(x) + 1.0, name="out"),
                                           [tf.TensorSpec([2], tf.float32)])
        function = graph.prune(graph.inputs[0], graph.graph.get_tensor_by_name("out:0"))
        return function(tf.constant([-1.0, 2.0])).numpy().tolist()

    before, pruned_before = _traced_graph(), pruned()
    def closure_context_managers():  # tf_contextlib's decorations of a function made inside another
        return [args[0].__qualname__ for args in decorated
                if args[2:3] == ("contextmanager",) and "<locals>" in args[0].__qualname__]

    closures_before = closure_context_managers()
    bound_before = len(bound)
    decorated.clear()
    bound.clear()
    with tf_env.graphs_built_plainly():
        within, pruned_within = _traced_graph(), pruned()
    assert within == before and before[2] is True and pruned_within == pruned_before == [1.0, 3.0]
    # the bite: TensorFlow's own per-op work
    assert {"FuncGraph.as_default.<locals>.inner_cm", "device.<locals>.combined"} <= set(closures_before)
    assert len(closures_before) > 10 and bound_before > 3
    assert closure_context_managers() == []
    assert bound == []
    # and TensorFlow's own again after the block: the decorator on create_op, tf_contextlib's function
    assert tf_contextlib.contextmanager is contextmanager and ops.Graph.create_op is create_op
    assert tf_decorator.unwrap(ops.Graph.create_op)[0]
