"""What the Trainer needs to know about each transformed feature, written beside the transform graph
(keys.FEATURE_INFO_FILE).

For every output: its kind ("float": dense numbers; "id": integer ids with a
cardinality, ready for an embedding or one-hot; "string") and shape; and for
the label its task and class count. The model builder reads this instead of
guessing from dtypes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf
from tfx.dsl.io import fileio

from tfxd import keys
from tfxd.transforms import TRANSFORMS


def describe(tft_output: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Kinds, shapes and cardinalities from the transformed feature spec and the spec's features
    (``config``: Transform's custom_config)."""
    by_name = {feature["name"]: feature for feature in config.get(keys.FEATURES, [])}
    label = config.get(keys.LABEL, {})
    features: dict[str, Any] = {}
    for name, spec in sorted(tft_output.transformed_feature_spec().items()):
        if name == label.get("name"):
            continue
        shape = list(getattr(spec, "shape", []) or [])
        kind = "id" if spec.dtype == tf.int64 else "string" if spec.dtype == tf.string else "float"
        features[name] = {"kind": kind, "shape": shape, "cardinality": _cardinality(tft_output, by_name.get(name))}
    info: dict[str, Any] = {"features": features}
    if label:
        classes = label.get("num_classes")
        if label.get("task") == "multiclass" and classes is None:
            classes = tft_output.vocabulary_size_by_name(label["name"])
        info["label"] = {"name": label["name"], "task": label["task"], "num_classes": classes}
    return info


def _cardinality(tft_output: Any, feature: dict[str, Any] | None) -> int | None:
    if feature is None:
        return None
    if feature["transform"] == "vocabulary":
        return int(tft_output.vocabulary_size_by_name(feature["name"])) + int(feature["oov_buckets"])
    option = TRANSFORMS[feature["transform"]].cardinality
    return int(feature[option]) if option else None


def write(graph_dir: str, info: dict[str, Any]) -> None:
    with fileio.open(os.path.join(graph_dir, keys.FEATURE_INFO_FILE), "w") as handle:
        handle.write(json.dumps(info, indent=2, sort_keys=True))
