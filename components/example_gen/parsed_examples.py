"""Blocks of serialized tf.Examples parsed by TensorFlow's fast parser where every byte of every record is
accounted for, else decoded by tfx_bsl's decoder.

tfx_bsl's schema-less decoder (the one TFX's readers use) parses each record in C++ but holds Python's
lock while it does: two ExampleGen workers (threads) took turns, and it was most of a TFRecord input's
time. ``tf.io.parse_example`` parses a block on TensorFlow's own threads, about five times faster, but
only the features it is told of, each of the kind it is told: it skips any other feature in silence.

So a ``Parser`` learns the features from a sample decoded by tfx_bsl, parses each block with them, and
then checks each record's length against the length its parsed features take in tf.Example's
encoding (``_entries`` and ``_message``: the packed encoding TensorFlow and tfx_bsl write, feature entries
in any order). A record that holds more (a feature not learnt, a feature present with no values where others
are not) or is encoded otherwise does not match: those records alone are decoded by tfx_bsl to learn
what they hold (a feature the sample never gave a kind) and the block parsed again, and a block still
not accounted for is decoded whole by tfx_bsl.
Where every feature a record lacks is written with no values (tfx_bsl's encoder writes a missing cell
so), the record matches with those empty entries counted, and each such feature is a column of the
block, as tfx_bsl's decoder makes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

_VARINT_STEPS = np.array([1 << (7 * step) for step in range(1, 10)], dtype=np.uint64)


class Parser:
    """The features met so far ({name: its kind as pa type, or None where only met without values}) and
    a block's parse with them."""

    def __init__(self, decode: Callable[[Any], pa.RecordBatch], sample: int) -> None:
        self.kinds: dict[str, pa.DataType | None] = {}
        self._decode = decode  # records (a string tensor) by tfx_bsl's decoder, which raises where it must
        self._sample = sample

    def spec(self) -> dict[str, Any]:
        """parse_example's features: those of a known kind."""
        import tensorflow as tf  # start-up: TensorFlow loads only when TFRecords are read

        dtypes = {"int": tf.int64, "float": tf.float32, "bytes": tf.string}
        return {name: tf.io.VarLenFeature(dtypes[_kind_name(kind)]) for name, kind in self.kinds.items()
                if kind is not None}

    def sample(self, records: Any) -> None:
        """Learn the features from ``records`` (a string tensor), decoded by tfx_bsl."""
        self._learn(self._decode(records))

    def records(self, records: Any) -> pa.RecordBatch:
        """``records`` (a string tensor) as tfx_bsl's decoder decodes them, a list column per feature
        present in some record (null where a record lacks it): parsed by TensorFlow where every record is
        accounted for; else with what the records not accounted for showed; else decoded."""
        import tensorflow as tf  # start-up: TensorFlow loads only when TFRecords are read

        if not self.kinds:  # what the features are, from a sample of the first block
            self.sample(records[:self._sample])
        batch, unaccounted = self.parse(records)
        if batch is None and 0 < len(unaccounted) < len(records):  # a feature the sample never gave a kind
            self.sample(tf.gather(records, unaccounted))
            batch, _ = self.parse(records)
        if batch is None:
            batch = self._decode(records)
            self._learn(batch)
        return batch

    def _learn(self, decoded: pa.RecordBatch) -> None:
        """Features as tfx_bsl's decoder gave them (a list column per feature; null where no record of
        the sample gave it a kind): new names and kinds replace what was known."""
        for field in decoded.schema:
            if pa.types.is_null(field.type):
                self.kinds.setdefault(field.name, None)
            else:
                self.kinds[field.name] = field.type.value_type

    def parse(self, records: Any) -> tuple[pa.RecordBatch | None, npt.NDArray[np.int64]]:
        """``records`` parsed with the features known, and the records not accounted for; None where
        any is not, or a feature of another kind (then none is named)."""
        import tensorflow as tf  # start-up: TensorFlow loads only when TFRecords are read

        try:
            parsed = tf.io.parse_example(records, self.spec())
        except (tf.errors.InvalidArgumentError, UnicodeDecodeError):  # a feature of another kind, not a tf.Example
            # (TensorFlow's message then quotes the record, and may not be UTF-8 itself)
            return None, np.zeros(0, np.int64)
        count = int(records.shape[0])
        columns: dict[str, pa.Array] = {}
        list_lengths = np.zeros((len(self.kinds), count), np.int64)  # a row per feature; 0: no value
        for row, (name, kind) in enumerate(self.kinds.items()):
            if kind is not None:
                columns[name], list_lengths[row] = _column(parsed[name], _kind_name(kind), count)
        keys = np.array([len(name.encode("utf-8")) for name in self.kinds], np.int64)
        entries = _entries(keys[:, None], list_lengths)
        valued = list_lengths > 0
        present = np.where(valued, entries, 0).sum(axis=0)  # each record's features with values
        missing = np.where(valued, 0, entries).sum(axis=0)  # ... the empty entries of those it lacks
        actual = tf.strings.length(records).numpy()
        plain = actual == _message(present)
        filled = actual == _message(present + missing)
        unaccounted = np.flatnonzero(~(plain | filled))
        if len(unaccounted):
            return None, unaccounted
        every = bool(np.any(filled & ~plain))  # some record writes every feature it lacks, empty
        names = [name for name in self.kinds
                 if every or (name in columns and columns[name].null_count < count)]
        return pa.RecordBatch.from_arrays([columns.get(name, pa.nulls(count)) for name in names],
                                          names=names), unaccounted


