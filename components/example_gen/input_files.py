"""Opening input files on any Beam filesystem (local, gs://, ...), decompressing compressed ones."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, BinaryIO

Opener = Callable[[str], BinaryIO]  # open_file, or what stands in for it (a chunk of a file: csv_chunks)


def compressed(path: str) -> bool:
    """Whether ``path`` is decompressed as it is read (.gz, .bz2, .zst, .xz, ...: by its suffix, as Beam
    decides), so that it cannot be read from an offset."""
    from apache_beam.io.filesystem import CompressionTypes

    return CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED


def open_stored(path: str) -> BinaryIO:
    """A binary file object for the bytes as stored, compressed or not, on any Beam filesystem."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def starts_gzipped(path: str) -> bool:
    """Whether the stored bytes start with gzip's magic number: how TFRecord input is told gzipped or not,
    whatever its suffix (as TensorFlow's readers need to be told)."""
    with open_stored(path) as raw:
        return raw.read(2) == b"\x1f\x8b"


def open_file(path: str) -> BinaryIO:
    """A binary file object for any Beam filesystem (local, gs://, ...); a compressed file is
    decompressed as it is read."""
    from apache_beam.io.filesystems import FileSystems

    stream = FileSystems.open(path)
    if not compressed(path):
        return stream
    return io.BufferedReader(_Decompressed(stream), buffer_size=1 << 20)


class _Decompressed(io.RawIOBase):
    """Beam's decompressing stream as a raw stream: Beam's own lacks what io.TextIOWrapper asks of a
    binary file (``writable``, ``readinto``), so CSV and JSON lines could not be read from it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()
