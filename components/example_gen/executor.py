"""ExampleGen executor: files (or a BigQuery query) -> tf.Examples in splits, with bad records accounted.

Ratio splits reuse TFX's own deterministic partitioning (a hash of the
serialized record, or of ``split_key`` through ``partition_feature_name``), so a
record's split never changes between runs, runners or worker counts. File
pattern splits read every split and infer one set of column types for all.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import apache_beam as beam
from absl import logging
from tfx.components.example_gen import base_example_gen_executor
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from tfxd import direct_runner, keys, reader_config
from tfxd.components.example_gen import (
    column_sources,
    columnar,
    csv_chunks,
    input_files,
    records,
    reports,
    span_decision,
)
from tfxd.components.example_gen.span_decision import FILES_KEY
from tfxd.files import PipelineTempRemovedExecutor, empty_outputs, is_uri, join
from tfxd.formats import FORMATS
from tfxd.reader_config import ReaderConfig

REPORT_DIR_KEY = "_tfxd_report_dir"
DRIFT_DIR_KEY = "_tfxd_drift_dir"  # where the drift gate's span examples go: <examples>/keys.DRIFT_EXAMPLES_DIR
_BAD = "bad"


def list_files(input_base: str, pattern: str) -> list[str]:
    """Data files matching ``pattern`` under ``input_base`` (hidden files left out); refuse empty matches."""
    full = os.path.join(input_base, pattern)
    files = sorted(path for path in fileio.glob(full)
                   if not fileio.isdir(path) and not os.path.basename(path).startswith((".", "_")))
    if not files:
        raise records.InputError(f"no data file matches {full}")
    for path in files:
        if fileio.stat(path).length == 0:
            raise records.InputError(f"{path} is empty")
    return files


class _ReadFile(beam.DoFn):
    """One file -> rows, tagged with their input split; bad records go to the 'bad' output or fail."""

    def __init__(self, data_format: str, skip_bad: bool, split: str) -> None:
        self._format = data_format
        self._skip_bad = skip_bad
        self._split = split

    def process(self, path: str):
        for item in records.READERS[self._format](path, input_files.open_file):
            if isinstance(item, records.Bad):
                if not self._skip_bad:
                    raise item.error()
                yield beam.pvalue.TaggedOutput(_BAD, item.reason)
            else:
                yield self._split, item


class _InferTypes(beam.CombineFn):
    def __init__(self, numeric: list[str]) -> None:
        self._numeric = frozenset(numeric)

    def create_accumulator(self) -> dict[str, str | None]:
        return {}

    def add_input(self, state: dict[str, str | None], element: tuple[str, records.Row]) -> dict:
        return records.TypeInferenceState.add(state, element[1].values, self._numeric)

    def merge_accumulators(self, states) -> dict[str, str | None]:
        return records.TypeInferenceState.merge(list(states))

    def extract_output(self, state: dict[str, str | None]) -> dict[str, str | None]:
        return state


class _Encode(beam.DoFn):
    """Typed tf.Examples; a value that does not fit its column, or a label that is not a class of the
    spec's task, is a bad record."""

    def __init__(self, config: ReaderConfig) -> None:
        self._pinned = config.columns
        self._label = config.label
        self._skip_bad = config.skips_bad_records

    def process(self, element: tuple[str, records.Row], seen: dict[str, str | None]):
        import tensorflow as tf

        split, row = element
        types = records.final_types(seen, self._pinned)
        features, problem = records.encode(row.values, types)
        if not problem and self._label:
            wrong_label = records.label_problem(features, types, self._label)
            problem = (records.UNEXPECTED_LABEL, wrong_label) if wrong_label else None
        if problem:
            bad = records.Bad(row.location, *problem)
            if not self._skip_bad:
                raise bad.error()
            yield beam.pvalue.TaggedOutput(_BAD, bad.reason)
            return
        yield split, tf.train.Example.FromString(records.example_bytes(features, types))


