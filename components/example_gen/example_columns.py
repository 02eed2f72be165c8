"""TFRecord files of tf.Example column-wise: a block of records at a time, unframed by tfxd.tfrecords and
decoded by tfx_bsl's C++ decoder (the one TFX's own readers use) into list columns, then made what the
row-wise reader (records.read_tfrecord) makes of each feature, in typed_columns' forms: one value a
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

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfxd import tfrecords
from tfxd.components.example_gen import input_files, typed_columns
from tfxd.components.example_gen.csv_columns import NotColumnar


def batches(path: str) -> Iterator[pa.RecordBatch]:
    """The file's records as plain columns, a block's records at a time (up to 16 MB of them:
    tfxd.tfrecords); NotColumnar where the row-wise reader must read the file (see the docstring)."""
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()  # no schema: each feature's kind as it is found
    rows = 0
    for block in _blocks(path):
        try:
            decoded = decoder.DecodeBatch(block)
        except RuntimeError as exc:  # not a tf.Example, or a feature of two kinds
            raise NotColumnar(f"{path}: {exc}") from None
        rows += decoded.num_rows
        names = decoded.schema.names
        columns = [_values(name, column) for name, column in zip(names, decoded.columns, strict=True)]
        yield typed_columns.plain(pa.Table.from_arrays(columns, names=names))
    if rows == 0:
        raise NotColumnar(f"{path} has no records")  # the row-wise reader says so


def _blocks(path: str) -> Iterator[list[bytes]]:
    read = tfrecords.gzipped_records if input_files.starts_gzipped(path) else tfrecords.plain_records
    with input_files.open_stored(path) as stream:
        try:
            yield from read(stream)
        except tfrecords.DamagedRecordError as exc:
            raise NotColumnar(f"{path}: {exc}") from None


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
