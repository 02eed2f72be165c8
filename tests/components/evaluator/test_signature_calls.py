"""TFMA's positional call of a loaded model's signature, made by name (components/evaluator/signature_calls.py),
gives what TFMA's own call gives through TensorFlow's fallback (concrete_function.py, _call_impl: the
structured call fails with a TypeError, then the flat call): judged by TFMA's get_callable and TensorFlow's
own loaded signature on a SavedModel this test writes, without the fallback (the flat call counted)."""

from __future__ import annotations

import pytest
import tensorflow as tf
from tensorflow.python.eager.polymorphic_function import concrete_function
from tensorflow_model_analysis.utils import model_util

from tfxd import patches
from tfxd.components.evaluator import signature_calls


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A SavedModel with a one-input signature on serialized tf.Examples and a two-input one, loaded."""
    module = tf.Module()
    module.scale = tf.Variable(3.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        parsed = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        return {"outputs": parsed["x"] * module.scale}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="a"),
                                  tf.TensorSpec([None], tf.float32, name="b")])
    def add(a, b):
        return {"sum": a + b}

    path = str(tmp_path_factory.mktemp("model"))
    tf.saved_model.save(module, path, signatures={"serving_default": serve, "add": add})
    return tf.saved_model.load(path)


def _examples(values):
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[v]))})).SerializeToString() for v in values])


@pytest.fixture
def flat_calls(monkeypatch):
    """How many times TensorFlow fell back to a signature's flat call."""
    calls = []
    own = concrete_function.ConcreteFunction._call_with_flat_signature

    def counted(self, args, kwargs):
        calls.append(self.name)
        return own(self, args, kwargs)

    monkeypatch.setattr(concrete_function.ConcreteFunction, "_call_with_flat_signature", counted)
    return calls


def test_positional_call_by_name_gives_tfmas_outputs(loaded, flat_calls):
    examples = _examples([1.0, 2.5, -4.0])
    tfmas = model_util.get_callable(loaded, "serving_default")(examples)  # TFMA's own: through the fallback
    assert len(flat_calls) == 1  # the judge's path: the structured call failed, the flat one answered
    with patches.applied("tfma.signatures_by_name", signature_calls.get_callable(model_util.get_callable)):
        signature = model_util.get_callable(loaded, "serving_default")
        ours = signature(examples)
    assert isinstance(signature, signature_calls.ByName)
    assert len(flat_calls) == 1  # no fallback this time
    assert ours["outputs"].numpy().tolist() == tfmas["outputs"].numpy().tolist() == [[3.0], [7.5], [-12.0]]
    # what TFMA reads of a signature besides calling it is the signature's own
    assert signature.structured_input_signature == loaded.signatures["serving_default"].structured_input_signature
    assert signature(examples=examples)["outputs"].numpy().tolist() == [[3.0], [7.5], [-12.0]]


def test_other_signatures_are_tensorflows_own(loaded):
    with patches.applied("tfma.signatures_by_name", signature_calls.get_callable(model_util.get_callable)):
        two = model_util.get_callable(loaded, "add")
    assert two is loaded.signatures["add"]
    assert signature_calls.one_input(two) is None
    assert two(a=tf.constant([1.0]), b=tf.constant([2.0]))["sum"].numpy().tolist() == [3.0]