def _kind_name(kind: pa.DataType) -> str:
    return "int" if pa.types.is_integer(kind) else "float" if pa.types.is_floating(kind) else "bytes"


def _column(sparse: Any, kind: str, count: int) -> tuple[pa.Array, npt.NDArray[np.int64]]:
    """A parsed feature (a sparse tensor, a row per record) as tfx_bsl's list column (null where a record
    has no value) and the length of each record's list in tf.Example's encoding (0: no value)."""
    import tensorflow as tf  # start-up: TensorFlow loads only when TFRecords are read

    rows = sparse.indices.numpy()[:, 0]
    counts = np.bincount(rows, minlength=count)
    if kind == "bytes":
        sizes = tf.strings.length(sparse.values).numpy().astype(np.int64)
        data = tf.strings.reduce_join(sparse.values).numpy()
        value_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        items = pa.Array.from_buffers(pa.large_binary(), len(sizes), [None, pa.py_buffer(value_offsets),
                                                                       pa.py_buffer(data)])
        lengths = _sum(rows, 1 + _varint_bytes(sizes) + sizes, count)  # repeated bytes: a tag and length each
    else:
        values = sparse.values.numpy()
        items = pa.array(values)
        each = _varint_bytes(values.view(np.uint64)) if kind == "int" else np.full(len(values), 4, np.int64)
        payload = _sum(rows, each, count)
        lengths = np.where(counts > 0, 1 + _varint_bytes(payload) + payload, 0)  # one packed field
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    column = pa.LargeListArray.from_arrays(pa.array(offsets), items, mask=pa.array(counts == 0))
    return column, lengths


def _entries(keys: npt.NDArray[np.int64], list_lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The bytes a feature map entry takes in Features (its tag and length too), for keys of ``keys``
    bytes and Features holding a list of ``list_lengths`` bytes (0: a Feature with no list)."""
    feature = np.where(list_lengths > 0, 1 + _varint_bytes(list_lengths) + list_lengths, 0)
    entry = 1 + _varint_bytes(keys) + keys + 1 + _varint_bytes(feature) + feature
    return 1 + _varint_bytes(entry) + entry


def _message(features: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """A tf.Example's length for Features of ``features`` bytes (none: an empty record)."""
    return np.where(features > 0, 1 + _varint_bytes(features) + features, 0)


def _sum(rows: npt.NDArray[np.int64], each: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.int64]:
    return np.bincount(rows, weights=each, minlength=count).astype(np.int64)


def _varint_bytes(values: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """How many bytes each value takes as a protobuf varint (a negative int64 as its 64 bits: 10)."""
    unsigned = values.astype(np.uint64, copy=False)
    sizes = np.ones(unsigned.shape, np.int64)
    largest = unsigned.max(initial=0)
    for step in _VARINT_STEPS:  # a comparison per byte the largest value needs (lengths: mostly none)
        if largest < step:
            break
        sizes += unsigned >= step
    return sizes
