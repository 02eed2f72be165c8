"""tfxd's ExampleGen component: TFX's FileBasedExampleGen interface plus a reader config.

It stays a FileBasedExampleGen (same driver, span and fingerprint handling,
and the special treatment KubeflowV2DagRunner gives ExampleGens), with tfxd's
executor and one more parameter, ``reader_config`` (tfxd.reader_config.ReaderConfig as JSON: format, column
type hints, bad-record policy, the checks in the data and the spans to read).
"""

from __future__ import annotations

from typing import Any

from tfx.components.example_gen.component import FileBasedExampleGen, QueryBasedExampleGen
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import channel, component_spec, standard_artifacts, standard_component_specs

from tfxd import keys
from tfxd.components.example_gen import driver, executor
from tfxd.reader_config import ReaderConfig


class ExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    PARAMETERS = {**standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
                  keys.READER_CONFIG_KEY: component_spec.ExecutionParameter(type=str),
                  keys.SPAN_KEY: component_spec.ExecutionParameter(type=str, optional=True),
                  keys.SCHEDULE_TIME_KEY: component_spec.ExecutionParameter(type=str, optional=True),
                  keys.CREATE_TIME_KEY: component_spec.ExecutionParameter(type=str, optional=True)}


class QueryExampleGenSpec(standard_component_specs.QueryBasedExampleGenSpec):
    PARAMETERS = {**standard_component_specs.QueryBasedExampleGenSpec.PARAMETERS,
                  keys.READER_CONFIG_KEY: component_spec.ExecutionParameter(type=str)}


class ExampleGen(FileBasedExampleGen):
    """Files (csv, parquet, tfrecord, jsonl) -> gzipped TFRecords of tf.Example per split."""

    SPEC_CLASS = ExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = driver.Driver  # the local runners'; a compiled file gets TFX's own (driver.py says why)

    def __init__(self, input_base: str, input_config: example_gen_pb2.Input, output_config: example_gen_pb2.Output,
                 reader_config: ReaderConfig, span: Any = "", schedule_time: str = "", create_time: str = "") -> None:
        """``span``: a span overriding the reader config's choice ("" or a RuntimeParameter on a cluster);
        ``schedule_time`` and ``create_time``: the run's, which `{span: scheduled}` reads by (RFC 3339, or
        the placeholders a cluster fills in; "" locally, where a run reads by its start)."""
        spec = ExampleGenSpec(
            input_base=input_base, input_config=input_config, output_config=output_config,
            custom_config=None, range_config=None,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            examples=channel.Channel(type=standard_artifacts.Examples),
            **{keys.READER_CONFIG_KEY: reader_config.to_json(), keys.SPAN_KEY: span,
               keys.SCHEDULE_TIME_KEY: schedule_time, keys.CREATE_TIME_KEY: create_time})
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)


class BigQueryExampleGen(QueryBasedExampleGen):
    """A BigQuery query -> gzipped TFRecords of tf.Example per split (ratio splits only)."""

    SPEC_CLASS = QueryExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(self, input_config: example_gen_pb2.Input, output_config: example_gen_pb2.Output,
                 reader_config: ReaderConfig) -> None:
        spec = QueryExampleGenSpec(
            input_config=input_config, output_config=output_config, custom_config=None,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            examples=channel.Channel(type=standard_artifacts.Examples),
            **{keys.READER_CONFIG_KEY: reader_config.to_json()})
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)
