"""Which of tf.Transform's modes the pipeline's Transform runs in: TF1 graph mode for tfxd's own
preprocessing_fn (the same outputs in less time: tests/components/transform/test_combined_analyzers.py
compares them), TF2 mode for a user's."""

from __future__ import annotations

from tests.conftest import REPO
from tfxd import keys
from tfxd.pipeline.assembly.dag import tfx_pipeline
from tfxd.pipeline.spec.load import load_spec


def _transform(*sets: str):
    loaded = load_spec(str(REPO / "examples" / "taxi.yaml"), sets, target="local")
    (transform,) = [c for c in tfx_pipeline(loaded, to="Transform").components if c.id == "Transform"]
    return transform.exec_properties


def test_the_generic_preprocessing_fn_runs_in_tf1_graph_mode():
    properties = _transform()
    assert properties["preprocessing_fn"] == keys.PREPROCESSING_FN
    assert properties["force_tf_compat_v1"] == 1


def test_a_users_preprocessing_fn_keeps_tf2_mode():
    properties = _transform("features=[]", "preprocessing_fn=my_module:preprocessing_fn")
    assert properties["preprocessing_fn"] == "my_module.preprocessing_fn"
    assert properties["force_tf_compat_v1"] == 0
