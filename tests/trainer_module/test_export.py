"""trainer_module.export: the saved serving signature predicts as the model does, traced without AutoGraph
for a model of Keras' own layers (tfxd's model types) and with it for a custom model's layers; Transform's
TF1 graph applied whole where every input is fed gives what tf.Transform's own pruned application gives."""

from __future__ import annotations

import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)

# isort: split
import contextlib
import unittest.mock

import numpy as np
import pytest
import tensorflow as tf

from tfxd import keys, patches
from tfxd.trainer_module import export


class _Passing(tf.keras.layers.Layer):
    """Transform's layer, standing in: the raw features as they were parsed."""

    def call(self, features):
        return dict(features)


class _Transformed:
    """What the export asks of TFTransformOutput: its layer and the raw feature spec."""

    @staticmethod
    def transform_features_layer() -> tf.keras.layers.Layer:
        return _Passing()

    @staticmethod
    def raw_feature_spec() -> dict:
        return {"x": tf.io.FixedLenFeature([3], tf.float32), "y": tf.io.FixedLenFeature([], tf.float32)}


class _Doubling(tf.keras.layers.Layer):
    """A user's own layer: Keras converts its call under AutoGraph."""

    def call(self, inputs):
        return inputs * 2.0


def _model(custom: bool) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(7)
    inputs = tf.keras.Input(shape=(3,), name="x")
    hidden = _Doubling()(inputs) if custom else tf.keras.layers.Dense(4, activation="relu")(inputs)
    return tf.keras.Model({"x": inputs}, tf.keras.layers.Dense(1, activation="sigmoid")(hidden))


def _examples(rows: np.ndarray) -> tf.Tensor:
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in rows])


@pytest.mark.parametrize("custom", [False, True])
def test_the_saved_serving_signature_predicts_as_the_model_does(tmp_path, custom):
    model, rows = _model(custom), np.random.default_rng(3).normal(size=(5, 3)).astype("float32")
    export.save(model, _Transformed(), "y", ["y"], str(tmp_path / "model"), is_chief=True,
                builtin_layers=not custom)
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures[keys.SERVING_SIGNATURE]
    np.testing.assert_allclose(serve(examples=_examples(rows))["outputs"].numpy(), model({"x": rows}).numpy(),
                               rtol=1e-6)



def _tf1_transform_graph(folder: str) -> str:
    """A transform graph as tfxd's Transform writes its own: tf.Transform's TF1 graph mode, dense and sparse
    inputs and outputs, a vocabulary (a table in the graph), and a label read from columns of its own."""
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from tfxd.direct_runner import direct_args

    def preprocessing_fn(inputs: dict) -> dict:
        return {"x_z": tft.scale_to_z_score(inputs["x"]), "c_id": tft.compute_and_apply_vocabulary(inputs["c"]),
                "tags": inputs["tags"], "big": tf.cast(inputs["tips"] > inputs["fare"] * 0.2, tf.int64)}

    rows = [{"x": [float(i)], "c": [b"abc"[i % 3:i % 3 + 1]], "tags": [b"t"] * (i % 3), "tips": [i % 4 * 1.0],
             "fare": [5.0]} for i in range(12)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec({
        "x": tf.io.FixedLenFeature([1], tf.float32), "c": tf.io.FixedLenFeature([1], tf.string),
        "tags": tf.io.VarLenFeature(tf.string), "tips": tf.io.FixedLenFeature([1], tf.float32),
        "fare": tf.io.FixedLenFeature([1], tf.float32)}))
    with tft_beam.Context(temp_dir=f"{folder}/tmp", force_tf_compat_v1=True), \
            beam.Pipeline(argv=direct_args("in_memory", 1)) as pipeline:
        transform_fn = ((pipeline | beam.Create(rows, reshuffle=False), metadata)
                        | tft_beam.AnalyzeDataset(preprocessing_fn))
        _ = transform_fn | tft_beam.WriteTransformFn(f"{folder}/graph")
    return f"{folder}/graph"


