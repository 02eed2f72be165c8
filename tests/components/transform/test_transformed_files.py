"""Transformed examples written a batch at a time (transformed_files) are what TFX's own writer
(TransformProcessor._EncodeAndWrite, as shipped) writes for the same batches: the same records in the same
order, in files of the same names, read back by TensorFlow and by TFX's own reader (TFXIO's TFExampleRecord,
which Trainer and Evaluator inputs go through); TFX's pass-through key column is left out as TFX leaves it;
TFX's other format still goes to TFX's writer."""

from __future__ import annotations

import os

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.transform import executor as tfx_transform
from tfx.components.transform import labels

from tfxd.components.transform import executor, transformed_files
from tfxd.direct_runner import direct_args

KEY = tfx_transform._TRANSFORM_INTERNAL_FEATURE_FOR_KEY
TFX_WRITER = tfx_transform.TransformProcessor._EncodeAndWrite


def _schema() -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    for name, kind in (("z", schema_pb2.FLOAT), ("bucket", schema_pb2.INT), ("word", schema_pb2.BYTES),
                       ("many", schema_pb2.FLOAT)):
        feature = schema.feature.add(name=name, type=kind)
        if name != "many":
            feature.shape.dim.add(size=1)
    return schema


def _batch(start: int, rows: int, key: bool = False) -> pa.RecordBatch:
    numbers = range(start, start + rows)
    columns = {
        "z": pa.array([[n / 7.0] for n in numbers], pa.large_list(pa.float32())),
        "bucket": pa.array([[n % 5] for n in numbers], pa.large_list(pa.int64())),
        "word": pa.array([[f"w{n % 11}".encode()] for n in numbers], pa.large_list(pa.large_binary())),
        "many": pa.array([None if n % 4 == 0 else [float(i) for i in range(n % 4)] for n in numbers],
                         pa.large_list(pa.float32())),
    }
    if key:
        columns[KEY] = pa.array([[f"k{n}".encode()] for n in numbers], pa.large_list(pa.large_binary()))
    return pa.RecordBatch.from_pydict(columns)


def _write(batches: list[pa.RecordBatch], folder, writer, file_format: str = labels.FORMAT_TFRECORD) -> str:
    prefix = os.path.join(folder, "transformed_examples")
    with beam.Pipeline(argv=direct_args("in_memory", 1)) as pipeline:
        _ = (pipeline | beam.Create([(batch, {}) for batch in batches])
             | writer(_schema(), file_format, prefix))
    return prefix


def _ours(tfx_writer=TFX_WRITER):
    return transformed_files.encode_and_write(tfx_writer, KEY, labels.FORMAT_TFRECORD)


def _records(prefix: str) -> list[bytes]:
    """The examples of the files, in order, each serialized with its features in the order of their names:
    TFX's encoder puts a record's features in an order of its own (a C++ map's), even from one run to the next."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(prefix + "*"))
    return [tf.train.Example.FromString(record.numpy()).SerializeToString(deterministic=True)
            for record in tf.data.TFRecordDataset(files, compression_type="GZIP")]


@pytest.mark.parametrize("key", [False, True], ids=["plain", "pass-through key"])
def test_the_records_and_files_of_tfxs_writer(tmp_path, key):
    batches = [_batch(0, 700, key), _batch(700, 1), _batch(701, 333, key)]
    theirs = _write(batches, tmp_path / "tfx", TFX_WRITER)
    ours = _write(batches, tmp_path / "tfxd", _ours())
    assert sorted(os.listdir(tmp_path / "tfxd")) == sorted(os.listdir(tmp_path / "tfx")) == \
        ["transformed_examples-00000-of-00001.gz"]
    expected = _records(theirs)
    assert len(expected) == 1034
    assert _records(ours) == expected


def test_tfxs_reader_reads_them(tmp_path):
    from tfx_bsl.public import tfxio

    batches = [_batch(0, 50), _batch(50, 25)]
    prefix = _write(batches, tmp_path, _ours())
    source = tfxio.TFExampleRecord(prefix + "*", schema=_schema())
    with beam.Pipeline(argv=direct_args("in_memory", 1)) as pipeline:
        rows = (pipeline | source.BeamSource(batch_size=1000)
                | beam.FlatMap(lambda batch: [tuple(row.items()) for row in batch.to_pylist()]))
        expected = [tuple(row.items()) for batch in batches for row in batch.to_pylist()]
        assert_that(rows, equal_to(expected))


def test_other_formats_go_to_tfxs_writer(tmp_path):
    seen = []

    @beam.ptransform_fn
    def tfx_writer(pcoll, schema, file_format, output_path):
        seen.append((file_format, output_path))
        return pcoll | beam.Map(lambda batch: batch)

    prefix = _write([_batch(0, 3)], tmp_path, _ours(tfx_writer), file_format="parquet")
    assert seen == [("parquet", prefix)]
    assert os.listdir(tmp_path) == []


def test_the_executor_writes_through_it_only_while_it_runs():
    assert tfx_transform.TransformProcessor._EncodeAndWrite is TFX_WRITER
    with executor._batched_writes():
        assert tfx_transform.TransformProcessor._EncodeAndWrite is not TFX_WRITER
    assert tfx_transform.TransformProcessor._EncodeAndWrite is TFX_WRITER
