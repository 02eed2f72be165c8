"""Warm start (`training.warm_start`): the new model starts from the latest blessed model's weights.

TFX hands the Trainer that model as its `base_model` (pipeline.assembly: a resolver locally and on
Vertex, the baseline task on Kubeflow). Its weights only mean something to a model that reads the same
features into the same layers, so every model the chief exports records what it reads and the shapes
of its weights beside the spans (tfxd.pushed.DATA_RECORD_FILE, `inputs`); a new model whose record
differs trains from scratch and says why, rather than loading weights into the wrong places.

Weights are compared by position and shape, not by name: Keras numbers its layers per process, so two
identical models built in one process are named differently. The checkpoint restores by the same
object structure. The optimizer's state comes with the weights, so training goes on where it stopped.
"""

from __future__ import annotations

import os
from typing import Any

from tfxd import pushed

NO_BASE = "no blessed model yet"


def inputs_record(model: Any, info: dict[str, Any], transform_output: str) -> dict[str, Any]:
    """What a model's weights depend on: the features it reads (kind, id count), its label, a digest of
    each vocabulary Transform computed (an id's meaning), and the shape of each weight in order."""
    features = {name: {"kind": feature["kind"], "cardinality": feature.get("cardinality")}
                for name, feature in sorted(info["features"].items()) if feature["kind"] != "string"}
    return {"features": features, "label": info["label"]["name"], "vocabularies": _vocabularies(transform_output),
            "weights": [[weight.name, [int(d) for d in weight.shape]] for weight in model.weights]}


def _vocabularies(transform_output: str) -> dict[str, str]:
    """{vocabulary file: digest}: tfxd names each vocabulary after its feature (or label)."""
    import hashlib

    import tensorflow as tf

    assets = os.path.join(transform_output, "transform_fn", "assets")
    if not tf.io.gfile.exists(assets):
        return {}
    found = {}
    for name in sorted(tf.io.gfile.listdir(assets)):
        with tf.io.gfile.GFile(os.path.join(assets, name), "rb") as handle:
            found[name.rstrip("/")] = hashlib.sha256(handle.read()).hexdigest()[:16]
    return found


def incompatibility(base: dict[str, Any], current: dict[str, Any]) -> str | None:
    """Why weights recorded as ``base`` cannot start a model recorded as ``current`` (None: they can)."""
    if not base:
        return "the base model records no inputs (exported by an older tfxd)"
    if base["label"] != current["label"]:
        return f"the label changed (was {base['label']}, now {current['label']})"
    before, now = base["features"], current["features"]
    added, removed = sorted(set(now) - set(before)), sorted(set(before) - set(now))
    if added or removed:
        change = "; ".join(part for part in (f"added {', '.join(added)}" if added else "",
                                             f"removed {', '.join(removed)}" if removed else "") if part)
        return f"the features changed ({change})"
    for name, feature in now.items():
        if feature["kind"] != before[name]["kind"]:
            return f"the features changed ({name} was {before[name]['kind']}, now {feature['kind']})"
        if feature["cardinality"] != before[name]["cardinality"]:
            return (f"feature {name} has {feature['cardinality']} ids, the base model's "
                    f"{before[name]['cardinality']}{_STABLE_IDS}")
    changed = sorted(name for name, digest in current["vocabularies"].items()
                     if base["vocabularies"].get(name, digest) != digest)
    if changed:
        return f"the vocabulary of {', '.join(changed)} changed: its ids stand for other values now{_STABLE_IDS}"
    if len(base["weights"]) != len(current["weights"]):
        return (f"the model changed: it has {len(current['weights'])} weights, the base model "
                f"{len(base['weights'])} (model type or layers)")
    for (name, shape), (_, shape_before) in zip(current["weights"], base["weights"], strict=True):
        if shape != shape_before:
            return f"the model changed: weight {name} has shape {tuple(shape)}, the base model's {tuple(shape_before)}"
    return None


# a vocabulary computed on each new span renumbers its values; the transforms whose ids keep their meaning
_STABLE_IDS = ("; warm start needs ids that keep their meaning from run to run: hash the column (transform: hash) "
               "or, for integer codes, use transform: categorical")


def start(model: Any, base_model: str | None, current: dict[str, Any]) -> dict[str, Any]:
    """Load ``base_model``'s weights (and optimizer state) into ``model`` when compatible. Returns what
    happened: {from, started, reason} ("from" is the base model's folder; None without one)."""
    import tensorflow as tf

    if not base_model or not tf.io.gfile.exists(os.path.join(base_model, "saved_model.pb")):
        return {"from": None, "started": False, "reason": NO_BASE}
    reason = incompatibility(pushed.data_record(base_model).inputs, current)
    if reason is not None:
        return {"from": base_model, "started": False, "reason": reason}
    status = model.load_weights(os.path.join(base_model, "variables", "variables"))
    status.expect_partial()  # the SavedModel also holds its signatures and the transform layer
    status.assert_existing_objects_matched()
    return {"from": base_model, "started": True, "reason": None}