def _applied(graph: str, features: dict, whole: bool, prunes: list | None = None) -> dict:
    """Transform's layer on ``features`` in a tf.function, as the export traces it: tf.Transform's own
    application, or with the export's (``whole``); each prune of the graph after loading it is put in
    ``prunes``."""
    import tensorflow_transform as tft
    from tensorflow.python.eager import wrap_function
    from tensorflow_transform.saved import saved_transform_io_v2

    layer = tft.TFTransformOutput(graph).transform_features_layer()
    layer._saved_model_loader  # noqa: B018 - loaded now (its own prunes), not in the block below
    loader = saved_transform_io_v2.SavedModelLoader
    mended = export._whole_graph_when_all_fed(loader._apply_v1_transform_model_in_v2)
    prune = wrap_function.WrappedFunction.prune

    def counted(self, *args, **kwargs):
        (prunes if prunes is not None else []).append(args[1])
        return prune(self, *args, **kwargs)

    with patches.applied("transform.whole_graph_when_all_fed", mended) if whole else contextlib.nullcontext(), \
            unittest.mock.patch.object(wrap_function.WrappedFunction, "prune", counted):
        outputs = tf.function(lambda: layer(features), autograph=False)()
    return {name: tf.sparse.to_dense(value).numpy() if isinstance(value, tf.SparseTensor) else value.numpy()
            for name, value in outputs.items()}


def test_transforms_whole_graph_gives_what_tf_transforms_pruned_one_gives(tmp_path):
    """Judged by tf.Transform's own application (the graph pruned at each call): every input fed, the loaded
    graph called whole gives the same outputs (the vocabulary's ids, the z-scores, the sparse column, the
    label); the label's columns left out (serving), tf.Transform's own prune gives the rest as before."""
    graph = _tf1_transform_graph(str(tmp_path))
    raw = {"x": tf.constant([[1.0], [7.0]]), "c": tf.constant([[b"b"], [b"z"]]),
           "tags": tf.sparse.from_dense(tf.constant([[b"t", b""], [b"t", b"t"]])),
           "tips": tf.constant([[3.0], [0.0]]), "fare": tf.constant([[5.0], [5.0]])}
    own_prunes, whole_prunes = [], []
    own, whole = _applied(graph, raw, False, own_prunes), _applied(graph, raw, True, whole_prunes)
    assert len(own_prunes) == 1 and whole_prunes == []  # the whole graph, as loaded
    assert sorted(whole) == sorted(own) == ["big", "c_id", "tags", "x_z"]
    for name in own:
        np.testing.assert_array_equal(whole[name], own[name], err_msg=name)
    assert whole["big"].ravel().tolist() == [1, 0] and whole["c_id"].ravel().tolist()[1] == -1  # "z" is out of vocabulary
    serving = {name: value for name, value in raw.items() if name != "tips"}
    serving_prunes = []
    served = _applied(graph, serving, True, serving_prunes)
    assert sorted(served) == ["c_id", "tags", "x_z"] and sorted(serving_prunes[0]) == sorted(served)
    for name in served:
        np.testing.assert_array_equal(served[name], own[name], err_msg=name)


def test_an_input_of_the_wrong_shape_is_refused_as_tf_transform_refuses_it(tmp_path):
    graph = _tf1_transform_graph(str(tmp_path))
    raw = {"x": tf.constant([[1.0, 2.0]]), "c": tf.constant([[b"b"]]), "tags": tf.sparse.from_dense(tf.constant([[b"t"]])),
           "tips": tf.constant([[3.0]]), "fare": tf.constant([[5.0]])}
    messages = []
    for whole in (False, True):
        with pytest.raises(ValueError) as refused:
            _applied(graph, raw, whole)
        messages.append(str(refused.value).splitlines()[2])  # Keras's own first line names the layer
    assert messages[0] == messages[1] == "transform/inputs/x/x:0: Shapes (None, 1) and (1, 2) are incompatible"
