"""Transform's transformed examples written a batch at a time (tfxd.tfrecords), in place of TFX's writer.

TFX's Transform encodes each batch tf.Transform gives back into tf.Examples with tfx_bsl's encoder, then
hands Beam's TFRecord sink one record at a time, which frames it and gzips it at zlib's default level: a
call chain and a compression call per record, at a level slower than the fastest (bench/RESULTS.md has
what it cost). Here the same encoder encodes
the batch, the batch is framed at once and gzipped at zlib's fastest level, through Beam's own file
sink: the same records in the same order, in files of the same names (transformed_examples-SSSSS-of-
NNNNN.gz), about a quarter larger. TFX's other output format (Parquet) is left to TFX.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from tfxd import tfrecords

SUFFIX = ".gz"  # TFX's: readers take the compression from it


class _FramedExamples(beam.DoFn):
    """A batch of transformed features -> their tf.Examples' TFRecord frames, as one bytes value. A column
    under ``internal_key`` (TFX's pass-through key, when a pipeline has one) is left out, as TFX leaves it."""

    def __init__(self, schema: Any, internal_key: str) -> None:
        self._schema = schema
        self._internal_key = internal_key
        self._encoder: Any = None

    def setup(self) -> None:
        from tfx_bsl.coders import example_coder

        self._encoder = example_coder.RecordBatchToExamplesEncoder(self._schema)

    def process(self, data_batch: tuple[pa.RecordBatch, dict[str, pa.Array]]) -> Iterator[bytes]:
        record_batch, _ = data_batch
        if self._internal_key in record_batch.schema.names:
            kept = [i for i, name in enumerate(record_batch.schema.names) if name != self._internal_key]
            record_batch = pa.RecordBatch.from_arrays([record_batch.column(i) for i in kept],
                                                      schema=pa.schema([record_batch.schema.field(i) for i in kept]))
        yield bytes(tfrecords.frames(self._encoder.encode(record_batch)))


class _FramesSink(FileBasedSink):
    """Beam's file sink (temporary files per bundle, renamed into shards when the write is done) for values
    that are already TFRecord frames, gzipped by tfxd.tfrecords."""

    def __init__(self, file_path_prefix: str) -> None:
        super().__init__(file_path_prefix, coder=beam.coders.BytesCoder(), file_name_suffix=SUFFIX,
                         compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, temp_path: str) -> tfrecords.GzipWriter:
        return tfrecords.GzipWriter(FileSystems.create(temp_path, self.mime_type, CompressionTypes.UNCOMPRESSED))

    def write_encoded_record(self, file_handle: tfrecords.GzipWriter, encoded_value: bytes) -> None:
        file_handle.write(encoded_value)


def encode_and_write(tfx_writer: Any, internal_key: str, tfrecord_format: str) -> Any:
    """TFX's TransformProcessor._EncodeAndWrite with TFRecord output written here; ``tfx_writer`` is TFX's
    own, for its other format."""

    @beam.ptransform_fn
    def write(pcoll: beam.PCollection, schema: Any, file_format: str, output_path: str) -> beam.pvalue.PDone:
        if file_format != tfrecord_format:
            return pcoll | tfx_writer(schema, file_format, output_path)
        return (pcoll | "EncodeAndFrame" >> beam.ParDo(_FramedExamples(schema, internal_key))
                | "WriteToTFRecord" >> beam.io.Write(_FramesSink(output_path)))

    return write
