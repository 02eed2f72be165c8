"""TFRecord files written and read a batch at a time, without TensorFlow and without a Python call chain per
record.

ExampleGen's examples and Transform's transformed examples are written here: each record is framed as
TFRecord frames it (its length, the length's masked CRC-32C, the bytes, their masked CRC-32C), a whole
batch at once, and the frames are gzipped at zlib's fastest level. Beam's TFRecord sink, which TFX
writes through, frames and compresses one record at a time at zlib's default level (6), and that was
most of the writing time; level 1 makes files about a quarter larger, which every gzip reader (tf.data,
TFX's TFXIO, Beam) reads as before. A Beam worker that writes here never imports TensorFlow.

Reading (``gzipped_records``) is the other way round: a file's gzip members are inflated a block at a
time and the frames in each block unframed at once, every length and record checked against its masked
CRC-32C as TensorFlow's and Beam's readers check them. Beam's TFRecord source reads one record at a
time through its compressed-file wrapper, a Python call chain per record, and hands each record on as an
element of its own.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import google_crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

GZIP_LEVEL = 1  # zlib's fastest: see the module's docstring
READ_BYTES = 4 << 20  # gzipped bytes read at a time
INFLATED_BYTES = 16 << 20  # at most this many inflated at a time (a record longer than that spans blocks)
_HEADER = struct.Struct("<QI")  # a frame's length and the length's masked CRC-32C
_FOOTER = struct.Struct("<I")  # the record's masked CRC-32C


class DamagedRecordError(ValueError):
    """A TFRecord frame whose length or bytes do not match their CRC, or a file cut off mid-frame."""


def framed(record: bytes) -> bytes:
    """One TFRecord: length, its masked CRC-32C, the bytes, their masked CRC-32C (little-endian)."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", _masked_crc(length)) + record + struct.pack("<I", _masked_crc(record))


def framed_all(records: pa.Array, listed: list[bytes]) -> pa.Array:
    """``framed`` for every record of ``records`` (``listed`` as Python bytes), as one binary array."""
    sizes = pc.binary_length(records).to_numpy(zero_copy_only=False).astype("<u8")
    length_crcs = {size: _masked_crc(struct.pack("<Q", size)) for size in np.unique(sizes).tolist()}
    pieces = [fixed_width(sizes.view(np.uint8).reshape(-1, 8)),
              fixed_width(np.array([length_crcs[size] for size in sizes.tolist()], "<u4").view(np.uint8).reshape(-1, 4)),
              records,
              fixed_width(np.array([_masked_crc(record) for record in listed], "<u4").view(np.uint8).reshape(-1, 4))]
    return pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.binary()))


def frames(listed: list[bytes]) -> memoryview:
    """The TFRecord frames of ``listed``, one after the other: what a file of them holds."""
    return joined(framed_all(pa.array(listed, pa.binary()), listed))


def joined(values: pa.Array) -> memoryview:
    """The bytes of a binary array's values one after the other (no copy)."""
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + len(values) + 1]
    return memoryview(values.buffers()[2])[offsets[0]:offsets[-1]]


def fixed_width(rows: npt.NDArray[np.uint8]) -> pa.Array:
    """An (n, width) uint8 matrix as n binary values of ``width`` bytes each."""
    offsets = np.arange(len(rows) + 1, dtype=np.int32) * rows.shape[1]
    return pa.Array.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets),
                                                           pa.py_buffer(np.ascontiguousarray(rows))])


def _masked_crc(data: bytes) -> int:
    crc = int(google_crc32c.value(data))
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def gzipped_records(stream: BinaryIO) -> Iterator[list[bytes]]:
    """The records of a gzipped TFRecord file (every gzip member, as gzip readers take them), a block's
    complete frames at a time; raises DamagedRecordError, saying where, for a damaged or cut-off file."""
    inflater = zlib.decompressobj(wbits=31)
    member_started = False
    pending = b""  # inflated bytes of a frame the next block completes
    offset = 0  # of ``pending`` in the inflated file
    while block := stream.read(READ_BYTES):
        while block:
            member_started = True
            try:
                inflated = pending + inflater.decompress(block, INFLATED_BYTES)
            except zlib.error as error:
                raise DamagedRecordError(f"not gzip data after inflated byte {offset + len(pending)}: {error}") from None
            block = inflater.unconsumed_tail
            records, used = unframed(inflated, offset)
            if records:
                yield records
            pending, offset = inflated[used:], offset + used
            if inflater.eof:  # a next gzip member follows in the same file, or the file ends here
                block, inflater, member_started = inflater.unused_data, zlib.decompressobj(wbits=31), False
    if member_started or pending:
        raise DamagedRecordError(f"the file ends inside a gzip member or a record (at inflated byte {offset})")


def unframed(data: bytes, offset: int = 0) -> tuple[list[bytes], int]:
    """The records of the complete frames at the start of ``data`` and the length they take; what is left
    is the start of a frame not yet complete. ``offset``: where ``data`` starts in the inflated file, for
    errors."""
    records: list[bytes] = []
    position, end = 0, len(data)
    while position + _HEADER.size <= end:
        length, length_crc = _HEADER.unpack_from(data, position)
        if _masked_crc(data[position:position + 8]) != length_crc:
            raise DamagedRecordError(f"the length of the record at inflated byte {offset + position} does not "
                                     "match its CRC")
        start = position + _HEADER.size
        if start + length + _FOOTER.size > end:
            break
        record = data[start:start + length]
        if _masked_crc(record) != _FOOTER.unpack_from(data, start + length)[0]:
            raise DamagedRecordError(f"the record at inflated byte {offset + position} does not match its CRC")
        records.append(record)
        position = start + length + _FOOTER.size
    return records, position


class GzipWriter:
    """Frames (bytes-like) gzipped at GZIP_LEVEL into ``stream``, a file opened uncompressed (Beam's
    filesystems: local, gs://, ...); closing it closes both."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._packed = gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=GZIP_LEVEL)

    def write(self, data: Any) -> None:
        self._packed.write(data)

    def close(self) -> None:
        self._packed.close()
        self._stream.close()
