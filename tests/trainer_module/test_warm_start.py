"""Warm start's compatibility check, each reason a model trains from scratch, without TensorFlow (the
weights themselves: tests/pipeline/run/test_retraining.py and tests/kubeflow/test_spans.py)."""

from __future__ import annotations

import copy

import pytest

from tfxd.trainer_module.warm_start import incompatibility

BASE = {"label": "big_tipper", "vocabularies": {"company": "aaaa"},
        "features": {"company": {"kind": "id", "cardinality": 12}, "fare": {"kind": "float", "cardinality": None}},
        "weights": [["dense/kernel:0", [13, 64]], ["dense/bias:0", [64]], ["output/kernel:0", [64, 1]]]}


def _changed(**changes) -> dict:
    current = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = current
        for key in parents:
            target = target[key]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return current


def test_the_same_inputs_and_layers_warm_start_whatever_the_layer_names():
    renamed = _changed(weights=[["dense_7/kernel:0", [13, 64]], ["dense_7/bias:0", [64]], ["output/kernel:0", [64, 1]]])
    assert incompatibility(BASE, renamed) is None  # Keras numbers layers per process


@pytest.mark.parametrize("changes, reason", [
    ({"label": "tips"}, "the label changed (was big_tipper, now tips)"),
    ({"features__fare": None}, "the features changed (removed fare)"),
    ({"features__miles": {"kind": "float", "cardinality": None}}, "the features changed (added miles)"),
    ({"features__fare": {"kind": "id", "cardinality": 3}}, "the features changed (fare was float, now id)"),
    ({"features__company": {"kind": "id", "cardinality": 15}}, "feature company has 15 ids, the base model's 12; "
     "warm start needs ids that keep their meaning from run to run: hash the column (transform: hash)"),
    ({"vocabularies__company": "bbbb"}, "the vocabulary of company changed: its ids stand for other values now"),
    ({"weights": BASE["weights"][:2]}, "the model changed: it has 2 weights, the base model 3 (model type or layers)"),
    ({"weights": [["dense/kernel:0", [13, 32]], ["dense/bias:0", [32]], ["output/kernel:0", [32, 1]]]},
     "the model changed: weight dense/kernel:0 has shape (13, 32), the base model's (13, 64)"),
])
def test_each_change_that_moves_the_weights_meaning_refuses_with_its_reason(changes, reason):
    found = incompatibility(BASE, _changed(**changes))
    assert found is not None and found.startswith(reason), found


def test_a_model_from_before_the_record_refuses():
    assert incompatibility({}, BASE) == "the base model records no inputs (exported by an older tfxd)"
