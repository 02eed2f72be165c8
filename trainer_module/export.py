"""Export: a serving signature on serialized raw tf.Examples (the transform graph applied inside) and
a `transform_features` signature for the Evaluator. Every worker takes part in saving; only the
chief writes the real directory."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from tfxd import keys, patches


def _signatures(model: Any, tf_transform_output: Any, label: str, label_only: list[str],
                builtin_layers: bool) -> dict[str, Any]:
    """Both signatures' functions, traced without AutoGraph where nothing in them needs it: neither has
    control flow of its own, Transform's layer is left to itself (tfxd.tf_env), and a model of Keras' own
    layers has none either (a custom model's layers may: serving keeps AutoGraph for it, which converts a
    subclassed layer's call). AutoGraph transpiles a function's source before its first trace, on every
    run: about 0.03 s a function on taxi."""
    import tensorflow as tf

    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    # a serving request carries no label, so the columns only the label reads are not parsed
    serving_spec = {k: v for k, v in raw_spec.items() if k not in label_only}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
                 autograph=not builtin_layers)
    def serve(serialized: Any) -> dict[str, Any]:
        features = model.tft_layer(tf.io.parse_example(serialized, serving_spec))
        features.pop(label, None)
        return {"outputs": model(features)}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
                 autograph=False)
    def transform_features(serialized: Any) -> Any:
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    return {keys.SERVING_SIGNATURE: serve.get_concrete_function(),
            keys.TRANSFORM_FEATURES_SIGNATURE: transform_features.get_concrete_function()}


def save(model: Any, tf_transform_output: Any, label: str, label_only: list[str], serving_model_dir: str,
         is_chief: bool, builtin_layers: bool) -> None:
    """``builtin_layers``: the model uses Keras' own layers only, so Keras can rebuild it from its config
    and the per-layer traces are not saved: saving traces no layer's functions, and every load, the
    Evaluator's included, rebuilds the layers from their config instead of reading those functions back
    (bench/RESULTS.md has the sizes and times). A custom model keeps them: its layers may not be importable
    where the model is loaded. Transform's TF1 graph is applied whole where every input is fed
    (_whole_graph_when_all_fed)."""
    from tensorflow_transform.saved import (
        saved_transform_io_v2,  # start-up: inside the Trainer only
    )

    loader = saved_transform_io_v2.SavedModelLoader
    with patches.applied("transform.whole_graph_when_all_fed",
                         _whole_graph_when_all_fed(loader._apply_v1_transform_model_in_v2)):  # noqa: SLF001
        signatures = _signatures(model, tf_transform_output, label, label_only, builtin_layers)
    options = {"save_format": "tf", "signatures": signatures, "save_traces": not builtin_layers}
    if is_chief:
        model.save(serving_model_dir, **options)
        return
    scratch = tempfile.mkdtemp(prefix="tfxd-worker-model-")
    try:
        model.save(scratch, **options)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _whole_graph_when_all_fed(prune_and_apply: Callable[..., Any]) -> Callable[..., Any]:
    """tf.Transform's application of a TF1 transform graph (SavedModelLoader's
    _apply_v1_transform_model_in_v2, ``prune_and_apply``), which prunes the loaded graph to the inputs fed
    and the outputs they reach at every call: where every input of the loaded graph is fed (the
    transform_features signature), the loaded graph is called as it is, with the same inputs checked the
    same way and the same outputs given their shapes as tf.Transform gives them; otherwise, as
    tf.Transform does (serving: the label's own columns are not fed)."""
    from tensorflow_transform.saved import saved_transform_io  # start-up: inside the Trainer only

    def apply(loader: Any, logical_input_map: Any) -> Any:
        function, graph = loader._wrapped_function, loader._func_graph  # noqa: SLF001 - tf.Transform's own
        input_map = saved_transform_io._expand_input_map(logical_input_map, loader._structured_inputs)  # noqa: SLF001
        fed = {graph.get_tensor_by_name(name).ref(): (name, value) for name, value in input_map.items()}
        keywords = getattr(function, "_arg_keywords", None) or []  # the loaded signature's, one an input
        if fed.keys() != {tensor.ref() for tensor in function.inputs} or len(keywords) != len(function.inputs):
            return prune_and_apply(loader, logical_input_map)
        for ref, (name, value) in fed.items():
            try:
                ref.deref().shape.assert_is_compatible_with(value.shape)
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None  # tf.Transform's message
        result = function(**{keyword: fed[tensor.ref()][1] for keyword, tensor in zip(keywords, function.inputs, strict=True)})
        for name, output in loader._get_fetches([ref.deref() for ref in fed]).items():  # noqa: SLF001
            if hasattr(result[name], "set_shape"):
                result[name].set_shape(output.shape)
        return result

    return apply
