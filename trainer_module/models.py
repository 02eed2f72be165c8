"""Keras models built from the spec and the feature kinds Transform recorded (keys.FEATURE_INFO_FILE).

Floats become numeric inputs; integer ids become one-hots (wide parts, small
cardinalities) or embeddings (deep parts, large cardinalities); the output layer
follows the task and stays float32 under mixed precision.
"""

from __future__ import annotations

import importlib
from typing import Any

from tfxd import tf_env
from tfxd.metrics import METRICS

EMBEDDING_FROM = 32  # ids with more distinct values than this get an embedding in deep parts


def import_object(dotted: str) -> Any:
    """'package.module:name' -> the object."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def keras_layers_only(spec: dict[str, Any]) -> bool:
    """Whether the spec's model is made of Keras' own layers alone: every model type but a custom builder's."""
    return bool(spec["model"]["type"] != "custom")


def build(spec: dict[str, Any], info: dict[str, Any], steps_per_execution: int = 1) -> Any:
    """The compiled model for ``spec`` (the resolved spec as a dict) and Transform's feature info, running
    ``steps_per_execution`` steps per call of its compiled step (the plan's; a custom builder's own compiled
    model gets it too). Keras's and tf.Transform's own code are left to themselves from here on: every fit,
    prediction and export of a built model traces them without AutoGraph transpiling them
    (tf_env.leave_graph_libraries_to_themselves)."""
    import tensorflow as tf

    tf_env.leave_graph_libraries_to_themselves()
    model_spec, label = spec["model"], info["label"]
    if not keras_layers_only(spec):
        model = import_object(model_spec["builder"])(spec, info)
        if getattr(model, "optimizer", None) is not None:
            model.steps_per_execution = steps_per_execution  # Keras's own setter, for a compiled model
            return model
    else:
        inputs = _inputs(info["features"])
        body = {"dnn": _dnn, "wide_deep": _wide_deep, "linear": _linear, "cnn": _cnn}[model_spec["type"]]
        hidden = body(inputs, info["features"], model_spec)
        model = tf.keras.Model(inputs, _output(hidden, label))
    model.compile(optimizer=_optimizer(model_spec["optimizer"]), loss=_loss(label["task"]),
                  metrics=[metric(name, label["task"]) for name in model_spec["metrics"]],
                  steps_per_execution=steps_per_execution)
    return model


