"""Transform executor: TFX's own, plus the feature description the Trainer reads (feature_info)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfx.components.transform import executor as tfx_transform
from tfx.components.transform import labels
from tfx.types import artifact_utils, standard_component_specs

from tfxd import example_files, files, keys, patches
from tfxd.components.transform import feature_info, transformed_files
from tfxd.direct_runner import BeamMendedExecutor


@contextlib.contextmanager
def _without_deep_copy():
    """tf.Transform's deep-copy optimization off (patch transform.deep_copy_off)."""
    with patches.applied("transform.deep_copy_off", classmethod(lambda cls: False)):
        yield


@contextlib.contextmanager
def _one_inspection_trace() -> Iterator[None]:
    """The three asks of which columns a preprocessing_fn reads share one trace (patch
    transform.one_inspection_trace): tf.Transform's own inspection functions answer each, reading one traced
    graph (they only read it)."""
    import tensorflow_transform as tft
    from tensorflow_transform import impl_helper

    original_trace = impl_helper.trace_preprocessing_function
    originals = {"get_analyze_input_columns": tft.get_analyze_input_columns,
                 "get_transform_input_columns": tft.get_transform_input_columns}
    traces: dict[tuple[object, ...], Any] = {}

    def traced_once(preprocessing_fn: Callable[..., Any], specs: Mapping[str, Any], use_tf_compat_v1: bool,
                    base_temp_dir: str | None = None) -> Any:
        key = (preprocessing_fn, use_tf_compat_v1, base_temp_dir, _specs_key(specs))
        if key not in traces:
            traces[key] = original_trace(preprocessing_fn, specs, use_tf_compat_v1=use_tf_compat_v1,
                                         base_temp_dir=base_temp_dir)
        return traces[key]

    def inspecting(name: str) -> Callable[..., list[str]]:
        def inspect(preprocessing_fn: Callable[..., Any], specs: Mapping[str, Any],
                    force_tf_compat_v1: bool = False) -> list[str]:
            with patches.applied("transform.one_inspection_trace", traced_once, "trace_preprocessing_function"):
                return originals[name](preprocessing_fn, specs, force_tf_compat_v1=force_tf_compat_v1)
        return inspect

    with contextlib.ExitStack() as stack:
        for name in originals:
            stack.enter_context(patches.applied("transform.one_inspection_trace", inspecting(name), name))
        yield


def _specs_key(specs: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(spec)) for name, spec in specs.items()))


@contextlib.contextmanager
def _no_cache_inspection(input_dict: Mapping[str, Any], output_dict: Mapping[str, Any]) -> Iterator[None]:
    """Without an analyzer cache (the component has neither cache channel: tfxd turns it off) the cache's
    keys are none, and TFX builds no analysis graph to list them (patch transform.no_cache_inspection)."""
    if (standard_component_specs.ANALYZER_CACHE_KEY in input_dict
            or standard_component_specs.UPDATED_ANALYZER_CACHE_KEY in output_dict):
        yield
        return
    with patches.applied("transform.no_cache_inspection", lambda *args, **kwargs: []):
        yield


@contextlib.contextmanager
def _batched_writes() -> Iterator[None]:
    """Transformed examples written a batch at a time (transformed_files), in place of TFX's writer
    (patch transform.batched_writes)."""
    processor = tfx_transform.TransformProcessor
    # TFX's own writer stays for its Parquet output; its pass-through key column is left out as TFX does
    writer = transformed_files.encode_and_write(processor._EncodeAndWrite,
                                                tfx_transform._TRANSFORM_INTERNAL_FEATURE_FOR_KEY,
                                                labels.FORMAT_TFRECORD)
    with patches.applied("transform.batched_writes", staticmethod(writer)):
        yield


def _carry_properties(input_dict, output_dict) -> None:
    """Transformed examples are the examples one for one: they carry ExampleGen's split counts and spans on."""
    source = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
    for key in (keys.SPLIT_COUNTS_PROPERTY, keys.SPANS_PROPERTY):
        value = source.get_string_custom_property(key)
        for target in output_dict.get(standard_component_specs.TRANSFORMED_EXAMPLES_KEY, []):
            if value:
                target.set_string_custom_property(key, value)


class Executor(BeamMendedExecutor, files.PipelineTempRemovedExecutor, tfx_transform.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        import tensorflow_transform as tft

        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's files
        with _without_deep_copy(), _one_inspection_trace(), _no_cache_inspection(input_dict, output_dict), \
                example_files.batched_reads(), _batched_writes():
            super().Do(input_dict, output_dict, exec_properties)
        _carry_properties(input_dict, output_dict)
        graph_dir = artifact_utils.get_single_uri(output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
        config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        feature_info.write(graph_dir, feature_info.describe(tft.TFTransformOutput(graph_dir), config))
