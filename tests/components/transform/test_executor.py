"""Transform's executor around TFX's: the preprocessing_fn traced once for TFX's three inspections (analyze
columns twice, transform columns once), and not at all for cache keys where there is no analyzer cache."""

from __future__ import annotations

import pytest
from tfx.types import standard_component_specs

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


def _asks(fn, specs, force_tf_compat_v1) -> list[list[str]]:
    """What TFX's executor asks, in its order."""
    import tensorflow_transform as tft

    return [tft.get_analyze_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1),
            tft.get_analyze_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1),
            tft.get_transform_input_columns(fn, specs, force_tf_compat_v1=force_tf_compat_v1)]


@pytest.mark.parametrize("force_tf_compat_v1", [True, False])
def test_three_asks_one_trace_and_the_answers_are_tf_transforms(force_tf_compat_v1):
    import tensorflow as tf
    import tensorflow_transform as tft

    specs = _specs("x", "c", "unused")
    if not force_tf_compat_v1:  # TF2 tracing takes TypeSpecs, as TFX gives it
        specs = {name: tf.TensorSpec([None], tf.float32) for name in specs}
    plain_calls: list[int] = []
    expected = _asks(_counting_fn(plain_calls), specs, force_tf_compat_v1)
    assert expected[0] == ["x"] and sorted(expected[2]) == ["c", "x"]
    assert len(plain_calls) == 3  # tf.Transform alone traces each time

    calls: list[int] = []
    fn = _counting_fn(calls)
    with executor._one_inspection_trace():
        answers = _asks(fn, specs, force_tf_compat_v1)
        answers[0].append("changed by a caller")  # a caller's list is its own
        again = _asks(fn, specs, force_tf_compat_v1)
    assert len(calls) == 1
    assert answers[1:] == expected[1:] and again == expected
    assert _asks(fn, specs, force_tf_compat_v1) == expected
    assert len(calls) == 4  # outside the context tf.Transform's own functions again
    assert tft.get_analyze_input_columns.__qualname__ == "get_analyze_input_columns"


def test_other_inputs_or_another_function_are_traced_again():
    import tensorflow_transform as tft

    calls: list[int] = []
    fn = _counting_fn(calls)
    with executor._one_inspection_trace():
        tft.get_analyze_input_columns(fn, _specs("x", "c"), force_tf_compat_v1=True)
        tft.get_transform_input_columns(fn, _specs("x", "c", "extra"), force_tf_compat_v1=True)
        tft.get_analyze_input_columns(_counting_fn(calls), _specs("x", "c"), force_tf_compat_v1=True)
    assert len(calls) == 3


@pytest.mark.parametrize(("inputs", "outputs", "skipped"), [
    ({}, {}, True),
    ({standard_component_specs.ANALYZER_CACHE_KEY: []}, {}, False),
    ({}, {standard_component_specs.UPDATED_ANALYZER_CACHE_KEY: []}, False),
], ids=["no-cache", "cache-read", "cache-written"])
def test_cache_keys_are_listed_only_where_there_is_a_cache(inputs, outputs, skipped):
    from tensorflow_transform.beam import analysis_graph_builder, analyzer_cache

    calls: list[int] = []
    fn = _counting_fn(calls)
    datasets = [analyzer_cache.DatasetKey("train")]
    with executor._no_cache_inspection(inputs, outputs):
        keys = analysis_graph_builder.get_analysis_cache_entry_keys(fn, _specs("x", "c"), datasets, True)
    assert len(calls) == (0 if skipped else 1)
    assert not keys if skipped else keys  # tf.Transform's own where there is a cache: the z-score's figures
    assert analysis_graph_builder.get_analysis_cache_entry_keys(fn, _specs("x", "c"), datasets, True)
    assert len(calls) == (1 if skipped else 2)
