"""TFRecord frames written without TensorFlow: the bytes TensorFlow's own writer (tf.io.TFRecordWriter) writes
for the same records, one at a time or a batch at once; gzipped files that TensorFlow's reader reads back,
and that it refuses once a frame is damaged (the judge bites)."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from tfxd import tfrecords

RECORDS = [b"", b"a", b"\x00\xff" * 3, bytes(range(256)) * 40, "é".encode() * 1000, b"tail"]


def _tensorflow_writes(path, records: list[bytes]) -> bytes:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path.read_bytes()


def _tensorflow_reads(path, compression: str = "GZIP") -> list[bytes]:
    import tensorflow as tf

    return [record.numpy() for record in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def test_frames_are_tensorflows_bytes(tmp_path):
    expected = _tensorflow_writes(tmp_path / "tf.tfrecord", RECORDS)
    assert b"".join(tfrecords.framed(record) for record in RECORDS) == expected
    assert bytes(tfrecords.frames(RECORDS)) == expected
    # a slice of a larger array (an offset into its buffers), as ExampleGen's split filter gives
    framed = tfrecords.framed_all(pa.array(RECORDS, pa.binary()), RECORDS)
    assert bytes(tfrecords.joined(framed.slice(2, 3))) == _tensorflow_writes(tmp_path / "part.tfrecord", RECORDS[2:5])


def test_gzipped_frames_read_back_by_tensorflow(tmp_path):
    path = tmp_path / "records.gz"
    writer = tfrecords.GzipWriter(open(path, "wb"))  # noqa: SIM115 - the writer closes it
    writer.write(tfrecords.frames(RECORDS[:3]))
    writer.write(tfrecords.frames(RECORDS[3:]))
    writer.close()
    assert _tensorflow_reads(path) == RECORDS
    # gzip's fastest level, told in the header's extra flags (RFC 1952: 4 = fastest algorithm)
    assert path.read_bytes()[8] == 4


def test_a_damaged_frame_is_refused_by_tensorflow(tmp_path):
    import tensorflow as tf

    frames = bytearray(tfrecords.frames(RECORDS))
    frames[len(tfrecords.framed(RECORDS[0])) + 12] ^= 0x01  # the second record's byte
    path = tmp_path / "damaged.gz"
    path.write_bytes(gzip.compress(bytes(frames)))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        _tensorflow_reads(path)