def _inputs(features: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf

    inputs: dict[str, Any] = {}
    for name, feature in features.items():
        if feature["kind"] == "string":
            continue  # strings reach the model only through vocabulary or hash ids
        shape = tuple(feature["shape"]) or (1,)
        dtype = tf.int64 if feature["kind"] == "id" else tf.float32
        inputs[name] = tf.keras.Input(shape=shape, name=name, dtype=dtype)
    if not inputs:
        raise ValueError("the model has no inputs: every transformed feature is a string; use vocabulary or hash")
    return inputs


def _floats(inputs: dict[str, Any], features: dict[str, Any]) -> list[Any]:
    """The float features in the spec's order: consecutive ones with a value or a vector an example joined
    by one Concatenate, others flattened (the same columns as a Flatten each, in fewer layers)."""
    import tensorflow as tf

    parts: list[Any] = []
    run: list[Any] = []
    for name, feature in features.items():
        if name not in inputs or feature["kind"] != "float":
            continue
        if len(feature["shape"]) <= 1:
            run.append(inputs[name])
            continue
        parts += _joined(run)
        run = []
        parts.append(tf.keras.layers.Flatten()(inputs[name]))
    return parts + _joined(run)


def _joined(run: list[Any]) -> list[Any]:
    import tensorflow as tf

    return [] if not run else [tf.keras.layers.Flatten()(run[0]) if len(run) == 1 else
                               tf.keras.layers.Concatenate()(run)]


def _one_hots(inputs: dict[str, Any], features: dict[str, Any]) -> list[Any]:
    """The wide part's id features in order: a one-hot each, or the id as a float where it has no
    cardinality."""
    return _ids(inputs, features, embed=False)


def _embeddings(inputs: dict[str, Any], features: dict[str, Any]) -> list[Any]:
    """The deep part's id features in order: an embedding for a large cardinality, a one-hot for a small
    one; ids without a cardinality are left out."""
    return _ids(inputs, features, embed=True)


def _ids(inputs: dict[str, Any], features: dict[str, Any], embed: bool) -> list[Any]:
    """The id features in order (``embed``: for a deep part: large cardinalities embedded, ids without one
    left out), consecutive single-valued one-hots as one multi-hot (_one_hot)."""
    parts: list[Any] = []
    run: list[tuple[Any, int]] = []
    for name, feature in features.items():
        size = feature.get("cardinality")
        if name not in inputs or feature["kind"] != "id" or (embed and not size):
            continue
        if size and not (embed and size > EMBEDDING_FROM) and tuple(feature["shape"]) in ((), (1,)):
            run.append((inputs[name], size))
            continue
        parts += _one_hot(run)
        run = []
        parts.append(_id_alone(inputs[name], size, embed))
    return parts + _one_hot(run)


def _id_alone(ids: Any, size: int | None, embed: bool) -> Any:
    import tensorflow as tf

    if not size:
        return tf.keras.layers.Flatten()(tf.cast(ids, tf.float32))
    if embed and size > EMBEDDING_FROM:
        width = min(32, max(4, int(round(size ** 0.25 * 4))))
        return tf.keras.layers.Flatten()(tf.keras.layers.Embedding(size, width)(ids))
    return tf.keras.layers.CategoryEncoding(num_tokens=size, output_mode="one_hot")(tf.keras.layers.Reshape((1,))(ids))


def _one_hot(run: list[tuple[Any, int]]) -> list[Any]:
    """The one-hots of consecutive single-valued id features (input, cardinality), the columns of a
    CategoryEncoding each in the same order, as one multi-hot over the ids each shifted past the features
    before it.

    Why: Keras traces every layer at every trace of a model (its train and test steps, the serving
    signature) and rebuilds it at every load, and a CategoryEncoding (its range checks, its one-hot) with a
    Reshape a feature were most of taxi's model: its Trainer 4.0 -> 3.6 s, and the Evaluator's load. An id
    outside its feature's range becomes -1, which CategoryEncoding refuses as it refused the id alone
    (shifted, it would have been another feature's column)."""
    import numpy as np
    import tensorflow as tf

    if len(run) < 2:
        return [_id_alone(ids, size, embed=False) for ids, size in run]
    sizes = [size for _, size in run]
    ids = tf.keras.layers.Concatenate()([ids for ids, _ in run])  # each (batch, 1)
    inside = tf.logical_and(ids >= 0, ids < np.array(sizes, dtype=np.int64))
    shifted = tf.where(inside, ids + np.cumsum([0] + sizes[:-1], dtype=np.int64), -1)
    return [tf.keras.layers.CategoryEncoding(num_tokens=sum(sizes), output_mode="multi_hot")(shifted)]


def _concat(layers: list[Any]) -> Any:
    import tensorflow as tf

    return layers[0] if len(layers) == 1 else tf.keras.layers.concatenate(layers)


def _stack(x: Any, units: list[int], dropout: float) -> Any:
    import tensorflow as tf

    for width in units:
        x = tf.keras.layers.Dense(width, activation="relu")(x)
        if dropout:
            x = tf.keras.layers.Dropout(dropout)(x)
    return x


def _dnn(inputs: dict[str, Any], features: dict[str, Any], spec: dict[str, Any]) -> Any:
    return _stack(_concat(_floats(inputs, features) + _embeddings(inputs, features)), spec["hidden_units"],
                  spec["dropout"])


def _wide_deep(inputs: dict[str, Any], features: dict[str, Any], spec: dict[str, Any]) -> Any:
    import tensorflow as tf

    floats = _floats(inputs, features)
    deep_parts = floats or _embeddings(inputs, features)
    wide_parts = _one_hots(inputs, features) if floats else []
    deep = _stack(_concat(deep_parts), spec["hidden_units"], spec["dropout"])
    return tf.keras.layers.concatenate([deep, *wide_parts]) if wide_parts else deep


def _linear(inputs: dict[str, Any], features: dict[str, Any], spec: dict[str, Any]) -> Any:
    return _concat(_floats(inputs, features) + _one_hots(inputs, features))


def _cnn(inputs: dict[str, Any], features: dict[str, Any], spec: dict[str, Any]) -> Any:
    import tensorflow as tf

    cnn = spec["cnn"]
    x = tf.keras.layers.Reshape(tuple(cnn["image"]["shape"]))(tf.cast(inputs[cnn["image"]["feature"]], tf.float32))
    for filters in cnn["filters"]:
        x = tf.keras.layers.Conv2D(filters, cnn["kernel"], activation="relu", padding="same")(x)
        x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.Flatten()(x)
    image = cnn["image"]["feature"]
    others = _floats(inputs, {n: f for n, f in features.items() if n != image})
    x = _concat([x, *others]) if others else x
    return _stack(x, cnn["dense"], spec["dropout"])


def _output(x: Any, label: dict[str, Any]) -> Any:
    import tensorflow as tf

    if label["task"] == "binary":
        return tf.keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="output")(x)
    if label["task"] == "multiclass":
        return tf.keras.layers.Dense(label["num_classes"], activation="softmax", dtype="float32", name="output")(x)
    return tf.keras.layers.Dense(1, dtype="float32", name="output")(x)


def _loss(task: str) -> Any:
    import tensorflow as tf

    return {"binary": tf.keras.losses.BinaryCrossentropy(),
            "multiclass": tf.keras.losses.SparseCategoricalCrossentropy(),
            "regression": tf.keras.losses.MeanSquaredError()}[task]


def _optimizer(spec: Any) -> Any:
    import tensorflow as tf

    name, rate = (spec, None) if isinstance(spec, str) else (spec["name"], spec.get("learning_rate"))
    optimizer = tf.keras.optimizers.get(name)
    if rate is not None:
        optimizer.learning_rate = rate
    return optimizer


def metric(name: str, task: str) -> Any:
    """The Keras metric for the spec's metric ``name`` (tfxd.metrics) on a label of ``task``."""
    import tensorflow as tf

    found = METRICS[name]
    class_name, keras_name = found.keras(name, task)
    base: Any = getattr(tf.keras.metrics, class_name)
    if found.keras_of is None:
        return base(name=keras_name, **found.config)
    of = found.keras_of

    class _Picked(base):  # a Sum/Mean over a count of examples, the labels, or the predictions
        def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
            value = {"count": tf.ones_like(tf.cast(y_true, tf.float32)), "label": tf.cast(y_true, tf.float32),
                     "prediction": tf.cast(y_pred, tf.float32)}[of]
            return super().update_state(value, sample_weight=sample_weight)

    return _Picked(name=keras_name, **found.config)
