"""TFRecord files of tf.Example column-wise: a block of records at a time, read by tf.data and parsed by
TensorFlow's parse_example with the features a sample showed, every byte accounted for
(parsed_examples); a block it cannot account for is decoded by tfx_bsl's C++ decoder (the one TFX's own
readers use), which learns its features for the blocks after it. Each feature, a list column, is then
made what the row-wise reader (records.read_tfrecord) makes of it, in typed_columns' forms: one value a
scalar, several a list, none (or no such feature) missing, bytes as UTF-8 text. No protobuf is parsed,
and no value converted, in Python per record.

What the row-wise reader reads otherwise is handed back (NotColumnar), so it names the bad record or
reads the values as it always has:

- a damaged file (a length or a record that does not match its CRC, a cut-off file), and one with no
  record: the row-wise reader names where, or says the file is empty;
- a record that is not a tf.Example, a feature with one kind in some records and another in others
  (the decoder refuses a block holding both);
- bytes that are not UTF-8 (the row-wise reader keeps them as bytes, beside the texts of other records);
- what typed_columns hands back itself, such as NaN in a feature with several values.

Whether a file is gzipped is told by its first two bytes, as the row-wise reader tells it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfxd.components.example_gen import input_files, parsed_examples, typed_columns
from tfxd.components.example_gen.csv_columns import NotColumnar

BLOCK_BYTES = 16 << 20  # records read at a time, about (their mean length measured on the first ones)
PROBE_RECORDS = 256  # records whose mean length sizes the blocks
MAX_BLOCK_RECORDS = 32_768
SAMPLE_RECORDS = 1_000  # of the first block, decoded by tfx_bsl to learn the features parse_example reads


def batches(path: str) -> Generator[pa.RecordBatch, None, None]:
    """The file's records as plain columns, a block of records at a time; NotColumnar where the row-wise
    reader must read the file (see the docstring)."""
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()  # no schema: each feature's kind as it is found
    parser = parsed_examples.Parser(lambda records: _decoded(decoder, records, path), SAMPLE_RECORDS)
    rows = 0
    for records in _blocks(path):
        decoded = parser.records(records)
        rows += decoded.num_rows
        names = decoded.schema.names
        columns = [_values(name, column) for name, column in zip(names, decoded.columns, strict=True)]
        yield typed_columns.plain(pa.Table.from_arrays(columns, names=names))
    if rows == 0:
        raise NotColumnar(f"{path} has no records")  # the row-wise reader says so


def _decoded(decoder: Any, records: Any, path: str) -> pa.RecordBatch:
    """``records`` (a string tensor) by tfx_bsl's decoder; NotColumnar for a record that is not a
    tf.Example or a feature of two kinds (the decoder refuses a block holding both)."""
    try:
        return decoder.DecodeBatch(records.numpy().tolist())
    except RuntimeError as exc:
        raise NotColumnar(f"{path}: {exc}") from None


def _blocks(path: str) -> Iterator[Any]:
    """The file's records, read and checked (each length and record against its CRC) by tf.data, as
    string tensors of about BLOCK_BYTES of records each (500k taxi rows in 2 files on 2 workers: tf.data's
    autotuning off, 11-13 s against 14-17 s)."""
    import tensorflow as tf  # start-up: TensorFlow loads only when TFRecords are read

    compression = "GZIP" if input_files.starts_gzipped(path) else ""
    dataset = tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=1 << 20)
    options = tf.data.Options()
    options.autotune.enabled = False  # its model's thread and the other workers contend for the cores
    dataset = dataset.with_options(options)
    try:
        probe = [record.numpy() for record in dataset.take(PROBE_RECORDS)]
        size = max(sum(map(len, probe)) // max(len(probe), 1), 1)
        yield from dataset.batch(min(max(BLOCK_BYTES // size, PROBE_RECORDS), MAX_BLOCK_RECORDS))
    except tf.errors.DataLossError as exc:
        raise NotColumnar(f"{path}: {exc.message}") from None


def _values(name: str, column: pa.Array) -> pa.Array:
    """A decoded feature (a list per record, null where a record lacks it) as the row-wise reader's
    values: a scalar column where no record has more than one value, else the lists as they are."""
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return column  # no record gave it a kind: missing everywhere
    lengths = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False)
    items = column.flatten()
    if pa.types.is_binary(items.type) or pa.types.is_large_binary(items.type):
        try:
            items = items.cast(pa.large_string())  # checks that every value is UTF-8
        except pa.ArrowInvalid:
            raise NotColumnar(f"feature {name!r} holds bytes that are not UTF-8 text") from None
    if lengths.max(initial=0) > 1:
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        return pa.LargeListArray.from_arrays(pa.array(offsets), items, mask=column.is_null())
    positions = np.cumsum(lengths) - 1  # where each record's one value is among the items
    return items.take(pa.array(positions, mask=lengths == 0))