def _read_files(pipeline: beam.Pipeline, config: ReaderConfig, files_by_split: dict[str, list[str]]):
    """Every split's files -> (split, Row) pairs, and the bad records' reasons."""
    rows, bad = [], []
    for split, files in files_by_split.items():
        read = (pipeline
                | f"Files[{split}]" >> beam.Create(files)
                | f"Read[{split}]" >> beam.ParDo(_ReadFile(config.format, config.skips_bad_records, split))
                .with_outputs(_BAD, main="rows"))
        rows.append(read.rows)
        bad.append(read[_BAD])
    return rows, bad


def _to_examples(rows: list, bad: list, config: ReaderConfig, report_dir: str | None):
    """Infer one set of column types over all rows, encode them; return (split, Example) pairs."""
    all_rows = rows[0] if len(rows) == 1 else tuple(rows) | "AllRows" >> beam.Flatten()
    seen = all_rows | "InferTypes" >> beam.CombineGlobally(_InferTypes(list(config.numeric)))
    encoded = all_rows | "Encode" >> beam.ParDo(
        _Encode(config), seen=beam.pvalue.AsSingleton(seen)).with_outputs(_BAD, main="examples")
    if report_dir:
        reports.write_columns_and_bad(seen, [*bad, encoded[_BAD]], report_dir)
    return encoded.examples


@beam.ptransform_fn
def _InputToExamples(pipeline: beam.Pipeline, exec_properties: dict[str, Any], split_pattern: str):  # noqa: N802
    """One input split -> tf.Examples (partitioned by TFX afterwards). For bigquery, TFX passes the
    query as ``split_pattern``."""
    config = reader_config.of(exec_properties)
    if not FORMATS[config.format].files:
        # start-up: Beam's BigQuery IO (the google-cloud-bigquery client) loads only for BigQuery data
        from tfxd.components.example_gen import bigquery

        rows = [pipeline | "Query" >> bigquery.ReadQuery(split_pattern, config.project)]
        bad: list = []
    else:
        files = (json.loads(exec_properties[FILES_KEY])[""] if exec_properties.get(FILES_KEY)
                 else list_files(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern))
        rows, bad = _read_files(pipeline, config, {"input": files})
    examples = _to_examples(rows, bad, config, exec_properties.get(REPORT_DIR_KEY))
    return examples | "DropSplit" >> beam.Values()


