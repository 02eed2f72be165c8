"""Transform's executor around TFX's: the preprocessing_fn's analyze columns traced once per run, not twice."""

from __future__ import annotations

import pytest

from tfxd.components.transform import executor


def _counting_fn(calls: list[int]):
    import tensorflow_transform as tft

    def preprocessing_fn(inputs):
        calls.append(1)
        return {"z": tft.scale_to_z_score(inputs["x"]), "copy": inputs["c"] * 2.0}

    return preprocessing_fn


def _specs(*names: str) -> dict:
    import tensorflow as tf

    return {name: tf.io.FixedLenFeature([], tf.float32) for name in names}


@pytest.mark.parametrize("force_tf_compat_v1", [True, False])
def test_the_second_ask_reads_the_first_answer_and_the_answer_is_tf_transforms(force_tf_compat_v1):
    import tensorflow as tf
    import tensorflow_transform as tft

    specs = _specs("x", "c")
    if not force_tf_compat_v1:  # TF2 tracing takes TypeSpecs, as TFX gives it
        specs = {name: tf.TensorSpec([None], tf.float32) for name in specs}
    plain_calls: list[int] = []
    plain = _counting_fn(plain_calls)
    expected = [tft.get_analyze_input_columns(plain, specs, force_tf_compat_v1=force_tf_compat_v1) for _ in range(2)]
    assert expected[0] == ["x"] and len(plain_calls) == 2  # tf.Transform alone traces each time

    calls: list[int] = []
    fn = _counting_fn(calls)
    with executor._one_analyze_trace():
        answers = [tft.get_analyze_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1)
                   for _ in range(2)]
        answers[0].append("changed by a caller")  # a caller's list is its own
        third = tft.get_analyze_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1)
    assert len(calls) == 1
    assert answers[1] == third == ["x"]
    assert tft.get_analyze_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1) == ["x"]
    assert len(calls) == 2  # outside the context tf.Transform's own function again


def test_other_inputs_or_another_function_are_traced_again():
    import tensorflow_transform as tft

    calls: list[int] = []
    fn = _counting_fn(calls)
    with executor._one_analyze_trace():
        tft.get_analyze_input_columns(fn, _specs("x", "c"), force_tf_compat_v1=True)
        tft.get_analyze_input_columns(fn, _specs("x", "c", "extra"), force_tf_compat_v1=True)
        tft.get_analyze_input_columns(_counting_fn(calls), _specs("x", "c"), force_tf_compat_v1=True)
    assert len(calls) == 3
