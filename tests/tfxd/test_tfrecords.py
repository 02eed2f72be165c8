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


def test_gzipped_records_are_what_tensorflow_reads(tmp_path, monkeypatch):
    path = tmp_path / "records.gz"
    many = [bytes([i % 251]) * (i % 700) for i in range(3000)]
    writer = tfrecords.GzipWriter(open(path, "wb"))  # noqa: SIM115 - the writer closes it
    for start in range(0, len(many), 999):
        writer.write(tfrecords.frames(many[start:start + 999]))
    writer.close()
    # tiny blocks, so that frames and gzip's own framing are cut at every place a block can end
    monkeypatch.setattr(tfrecords, "READ_BYTES", 97)
    monkeypatch.setattr(tfrecords, "INFLATED_BYTES", 211)
    with open(path, "rb") as stream:
        read = [record for records in tfrecords.gzipped_records(stream) for record in records]
    assert read == _tensorflow_reads(path) == many


def test_gzipped_records_take_every_gzip_member(tmp_path):
    path = tmp_path / "members.gz"
    path.write_bytes(gzip.compress(bytes(tfrecords.frames(RECORDS[:2]))) + gzip.compress(bytes(tfrecords.frames(RECORDS[2:]))))
    with open(path, "rb") as stream:
        read = [record for records in tfrecords.gzipped_records(stream) for record in records]
    assert read == _tensorflow_reads(path) == RECORDS
    empty = tmp_path / "empty.gz"
    empty.write_bytes(b"")
    with open(empty, "rb") as stream:
        assert list(tfrecords.gzipped_records(stream)) == []


@pytest.mark.parametrize(("damage", "message"), [
    (lambda frames: frames.__setitem__(len(tfrecords.framed(RECORDS[0])) + 12, frames[len(tfrecords.framed(RECORDS[0])) + 12] ^ 1),
     "record at inflated byte 16 does not match its CRC"),
    (lambda frames: frames.__setitem__(16, frames[16] ^ 1), "length of the record at inflated byte 16 does not match"),
    (lambda frames: frames.__delitem__(slice(len(frames) - 3, None)), "ends inside a gzip member or a record"),
])
def test_a_damaged_file_is_refused_as_tensorflow_refuses_it(tmp_path, damage, message):
    import tensorflow as tf

    frames = bytearray(tfrecords.frames(RECORDS))
    damage(frames)
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(gzip.compress(bytes(frames)))
    with pytest.raises(tf.errors.DataLossError):
        _tensorflow_reads(path, "GZIP")
    with open(path, "rb") as stream, pytest.raises(tfrecords.DamagedRecordError, match=message):
        list(tfrecords.gzipped_records(stream))


def test_a_cut_off_gzip_member_is_refused(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(bytes(tfrecords.frames(RECORDS)))[:-5])
    with open(path, "rb") as stream, pytest.raises(tfrecords.DamagedRecordError, match="ends inside a gzip member"):
        list(tfrecords.gzipped_records(stream))