class Executor(direct_runner.BeamMendedExecutor, PipelineTempRemovedExecutor, BaseExampleGenExecutor):
    """Reads csv, parquet, tfrecord, jsonl (and BigQuery) into tf.Examples, split deterministically."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 - TFX's name
        return _InputToExamples  # type: ignore[return-value]  # a beam.ptransform_fn: TFX applies it as one

    def GenerateExamplesByBeam(self, pipeline: beam.Pipeline, exec_properties: dict[str, Any]):  # noqa: N802
        output_config = example_gen_pb2.Output()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
        if output_config.split_config.splits:
            splits = super().GenerateExamplesByBeam(pipeline, exec_properties)
        else:
            splits = self._pattern_splits(pipeline, exec_properties)
        report_dir = exec_properties.get(REPORT_DIR_KEY)
        if report_dir:
            counts = [split | f"Count[{name}]" >> beam.combiners.Count.Globally()
                      | f"Key[{name}]" >> beam.Map(lambda n, name=name: (name, n))
                      for name, split in splits.items()]
            (tuple(counts) | "AllCounts" >> beam.Flatten() | "CountsToDict" >> beam.combiners.ToDict()
             | "WriteCounts" >> beam.Map(reports.write_json, os.path.join(report_dir, reports.SPLIT_COUNTS_FILE)))
        _write_drift_examples(pipeline, exec_properties)
        return splits

    def _pattern_splits(self, pipeline: beam.Pipeline, exec_properties: dict[str, Any]) -> dict[str, Any]:
        """File-pattern splits: read them all, infer one set of types, keep each record in its split."""
        config = reader_config.of(exec_properties)
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        chosen = json.loads(exec_properties.get(FILES_KEY) or "{}")
        files = {split.name: chosen.get(split.name) or list_files(base, split.pattern) for split in input_config.splits}
        rows, bad = _read_files(pipeline, config, files)
        pairs = _to_examples(rows, bad, config, exec_properties.get(REPORT_DIR_KEY))
        names = list(files)
        parts = pairs | "BySplit" >> beam.Partition(lambda pair, n: names.index(pair[0]),  # type: ignore[arg-type]
                                                    len(names))  # Beam's stubs take a PartitionFn; it wraps a callable
        return {name: parts[index] | f"Values[{name}]" >> beam.Values() for index, name in enumerate(names)}

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        empty_outputs(output_dict)  # a retry in place meets the first attempt's shards
        report_dir = os.path.join(self._get_tmp_dir(), "tfxd_report")
        fileio.makedirs(report_dir)
        exec_properties = {**exec_properties, REPORT_DIR_KEY: report_dir}
        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        if reader_config.of(exec_properties).spans:
            exec_properties = _with_spans(exec_properties, examples)
            if exec_properties is None:
                return
        elif example_gen_utils.SPAN_PROPERTY_NAME not in exec_properties:
            exec_properties = _as_the_driver_would(exec_properties, examples)
        if _columnar(exec_properties):
            self._columnar_do(output_dict, exec_properties)
        else:
            super().Do(input_dict, output_dict, exec_properties)
        counts = _read_json(os.path.join(report_dir, reports.SPLIT_COUNTS_FILE))
        bad = _read_json(os.path.join(report_dir, reports.BAD_RECORDS_FILE))
        empty = [name for name in artifact_utils.decode_split_names(examples.split_names) if not counts.get(name)]
        if empty:
            raise records.InputError(
                f"split {', '.join(map(repr, empty))} ended up empty ({counts}); use more data, change the "
                "split ratios, or check the split patterns")
        _check_needed_columns(exec_properties, os.path.join(report_dir, reports.COLUMNS_FILE))
        examples.set_string_custom_property(keys.SPLIT_COUNTS_PROPERTY, json.dumps(counts, sort_keys=True))
        examples.set_string_custom_property(keys.BAD_RECORDS_PROPERTY, json.dumps(bad, sort_keys=True))


    def _columnar_do(self, output_dict, exec_properties: dict[str, Any]) -> None:
        """TFX's own Do (split names, a Beam pipeline, the payload format), with the column-wise pipeline
        (columnar) writing the splits."""
        input_config, output_config = example_gen_pb2.Input(), example_gen_pb2.Output()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        names = example_gen_utils.generate_output_split_names(input_config, output_config)
        artifact_utils.get_single_instance(examples).split_names = artifact_utils.encode_split_names(names)
        split_uris = {name: artifact_utils.get_split_uri(examples, name) for name in names}
        for uri in split_uris.values():
            fileio.makedirs(uri)
        temp_dir = _temp_dir_beside(self._get_tmp_dir(), artifact_utils.get_single_uri(examples))
        fileio.makedirs(temp_dir)
        report_dir = exec_properties[REPORT_DIR_KEY]
        config = reader_config.of(exec_properties)
        files = _files(exec_properties, input_config, output_config)
        written_file = os.path.join(report_dir, reports.WRITTEN_FILE)
        counts: Counter[str] = Counter()
        bad: Counter[str] = Counter()
        rerun: columnar.Rerun | None = None  # first each piece typed by its own kinds
        while True:
            with self._make_beam_pipeline() as pipeline:
                written = columnar.examples(
                    pipeline, config, files, _buckets(output_config), temp_dir, csv_chunks.CHUNK_BYTES,
                    direct_runner.parallel_workers(self._beam_pipeline_args), rerun)
                written | "WriteWritten" >> beam.Map(reports.write_json, written_file)
                if rerun is None:
                    _write_drift_examples(pipeline, exec_properties)
            pieces = _read_json(written_file) or []
            kinds = rerun["kinds"] if rerun else columnar.merged_kinds(pieces)
            stand, again = columnar.settle(pieces, kinds, config.columns)
            columnar.publish(stand, split_uris)
            columnar.discard(again)
            for piece in stand:
                counts.update(piece["counts"])
                bad.update(piece["bad"])
            if not again:
                break
            rerun = columnar.Rerun(kinds=kinds, pieces=[piece["piece"] for piece in again])
            logging.info("tfxd ExampleGen: pieces %s hold columns of kinds the rest of the data widens; written "
                         "again with the kinds of all of it: %s", rerun["pieces"], kinds)
        reports.write_json(dict(counts), os.path.join(report_dir, reports.SPLIT_COUNTS_FILE))
        reports.write_json(dict(bad), os.path.join(report_dir, reports.BAD_RECORDS_FILE))
        reports.write_json(sorted(kinds), os.path.join(report_dir, reports.COLUMNS_FILE))
        if fileio.exists(temp_dir):
            fileio.rmtree(temp_dir)
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if payload_format:
            for artifact in examples:
                examples_utils.set_payload_format(artifact, payload_format)


def _temp_dir_beside(tmp_dir: str, examples_uri: str) -> str:
    """Where the files are written before they are published by a rename: the executor's temporary folder
    when it is on the outputs' filesystem, else a hidden folder in the examples artifact (Beam renames within
    one filesystem only). On Kubeflow Pipelines the temporary folder is the pod's local disk (TFX's v2
    entrypoint puts it beside the executor's output file, kubeflow_v2_run_executor.py) and the outputs are on
    the bucket."""
    def scheme(path: str) -> str:
        return path.split("://", 1)[0] if is_uri(path) else "file"

    if scheme(tmp_dir) == scheme(examples_uri):
        return os.path.join(tmp_dir, "tfxd_columnar")
    return join(examples_uri, ".tfxd_columnar")


class _TrainExamplesOfSpan(beam.PTransform):
    """One span's files -> its train examples, serialized, as the pipeline's own would be: read and typed
    row by row (bad records skipped), in the train split by TFX's own partition (ratio splits), or all of
    them (the files are the train pattern's)."""

    def __init__(self, config: ReaderConfig, files: list[str], output_config) -> None:
        super().__init__()
        self._config, self._files, self._output_config = config, files, output_config

    def expand(self, pbegin):
        rows, bad = _read_files(pbegin, self._config, {"train": self._files})
        pairs = _to_examples(rows, bad, self._config, None)
        split_config = self._output_config.split_config
        if split_config.splits:
            bounds = [bound for _, bound in _buckets(self._output_config)]
            train = [split.name for split in split_config.splits].index("train")
            pairs = pairs | "Train" >> beam.Filter(  # TFX's partition of ratio splits, as its executor splits
                lambda pair: base_example_gen_executor._PartitionFn(  # noqa: SLF001 - TFX's own rule
                    pair[1], len(bounds), bounds, split_config) == train)
        return pairs | "Serialize" >> beam.Map(lambda pair: pair[1].SerializeToString(deterministic=True))


def _write_drift_examples(pipeline: beam.Pipeline, exec_properties: dict[str, Any]) -> None:
    """The train examples of each span whose statistics the drift gate lacks (span_decision.drift_examples),
    beside the run's own, for ExampleValidator to compute them from."""
    wanted = span_decision.drift_examples(exec_properties)
    if not wanted:
        return
    config = reader_config.of(exec_properties).skipping_bad_records()
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
    for label, files in sorted(wanted.items()):
        (pipeline | f"DriftSpan[{label}]" >> _TrainExamplesOfSpan(config, files, output_config)
         | f"WriteDriftSpan[{label}]" >> beam.io.WriteToTFRecord(
             os.path.join(exec_properties[DRIFT_DIR_KEY], label, "examples"), file_name_suffix=".gz"))


def _with_spans(exec_properties: dict[str, Any], examples) -> dict[str, Any] | None:
    """The span decision (span_decision.py; tfxd's driver made it already on the local runners), stamped on
    the examples; None when there is no new data to read (data.on_no_new_data: skip), after which the
    pipeline's condition skips what follows."""
    exec_properties = span_decision.decide(exec_properties)
    span_decision.stamp(examples, exec_properties)
    nothing_new = span_decision.refuse_or_skip(exec_properties)
    if nothing_new:
        logging.info("tfxd ExampleGen: %s; nothing is read, and the components after it are skipped", nothing_new)
        examples.split_names = artifact_utils.encode_split_names([])
        return None
    return {**exec_properties, DRIFT_DIR_KEY: os.path.join(examples.uri, keys.DRIFT_EXAMPLES_DIR)}


def _columnar(exec_properties: dict[str, Any]) -> bool:
    """Whether these files are read column-wise (column_sources.column_wise)."""
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
    return column_sources.column_wise(reader_config.of(exec_properties).format,
                                      bool(output_config.split_config.partition_feature_name))


def _files(exec_properties: dict[str, Any], input_config, output_config) -> list[tuple[str, str]]:
    """(path, split) of every file to read: split "" where hash buckets split the records."""
    base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    chosen = json.loads(exec_properties.get(FILES_KEY) or "{}")
    if output_config.split_config.splits:
        return [(path, "") for path in chosen.get("") or list_files(base, input_config.splits[0].pattern)]
    return [(path, split.name) for split in input_config.splits
            for path in chosen.get(split.name) or list_files(base, split.pattern)]


def _buckets(output_config) -> list[tuple[str, int]]:
    """(split, cumulative hash bucket bound) pairs, as TFX's partition reads its split config."""
    bounds, total = [], 0
    for split in output_config.split_config.splits:
        total += split.hash_buckets
        bounds.append((split.name, total))
    return bounds


def _as_the_driver_would(exec_properties: dict[str, Any], examples) -> dict[str, Any]:
    """What TFX's ExampleGen driver resolves before the executor runs, where none ran (the open-source
    Kubeflow backend runs no pre-cache-check driver; LocalDagRunner and Vertex do): the span and version
    (patterns with {SPAN} resolved), the input's fingerprint, on the exec properties and on the examples,
    by TFX's own driver code, so the examples say what they were made from on every runner."""
    driver_class = (example_gen_driver.FileBasedDriver if exec_properties.get(standard_component_specs.INPUT_BASE_KEY)
                    else example_gen_driver.QueryBasedDriver)
    resolved = driver_class(None).resolve_exec_properties(dict(exec_properties), None, None)
    examples.span = resolved[example_gen_utils.SPAN_PROPERTY_NAME]
    if resolved[example_gen_utils.VERSION_PROPERTY_NAME] is not None:
        examples.version = resolved[example_gen_utils.VERSION_PROPERTY_NAME]
    if resolved.get(example_gen_utils.FINGERPRINT_PROPERTY_NAME):
        examples.set_string_custom_property(example_gen_utils.FINGERPRINT_PROPERTY_NAME,
                                            resolved[example_gen_utils.FINGERPRINT_PROPERTY_NAME])
    return resolved


def _check_needed_columns(exec_properties: dict[str, Any], columns_file: str) -> None:
    """Stop when a column the spec reads is in no record: the reader config's ``needs`` (column -> where
    the spec uses it) is set where `tfxd validate` could not read the data's columns (jsonl, tfrecord,
    bigquery, remote files). ``columns_file``: the columns the records have, as written by the pipeline."""
    needs = reader_config.of(exec_properties).needs
    if not needs or not fileio.exists(columns_file):
        return
    columns = _read_json(columns_file)
    missing = [column for column in needs if column not in columns]
    if missing:
        uses = "; ".join(f"column {column!r} ({needs[column]})" for column in missing)
        raise records.InputError(
            f"the spec reads {uses}, and no record of {_input_names(exec_properties)} has it; the data has: "
            f"{', '.join(columns) or 'no columns'}. Fix the spec's column names or the data")


def _input_names(exec_properties: dict[str, Any]) -> str:
    """The files (as patterns under the input base) or the query that were read."""
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
    base = exec_properties.get(standard_component_specs.INPUT_BASE_KEY)
    if not base:
        return "the query"
    return ", ".join(os.path.join(base, split.pattern) for split in input_config.splits)


def _read_json(path: str) -> Any:
    if not fileio.exists(path):
        return {}
    with fileio.open(path, "r") as handle:
        return json.loads(handle.read())
