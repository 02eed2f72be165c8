"""Transform executor: TFX's own, plus the feature description the Trainer reads (feature_info)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfx.components.transform import executor as tfx_transform
from tfx.types import artifact_utils, standard_component_specs

from tfxd import files, keys
from tfxd.components.transform import feature_info


@contextlib.contextmanager
def _without_deep_copy():
    """tf.Transform 1.16's deep-copy optimization (re-reading inputs for a second analysis phase without
    materializing them) builds Beam AppliedPTransforms with a signature Beam 2.74 no longer accepts, so
    any preprocessing_fn with dependent analyzers (a fill by the mean, then a z-score) fails. Turning the
    optimization off keeps the same results."""
    from tensorflow_transform.beam.context import Context

    original = Context.__dict__["get_use_deep_copy_optimization"]
    Context.get_use_deep_copy_optimization = classmethod(lambda cls: False)
    try:
        yield
    finally:
        Context.get_use_deep_copy_optimization = original


@contextlib.contextmanager
def _one_analyze_trace() -> Iterator[None]:
    """TFX's executor asks tf.Transform which columns the analyzers read twice for the same preprocessing_fn
    and inputs (tfx/components/transform/executor.py: once to fail fast, once in _RunBeamImpl), and each
    asks traces the whole preprocessing_fn again. The answer depends only on the function and the input
    specs, so the second ask reads the first's answer."""
    import tensorflow_transform as tft

    original = tft.get_analyze_input_columns
    answers: dict[tuple[object, ...], list[str]] = {}

    def remembered(preprocessing_fn: Callable[..., Any], specs: Mapping[str, Any],
                   force_tf_compat_v1: bool = False) -> list[str]:
        key = (preprocessing_fn, force_tf_compat_v1, tuple(sorted((name, repr(spec)) for name, spec in specs.items())))
        if key not in answers:
            answers[key] = original(preprocessing_fn, specs, force_tf_compat_v1=force_tf_compat_v1)
        return list(answers[key])

    tft.get_analyze_input_columns = remembered
    try:
        yield
    finally:
        tft.get_analyze_input_columns = original


def _carry_properties(input_dict, output_dict) -> None:
    """Transformed examples are the examples one for one: they carry ExampleGen's split counts and spans on."""
    source = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
    for key in (keys.SPLIT_COUNTS_PROPERTY, keys.SPANS_PROPERTY):
        value = source.get_string_custom_property(key)
        for target in output_dict.get(standard_component_specs.TRANSFORMED_EXAMPLES_KEY, []):
            if value:
                target.set_string_custom_property(key, value)


class Executor(tfx_transform.Executor):
    def _make_beam_pipeline(self):  # TFX's: its temporary folder goes even when building the graph fails
        return files.PipelineTempRemoved(super()._make_beam_pipeline())

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        import tensorflow_transform as tft

        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's files
        with _without_deep_copy(), _one_analyze_trace():
            super().Do(input_dict, output_dict, exec_properties)
        _carry_properties(input_dict, output_dict)
        graph_dir = artifact_utils.get_single_uri(output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
        config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        feature_info.write(graph_dir, feature_info.describe(tft.TFTransformOutput(graph_dir), config))
