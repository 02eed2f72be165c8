"""Export: a serving signature on serialized raw tf.Examples (the transform graph applied inside) and
a `transform_features` signature for the Evaluator. Every worker takes part in saving; only the
chief writes the real directory."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from tfxd import keys


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
    where the model is loaded."""
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
